// `memwall plot`: one roofline, one speedup and one memory chart per
// (lever, op, backend, shape), drawn by gnuplot from a results file.
//
// Roofline: log-log, x = arithmetic intensity (FLOP/byte), y = GFLOP/s.
// Measured roofs are solid (DRAM triad thick, cache levels thin, compute
// peak thick); spec-sheet roofs of GPUs dashed. Each variant is a point;
// an arrow runs from the naive rung to the fastest optimized variant.
// Speedup: one bar per variant (speedup_vs_naive), vendor bar coloured apart.
// Memory: one bar per variant (peak_bytes), when the results record it.
//
// Each figure is a .gp script plus .dat files in the output folder, run as
// `gnuplot script.gp` there; both stay, so the figure can be redrawn by hand.
#include "harness/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "harness/ceilings.hpp"

namespace mw {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------- runs

struct Run {
    std::string variant, role, dtype;
    int rung = 0;
    double intensity = 0, gflops = 0, speedup = 0;
    double peak_bytes = 0, memory_vs_naive = 0;  // 0: not recorded (older results files)
    bool correct = true;
};

struct Group {
    std::string lever, op, backend, shape, stem;
    std::vector<Run> runs;
};

std::string str(const json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}
double num(const json& j, const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

// Emulated CUDA runs on the CPU: their times say nothing about a GPU.
bool timing_meaningful(const json& r) {
    if (str(r, "backend") == "cuda-emu") return false;
    auto it = r.find("timing_meaningful");
    return it == r.end() || !it->is_boolean() || it->get<bool>();
}

std::string slug(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '_' || c == '.') {
            out += char(std::tolower(c));
        } else if (!out.empty() && out.back() != '-') {
            out += '-';
        }
    }
    while (!out.empty() && out.back() == '-') out.pop_back();
    return out.empty() ? "x" : out;
}

std::vector<Group> group_runs(const json& results) {
    std::vector<Group> groups;
    std::map<std::string, size_t> index;
    if (!results.contains("runs") || !results["runs"].is_array()) return groups;
    for (const auto& r : results["runs"]) {
        if (!r.is_object() || !timing_meaningful(r)) continue;
        Group key{str(r, "lever"), str(r, "op"), str(r, "backend"), str(r, "shape_str"), "", {}};
        if (key.shape.empty() && r.contains("shape")) key.shape = r["shape"].dump();
        std::string id = key.lever + "\n" + key.op + "\n" + key.backend + "\n" + key.shape;
        auto [it, fresh] = index.try_emplace(id, groups.size());
        if (fresh) groups.push_back(key);
        Run run;
        run.variant = str(r, "variant");
        run.role = str(r, "role");
        run.dtype = str(r, "dtype");
        run.rung = int(num(r, "rung"));
        run.intensity = num(r, "intensity");
        run.gflops = num(r, "gflops");
        run.speedup = num(r, "speedup_vs_naive");
        run.peak_bytes = num(r, "peak_bytes");
        run.memory_vs_naive = num(r, "memory_vs_naive");
        run.correct = !r.contains("correct") || !r["correct"].is_boolean() || r["correct"].get<bool>();
        groups[it->second].runs.push_back(run);
    }
    // File stem; the shape joins it only where one (lever, op, backend) has several.
    std::map<std::string, int> shapes_per;
    for (const auto& g : groups) shapes_per[g.lever + "/" + g.op + "/" + g.backend]++;
    for (auto& g : groups) {
        g.stem = slug(g.lever) + "-" + slug(g.op) + "-" + slug(g.backend);
        if (shapes_per[g.lever + "/" + g.op + "/" + g.backend] > 1) g.stem += "-" + slug(g.shape);
        std::stable_sort(g.runs.begin(), g.runs.end(), [](const Run& a, const Run& b) {
            auto order = [](const Run& r) { return r.role == "vendor" ? 1 : 0; };
            if (order(a) != order(b)) return order(a) < order(b);
            return a.rung < b.rung;
        });
    }
    return groups;
}

bool is_naive(const Run& r) { return r.role == "reference" || (r.rung == 0 && r.role != "vendor"); }

// ---------------------------------------------------------------- gnuplot text

// A gnuplot double-quoted string: backslashes and quotes escaped, "\n" a line break.
std::string q(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    return out + "\"";
}

std::string g(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

// 3 significant figures, no exponent: what a reader wants beside a roof.
std::string fmt(double v) {
    char buf[32];
    if (v >= 100)
        std::snprintf(buf, sizeof buf, "%.0f", v);
    else if (v >= 10)
        std::snprintf(buf, sizeof buf, "%.1f", v);
    else
        std::snprintf(buf, sizeof buf, "%.2f", v);
    return buf;
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// Whether this gnuplot has the cairo PNG terminal (sharper text); else `png`.
bool has_pngcairo() {
    static int cached = -1;
    if (cached < 0) {
        cached = 0;
        // stdin from /dev/null: on a terminal (a shell, a pty-driven Jupyter kernel) gnuplot
        // pages this list and waits for Return, unseen, since its output is our pipe.
        if (FILE* p = popen("gnuplot -e 'set terminal' </dev/null 2>&1", "r")) {
            char buf[512];
            while (std::fgets(buf, sizeof buf, p))
                if (std::string(buf).find("pngcairo") != std::string::npos) cached = 1;
            pclose(p);
        }
    }
    return cached == 1;
}

// Terminal lines for the two outputs of a figure; the script draws once for
// SVG, switches terminal and replots for PNG.
// A figure's canvas: the roofline is shown full width; bar charts sit two
// to a row (on the HTML page, in markdown viewers), so they get a smaller
// canvas and their text keeps a readable size when scaled down.
struct Canvas {
    const char* size;
    int svg_font, png_font;
};
constexpr Canvas kWide{"1280,800", 13, 11};
constexpr Canvas kHalf{"880,680", 15, 13};

std::string svg_terminal(const std::string& stem, const Canvas& c = kWide) {
    return std::string("set terminal svg size ") + c.size + " dynamic noenhanced font 'Sans," +
           std::to_string(c.svg_font) + "' background '#ffffff'\nset output '" + stem + ".svg'\n";
}
std::string png_terminal(const std::string& stem, const Canvas& c = kWide) {
    const std::string term = std::string(has_pngcairo() ? "pngcairo" : "png") + " size " + c.size +
                             " noenhanced font 'Sans," + std::to_string(c.png_font) + "'";
    return "set terminal " + term + "\nset output '" + stem + ".png'\nreplot\nunset output\n";
}

void write_file(const fs::path& p, const std::string& text, std::vector<fs::path>* written) {
    std::ofstream f(p);
    if (!f) throw std::runtime_error("cannot write " + p.string());
    f << text;
    if (written) written->push_back(p);
}

void run_gnuplot(const fs::path& dir, const std::string& script) {
    const std::string err = script + ".err";
    const std::string cmd =
        "cd " + shell_quote(dir.string()) + " && gnuplot " + shell_quote(script) + " 2> " + shell_quote(err);
    const int rc = std::system(cmd.c_str());
    std::ifstream e(dir / err);
    std::string msg((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
    std::error_code ec;
    fs::remove(dir / err, ec);
    if (rc != 0) throw std::runtime_error("gnuplot failed on " + (dir / script).string() + ":\n" + msg);
}

// ---------------------------------------------------------------- roofs

struct Roof {
    std::string title;
    double gbps = 0;   // > 0: a bandwidth diagonal y = gbps * x, up to `peak`
    double peak = 0;   // the compute roof the diagonal meets (or a horizontal roof when gbps == 0)
    std::string style;  // gnuplot line style
};

std::string canonical_dtype(const std::string& d) {
    if (d == "f32" || d == "float") return "fp32";
    if (d == "f64" || d == "double") return "fp64";
    if (d == "f16") return "fp16";
    if (d == "i8" || d == "s8" || d == "u8") return "int8";
    return d;
}

const char* const kMeasured = "#1a1a1a";

std::vector<Roof> cpu_roofs(const Ceilings& c, const std::set<std::string>& dtypes) {
    std::vector<Roof> roofs;
    const double peak = peak_gflops(c, "fp32");
    const double dram = dram_gbps(c);
    const std::string thr = " (" + std::to_string(std::max(c.threads, 1)) + " threads)";
    if (peak > 0)
        roofs.push_back({"fp32 FMA peak " + fmt(peak) + " GFLOP/s" + thr, 0, peak,
                         std::string("lw 3 lc rgb '") + kMeasured + "'"});
    for (const auto& d : dtypes) {
        if (d == "fp32") continue;
        double p = peak_gflops(c, d);
        if (p > 0)
            roofs.push_back({d + " peak " + fmt(p) + (d == "int8" ? " GOP/s" : " GFLOP/s"), 0, p,
                             "lw 2 dt 4 lc rgb '#555555'"});
    }
    const double top = peak > 0 ? peak : 1e300;
    if (c.l1_gbps > 0) roofs.push_back({"L1 " + fmt(c.l1_gbps) + " GB/s", c.l1_gbps, top, "lw 1.5 lc rgb '#9ecae1'"});
    if (c.l2_gbps > 0) roofs.push_back({"L2 " + fmt(c.l2_gbps) + " GB/s", c.l2_gbps, top, "lw 1.5 lc rgb '#6baed6'"});
    if (c.l3_gbps > 0) roofs.push_back({"L3 " + fmt(c.l3_gbps) + " GB/s", c.l3_gbps, top, "lw 1.5 lc rgb '#3182bd'"});
    if (dram > 0)
        roofs.push_back({"DRAM triad " + fmt(dram) + " GB/s" + thr, dram, top,
                         std::string("lw 3 lc rgb '") + kMeasured + "'"});
    // Read-dominated ops (a GEMV) are judged by the read-only stream.
    if (!c.dram_read_by_threads_gbps.empty() && dram_read_gbps(c) > 0)
        roofs.push_back({"DRAM read-only " + fmt(dram_read_gbps(c)) + " GB/s" + thr, dram_read_gbps(c), top,
                         std::string("lw 2 dt 2 lc rgb '") + kMeasured + "'"});
    return roofs;
}

double gpu_peak(const Ceilings& c, const std::string& dtype) {
    double best = 0;
    for (const auto& p : c.gpu_peaks)
        if (canonical_dtype(p.dtype) == canonical_dtype(dtype)) best = std::max(best, p.gflops);
    return best;
}

std::vector<Roof> gpu_roofs(const Ceilings& c, const std::string& gpu_name, const std::set<std::string>& dtypes) {
    std::vector<Roof> roofs;
    // Measured: solid.
    double top = 0;
    for (const auto& d : dtypes) {
        double p = gpu_peak(c, d);
        if (p <= 0) continue;
        top = std::max(top, p);
        roofs.push_back({"measured " + d + " peak " + fmt(p / 1e3) + " TFLOP/s", 0, p,
                         std::string("lw 3 lc rgb '") + kMeasured + "'"});
    }
    if (top <= 0) top = gpu_peak(c, "fp32");
    if (top <= 0) top = 1e300;
    if (c.gpu_l2_gbps > 0)
        roofs.push_back({"measured L2 " + fmt(c.gpu_l2_gbps) + " GB/s", c.gpu_l2_gbps, top, "lw 1.5 lc rgb '#6baed6'"});
    if (c.gpu_dram_gbps > 0)
        roofs.push_back({"measured DRAM " + fmt(c.gpu_dram_gbps) + " GB/s", c.gpu_dram_gbps, top,
                         std::string("lw 3 lc rgb '") + kMeasured + "'"});
    // Spec sheets: dashed. The board at hand if known, else two landmarks.
    std::vector<const GpuSpec*> specs;
    if (const GpuSpec* s = find_gpu_spec(gpu_name.empty() ? c.gpu_name : gpu_name)) specs.push_back(s);
    if (specs.empty()) specs = {find_gpu_spec("A100-SXM4-80GB"), find_gpu_spec("H100-SXM5-80GB")};
    const char* colours[] = {"#d95f02", "#7570b3"};
    for (size_t i = 0; i < specs.size(); ++i) {
        const GpuSpec& s = *specs[i];
        const std::string lc = std::string(" dt 2 lc rgb '") + colours[i % 2] + "'";
        double spec_top = s.fp32_tflops * 1e3;
        roofs.push_back({s.name + " FP32 " + fmt(s.fp32_tflops) + " TFLOP/s (spec)", 0, spec_top, "lw 2" + lc});
        if (dtypes.count("fp16") || dtypes.count("bf16")) {
            spec_top = s.fp16_tflops * 1e3;
            roofs.push_back({s.name + " FP16 tensor " + fmt(s.fp16_tflops) + " TFLOP/s (spec)", 0, spec_top,
                             "lw 2" + lc});
        }
        roofs.push_back({s.name + " HBM " + fmt(s.hbm_gbps) + " GB/s (spec)", s.hbm_gbps, spec_top, "lw 2" + lc});
    }
    return roofs;
}

// ---------------------------------------------------------------- roofline

const char* const kPalette[] = {"#7f7f7f", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b",
                                "#e377c2", "#17becf", "#bcbd22", "#d62728", "#393b79"};
const char* const kVendor = "#ff7f0e";

std::string run_colour(const Run& r, size_t i) {
    if (r.role == "vendor") return kVendor;
    if (is_naive(r)) return kPalette[0];
    return kPalette[1 + i % 9];
}
int run_point_type(const Run& r) { return r.role == "vendor" ? 9 : is_naive(r) ? 5 : 7; }

std::string run_label(const Run& r, bool show_dtype) {
    std::string s = r.role == "vendor" ? r.variant + " (vendor)" : std::to_string(r.rung) + ": " + r.variant;
    if (show_dtype && !r.dtype.empty()) s += " [" + r.dtype + "]";
    if (!r.correct) s += " (WRONG RESULT)";
    return s;
}

std::string machine_line(const json& results, const Group& grp) {
    const json m = results.value("machine", json::object());
    std::string cpu = str(m, "cpu_model");
    std::string gpu = m.contains("gpu") && m["gpu"].is_object() ? str(m["gpu"], "name") : "";
    std::string who = grp.backend == "cuda" && !gpu.empty() ? gpu : cpu;
    return who.empty() ? std::string("unnamed machine") : who;
}

// One roofline figure: its points and roofs, its axes (whole decades of
// FLOP/byte and GFLOP/s) and the unit its y values are written in.
struct RooflineFigure {
    std::vector<Run> pts;
    std::set<std::string> dtypes;
    std::vector<Roof> roofs;
    std::string stem;
    bool gpu = false;
    double xlo = 1e300, xhi = 0, ylo = 1e300, yhi = 0;
    // GPU figures in TFLOP/s: six-digit GFLOP/s are hard to read.
    double scale = 1.0;
    std::string unit = "GFLOP/s";

    std::string Y(double gflops) const { return g(gflops / scale); }
    double ux() const { return std::log10(xhi / xlo); }  // the axes' spans, in decades
    double uy() const { return std::log10(yhi / ylo); }
    double gap() const { return 0.034 * uy(); }  // one text line at 800 px
    double width() const { return 0.22 * ux(); }  // a label's width, generously
    bool show_dtype() const { return dtypes.size() > 1; }
    // Labels go right of their point, or left of it in the right quarter of
    // the plot where they would run into the key.
    bool on_left(const Run& r) const { return std::log10(r.intensity / xlo) / ux() > 0.72; }
};

// Axes: every point and every ridge (where a diagonal meets its roof),
// with room around them, snapped to whole decades.
void set_axes(RooflineFigure& f) {
    for (const auto& r : f.pts) {
        f.xlo = std::min(f.xlo, r.intensity), f.xhi = std::max(f.xhi, r.intensity);
        f.ylo = std::min(f.ylo, r.gflops), f.yhi = std::max(f.yhi, r.gflops);
    }
    for (const auto& rf : f.roofs) {
        if (rf.peak < 1e299) f.yhi = std::max(f.yhi, rf.peak);
        if (rf.gbps > 0 && rf.peak < 1e299 && rf.title.find("L1") == std::string::npos &&
            rf.title.find("L2") == std::string::npos)
            f.xhi = std::max(f.xhi, rf.peak / rf.gbps);
    }
    // Start a decade left of the leftmost ridge so every diagonal is seen climbing.
    for (const auto& rf : f.roofs)
        if (rf.gbps > 0 && rf.peak < 1e299) f.xlo = std::min(f.xlo, rf.peak / rf.gbps / 10);
    f.xlo = std::pow(10, std::floor(std::log10(f.xlo / 2)));
    f.xhi = std::pow(10, std::ceil(std::log10(f.xhi * 2)));
    f.ylo = std::pow(10, std::floor(std::log10(f.ylo / 2)));
    f.yhi = std::pow(10, std::ceil(std::log10(f.yhi * 1.5)));
}

// The figure's points, dtypes, roofs, axes and unit; no points, no figure.
std::optional<RooflineFigure> roofline_figure(const json& results, const Ceilings& c, const Group& grp) {
    RooflineFigure f;
    for (const auto& r : grp.runs)
        if (r.intensity > 0 && r.gflops > 0) f.pts.push_back(r);
    if (f.pts.empty()) return std::nullopt;
    for (const auto& r : f.pts) f.dtypes.insert(canonical_dtype(r.dtype.empty() ? "f32" : r.dtype));
    f.gpu = grp.backend == "cuda";
    const json m = results.value("machine", json::object());
    const std::string gpu_name = m.contains("gpu") && m["gpu"].is_object() ? str(m["gpu"], "name") : "";
    f.roofs = f.gpu ? gpu_roofs(c, gpu_name, f.dtypes) : cpu_roofs(c, f.dtypes);
    set_axes(f);
    f.scale = f.gpu ? 1e3 : 1.0;
    f.unit = f.gpu ? "TFLOP/s" : "GFLOP/s";
    f.stem = "roofline-" + grp.stem;
    return f;
}

// Roof segments, one data block each: from where the line enters the plot
// to the ridge, then along the roof to the right edge. Then the points, one
// block per variant.
void write_roofline_data(const RooflineFigure& f, const fs::path& dir, std::vector<fs::path>* written) {
    std::ostringstream roofs_dat;
    roofs_dat << "# intensity(FLOP/byte) " << f.unit << "; one block per roof, in the order of the script's plot\n";
    for (const auto& rf : f.roofs) {
        roofs_dat << "# " << rf.title << "\n";
        if (rf.gbps > 0) {
            double x0 = std::max(f.xlo, f.ylo / rf.gbps);
            double ridge = std::min(f.xhi, rf.peak / rf.gbps);
            roofs_dat << g(x0) << " " << f.Y(rf.gbps * x0) << "\n" << g(ridge) << " " << f.Y(rf.gbps * ridge) << "\n";
            if (ridge < f.xhi) roofs_dat << g(f.xhi) << " " << f.Y(rf.peak) << "\n";
        } else {
            roofs_dat << g(f.xlo) << " " << f.Y(rf.peak) << "\n" << g(f.xhi) << " " << f.Y(rf.peak) << "\n";
        }
        roofs_dat << "\n\n";
    }
    std::ostringstream pts_dat;
    pts_dat << "# intensity(FLOP/byte) " << f.unit << " variant; one block per variant\n";
    for (const auto& r : f.pts) pts_dat << g(r.intensity) << " " << f.Y(r.gflops) << " " << q(r.variant) << "\n\n\n";
    write_file(dir / (f.stem + ".roofs.dat"), roofs_dat.str(), written);
    write_file(dir / (f.stem + ".points.dat"), pts_dat.str(), written);
}

// The script's head: terminal, title, axes, grid, key and margins.
void roofline_frame(std::ostream& s, const RooflineFigure& f, const json& results, const Ceilings& c,
                    const Group& grp) {
    s << "# Roofline of " << grp.lever << "/" << grp.op << " (" << grp.backend << ", " << grp.shape
      << "), written by `memwall plot`.\n# Redraw with: gnuplot " << f.stem << ".gp\n";
    s << svg_terminal(f.stem);
    std::string dtype_list;
    for (const auto& t : f.dtypes) dtype_list += (dtype_list.empty() ? "" : ",") + t;
    std::string sub = machine_line(results, grp) + "  |  roofs: " +
                      (f.gpu ? std::string("measured solid, spec sheet dashed")
                             : "measured (" + (c.source.empty() ? std::string("no calibration") : c.source) + ")");
    s << "set title " << q("Roofline: " + grp.lever + " / " + grp.op + "   (" + grp.backend + ", " + grp.shape + ", " +
                           dtype_list + ")\n" + sub)
      << "\n";
    s << "set xlabel 'arithmetic intensity (FLOP/byte)'\n";
    s << "set ylabel 'performance (" << f.unit << ")'\n";
    s << "set logscale xy\n";
    s << "set xrange [" << g(f.xlo) << ":" << g(f.xhi) << "]\nset yrange [" << f.Y(f.ylo) << ":" << f.Y(f.yhi) << "]\n";
    s << "set format x '%g'\nset format y '%g'\nset mxtics 10\nset mytics 10\n";
    s << "set grid xtics ytics mxtics mytics lc rgb '#e5e5e5' lw 1, lc rgb '#f3f3f3' lw 1\n";
    s << "set style textbox opaque noborder margins 0.5,0.3\n";  // labels stay legible over roof lines
    // One key line per roof and per point: past ~22 lines at the usual
    // spacing the key wraps into a second column, drawn over the plot
    // (gemv_q's 24 variants), so a long key is set tighter and smaller.
    const bool long_key = f.roofs.size() + f.pts.size() > 22;
    s << "set key outside right top vertical Left reverse noopaque samplen 2.5 box lc rgb '#bbbbbb' "
      << (long_key ? "spacing 1.0 font ',9'" : "spacing 1.3") << "\n";
    s << "set rmargin at screen 0.64\nset lmargin at screen 0.08\nset tmargin at screen 0.88\nset bmargin at screen 0.10\n";
}

// Point labels' heights (log10 GFLOP/s): at their points, pushed apart
// vertically where two labels would overlap (same column, close in log y).
std::vector<double> label_heights(const RooflineFigure& f) {
    const auto& pts = f.pts;
    const double gap = f.gap(), width = f.width();
    // A push puts a label this far above the one below it (a little more
    // than `gap`, so rounding can't bring it back within `gap`).
    const double push = gap * 1.01;
    std::vector<size_t> order(pts.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pts[a].gflops < pts[b].gflops; });
    std::vector<double> lv(pts.size());
    std::vector<size_t> placed;
    for (size_t i : order) {
        double v = std::log10(pts[i].gflops);
        const double u = std::log10(pts[i].intensity);
        // Each push moves the label strictly above a placed one (by a little
        // more than `gap`, so rounding can't bring it back within `gap`), so
        // at most placed.size() pushes can happen.
        bool moved = true;
        for (size_t pass = 0; moved && pass <= placed.size(); ++pass) {
            moved = false;
            for (size_t j : placed)
                if (std::abs(std::log10(pts[j].intensity) - u) < width && std::abs(lv[j] - v) < gap) {
                    v = lv[j] + push;
                    moved = true;
                }
        }
        lv[i] = v;
        placed.push_back(i);
    }
    // The pass above only pushes up; centre each chain of pushed labels on
    // its points instead, so the top one does not climb into the roof.
    for (size_t a = 0; a < order.size();) {
        size_t b = a + 1;
        while (b < order.size() && lv[order[b]] - lv[order[b - 1]] <= push * 1.0001 &&
               std::abs(std::log10(pts[order[b]].intensity / pts[order[b - 1]].intensity)) < width)
            ++b;
        double shift = 0;
        for (size_t k = a; k < b; ++k) shift += lv[order[k]] - std::log10(pts[order[k]].gflops);
        shift /= double(b - a);
        for (size_t k = a; k < b; ++k) lv[order[k]] -= shift;
        a = b;
    }
    return lv;
}

// Each point's label at its height, with a leader line where it was moved;
// returns the next free label tag.
int roofline_labels(std::ostream& s, const RooflineFigure& f, const std::vector<double>& lv) {
    int tag = 1;
    for (size_t i = 0; i < f.pts.size(); ++i) {
        const Run& r = f.pts[i];
        const bool left = f.on_left(r);
        const double lx = r.intensity * std::pow(10, (left ? -0.025 : 0.025) * f.ux()), ly = std::pow(10, lv[i]);
        s << "set label " << tag++ << " " << q(run_label(r, f.show_dtype())) << " at " << g(lx) << "," << f.Y(ly)
          << (left ? " right" : " left") << " boxed front tc rgb '" << run_colour(r, i) << "'\n";
        if (std::abs(lv[i] - std::log10(r.gflops)) > 0.2 * f.gap())
            s << "set arrow from " << g(r.intensity) << "," << f.Y(r.gflops) << " to " << g(lx) << "," << f.Y(ly)
              << " nohead lw 0.6 lc rgb '#aaaaaa' back\n";
    }
    return tag;
}

// The lesson in one arrow: naive -> fastest correct optimized variant.
void lesson_arrow(std::ostream& s, const RooflineFigure& f, int tag) {
    const Run* naive = nullptr;
    const Run* best = nullptr;
    for (const auto& r : f.pts) {
        if (!naive && is_naive(r)) naive = &r;
        if (r.role == "optimized" && r.correct && (!best || r.gflops > best->gflops)) best = &r;
    }
    if (!naive || !best || best == naive) return;
    // Stop the head just short of the target so its marker stays visible.
    const double du = std::log10(best->intensity / naive->intensity) / f.ux();
    const double dv = std::log10(best->gflops / naive->gflops) / f.uy();
    const double len = std::hypot(du, dv);
    const double t = len > 0.05 ? 1 - 0.018 / len : 1.0;
    const double ex = naive->intensity * std::pow(best->intensity / naive->intensity, t);
    const double ey = naive->gflops * std::pow(best->gflops / naive->gflops, t);
    s << "set arrow from " << g(naive->intensity) << "," << f.Y(naive->gflops) << " to " << g(ex) << "," << f.Y(ey)
      << " head filled size screen 0.014,20 lw 2.5 lc rgb '#d62728' front\n";
    const double mx = std::sqrt(naive->intensity * best->intensity), my = std::sqrt(naive->gflops * best->gflops);
    s << "set label " << tag << " " << q(fmt(best->gflops / naive->gflops) + "x") << " at " << g(mx) << ","
      << f.Y(my) << (f.on_left(*best) ? " left offset char 0.8,0" : " right offset char -0.8,0")
      << " front tc rgb '#d62728' font ',14'\n";
}

// The plot command: every roof, then every point, from the data files.
void roofline_plot(std::ostream& s, const RooflineFigure& f) {
    s << "plot ";
    bool first = true;
    for (size_t i = 0; i < f.roofs.size(); ++i) {
        s << (first ? "" : ", \\\n     ") << "'" << f.stem << ".roofs.dat' index " << i << " using 1:2 with lines "
          << f.roofs[i].style << " title " << q(f.roofs[i].title);
        first = false;
    }
    for (size_t i = 0; i < f.pts.size(); ++i) {
        const Run& r = f.pts[i];
        s << (first ? "" : ", \\\n     ") << "'" << f.stem << ".points.dat' index " << i
          << " using 1:2 with points pt " << run_point_type(r) << " ps 2 lc rgb '" << run_colour(r, i)
          << "' title " << q(run_label(r, f.show_dtype()) + "  " + fmt(r.gflops / f.scale) + " " + f.unit);
        first = false;
    }
    s << "\n";
}

void plot_roofline(const json& results, const Ceilings& c, const Group& grp, const fs::path& dir,
                   std::vector<fs::path>* written) {
    const std::optional<RooflineFigure> f = roofline_figure(results, c, grp);
    if (!f) return;
    write_roofline_data(*f, dir, written);
    std::ostringstream s;
    roofline_frame(s, *f, results, c, grp);
    const int next_tag = roofline_labels(s, *f, label_heights(*f));
    lesson_arrow(s, *f, next_tag);
    roofline_plot(s, *f);
    s << png_terminal(f->stem);
    write_file(dir / (f->stem + ".gp"), s.str(), written);
    run_gnuplot(dir, f->stem + ".gp");
    if (written) written->push_back(dir / (f->stem + ".svg")), written->push_back(dir / (f->stem + ".png"));
}

// ---------------------------------------------------------------- bar charts

// One bar per variant: the speedup and memory charts differ only in what a
// bar measures and how it is labelled.
struct Bar {
    const Run* run;
    double value;
    std::string label;  // printed above the bar
};

struct BarChart {
    std::string stem, what, title, ylabel, yformat;
    std::vector<Bar> bars;
    double reference = 0;  // > 0: a dashed line at this value (1x, the naive rung's peak)
};

std::string bar_colour(const Run& r) { return r.role == "vendor" ? kVendor : is_naive(r) ? "#9e9e9e" : "#1f77b4"; }

void draw_bars(const BarChart& c, const Group& grp, const fs::path& dir, std::vector<fs::path>* written) {
    double lo = 1e300, hi = 0;
    for (const auto& b : c.bars) lo = std::min(lo, b.value), hi = std::max(hi, b.value);
    if (c.reference > 0) lo = std::min(lo, c.reference), hi = std::max(hi, c.reference);
    // Log scale once the bars span more than 20x: a 300x rung would flatten the rest.
    const bool logy = hi / lo > 20;
    const double ybottom = logy ? std::pow(10, std::floor(std::log10(lo / 1.5))) : 0;
    const double ytop = logy ? std::pow(10, std::ceil(std::log10(hi * 3))) : hi * 1.2;

    std::set<std::string> dtypes;
    for (const auto& b : c.bars) dtypes.insert(b.run->dtype);
    const bool show_dtype = dtypes.size() > 1;
    std::ostringstream dat;
    dat << "# index " << c.what << " colour(0xRRGGBB) label variant\n";
    for (size_t i = 0; i < c.bars.size(); ++i) {
        const Bar& b = c.bars[i];
        dat << i << " " << g(b.value) << " 0x" << bar_colour(*b.run).substr(1) << " " << q(b.label) << " "
            << q(run_label(*b.run, show_dtype)) << "\n";
    }
    write_file(dir / (c.stem + ".dat"), dat.str(), written);

    std::ostringstream s;
    s << "# " << c.what << " of " << grp.lever << "/" << grp.op << " (" << grp.backend << ", " << grp.shape
      << "), written by `memwall plot`.\n# Redraw with: gnuplot " << c.stem << ".gp\n";
    s << svg_terminal(c.stem, kHalf);
    s << "set title " << q(c.title) << "\n";
    s << "set ylabel '" << c.ylabel << "'\nset xlabel 'variant (rung: name)'\n";
    s << "set xrange [-0.6:" << g(c.bars.size() - 0.4) << "]\n";
    if (logy) s << "set logscale y\n";
    s << "set format y '" << c.yformat << "'\n";
    s << "set yrange [" << g(ybottom) << ":" << g(ytop) << "]\n";
    s << "set grid ytics lc rgb '#e5e5e5'\nset xtics rotate by 25 right nomirror\nset key off\n";
    s << "set style fill solid 0.9 border lc rgb '#333333'\n";
    s << "set bmargin 7\nset rmargin 4\nset lmargin 12\n";
    if (c.reference > 0)
        s << "set arrow from graph 0, first " << g(c.reference) << " to graph 1, first " << g(c.reference)
          << " nohead lw 1.5 dt 2 lc rgb '#555555' back\n";
    const bool vendor = std::any_of(c.bars.begin(), c.bars.end(), [](const Bar& b) { return b.run->role == "vendor"; });
    s << "set label 101 'optimized rungs' at graph 0.99, graph 0.95 right tc rgb '#1f77b4'\n";
    if (vendor) s << "set label 100 'vendor library' at graph 0.99, graph 0.91 right tc rgb '" << kVendor << "'\n";
    // Bars as explicit boxes so a log axis gets a proper floor.
    s << "plot '" << c.stem << ".dat' using 1:2:($1-0.35):($1+0.35):(" << (logy ? g(ybottom) : "0")
      << "):2:3:xtic(5) with boxxyerror lc rgb variable, \\\n"
      << "     '' using 1:2:4 with labels offset 0,0.8 font ',13'\n";
    s << png_terminal(c.stem, kHalf);
    write_file(dir / (c.stem + ".gp"), s.str(), written);
    run_gnuplot(dir, c.stem + ".gp");
    if (written) written->push_back(dir / (c.stem + ".svg")), written->push_back(dir / (c.stem + ".png"));
}

// Breaks a comma-separated list into lines of at most `width` characters
// (a half-width chart has no room for a long shape on one line).
std::string wrap_commas(const std::string& text, std::size_t width) {
    std::string out, line;
    std::size_t start = 0;
    while (start <= text.size()) {
        std::size_t end = text.find(',', start);
        const std::string piece = text.substr(start, end == std::string::npos ? std::string::npos : end - start + 1);
        if (!line.empty() && line.size() + piece.size() > width) out += line + "\n", line.clear();
        line += piece;
        if (end == std::string::npos) break;
        start = end + 1;
    }
    return out + line;
}

std::string chart_title(const std::string& what, const Group& grp) {
    return what + ": " + grp.lever + " / " + grp.op + "\n" + wrap_commas("(" + grp.backend + ", " + grp.shape + ")", 64);
}

void plot_speedup(const json& results, const Group& grp, const fs::path& dir, std::vector<fs::path>* written) {
    BarChart c{"speedup-" + grp.stem, "Speedups", "", "speedup over the naive rung (x)", "%gx", {}, 1.0};
    for (const auto& r : grp.runs)
        if (r.speedup > 0) c.bars.push_back({&r, r.speedup, fmt(r.speedup) + "x"});
    if (c.bars.empty()) return;
    c.title = chart_title("Speedup over naive", grp) + "\n" + machine_line(results, grp) +
              "\nfrom best-of-N times measured in the same run";
    draw_bars(c, grp, dir, written);
}

// Peak memory per variant (inputs and outputs included, see docs/results.md, "Results
// files"); each bar is labelled with its size and its ratio to the naive
// rung's peak, whose height the dashed line marks.
void plot_memory(const json& results, const Group& grp, const fs::path& dir, std::vector<fs::path>* written) {
    constexpr double MiB = 1024.0 * 1024.0;
    BarChart c{"memory-" + grp.stem, "Peak memory", "", "peak memory (MiB)", "%g", {}, 0};
    for (const auto& r : grp.runs) {
        if (r.peak_bytes <= 0) continue;
        std::string label = fmt(r.peak_bytes / MiB) + " MiB";
        if (r.memory_vs_naive > 0 && !is_naive(r)) label += " (" + fmt(r.memory_vs_naive) + "x)";
        c.bars.push_back({&r, r.peak_bytes / MiB, label});
        if (is_naive(r) && c.reference == 0) c.reference = r.peak_bytes / MiB;
    }
    if (c.bars.empty()) return;
    c.title = chart_title("Peak memory", grp) + "\n" + machine_line(results, grp) +
              "\ninputs + outputs + the variant's peak extra over prepare and one call";
    draw_bars(c, grp, dir, written);
}

}  // namespace

std::string plot_stem(const json& results, const json& run) {
    if (!timing_meaningful(run)) return "";
    std::string shape = str(run, "shape_str");
    if (shape.empty() && run.contains("shape")) shape = run["shape"].dump();
    for (const auto& grp : group_runs(results))
        if (grp.lever == str(run, "lever") && grp.op == str(run, "op") && grp.backend == str(run, "backend") &&
            grp.shape == shape)
            return grp.stem;
    return "";
}

bool gnuplot_available() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

void plot_results(const json& results, const fs::path& out_dir, std::vector<fs::path>* written) {
    if (!gnuplot_available()) throw std::runtime_error("gnuplot not found: apt-get install gnuplot-nox");
    fs::create_directories(out_dir);
    const Ceilings c = ceilings_from_json(results.value("ceilings", json::object()));
    for (const auto& grp : group_runs(results)) {
        plot_roofline(results, c, grp, out_dir, written);
        plot_speedup(results, grp, out_dir, written);
        plot_memory(results, grp, out_dir, written);
    }
}

void plot_lines(const fs::path& out_dir, const std::string& stem, const std::string& title, const std::string& xlabel,
                const std::string& ylabel, const std::vector<LineSeries>& series, bool logx,
                std::vector<fs::path>* written) {
    if (!gnuplot_available()) throw std::runtime_error("gnuplot not found: apt-get install gnuplot-nox");
    fs::create_directories(out_dir);
    static const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"};
    std::ostringstream dat;
    for (std::size_t i = 0; i < series.size(); ++i) {
        dat << "# " << series[i].title << "\n";
        for (const auto& [x, y] : series[i].points) dat << g(x) << " " << g(y) << "\n";
        dat << "\n\n";  // gnuplot index separator
    }
    write_file(out_dir / (stem + ".dat"), dat.str(), written);
    std::ostringstream s;
    s << "# " << title << ", written by memwall.\n# Redraw with: gnuplot " << stem << ".gp\n";
    s << svg_terminal(stem);
    s << "set title " << q(title) << "\nset xlabel " << q(xlabel) << "\nset ylabel " << q(ylabel) << "\n";
    if (logx) s << "set logscale x\n";
    s << "set grid lc rgb '#e5e5e5'\nset key top right\nset lmargin 12\nset rmargin 4\n";
    s << "plot ";
    for (std::size_t i = 0; i < series.size(); ++i) {
        const bool sparse = series[i].points.size() < 60;
        s << (i ? ", \\\n     " : "") << "'" << stem << ".dat' index " << i << " using 1:2 with "
          << (sparse ? "linespoints pt 7 ps 0.8" : "lines") << " lw 2 lc rgb '" << colours[i % 5] << "' title "
          << q(series[i].title);
    }
    s << "\n" << png_terminal(stem);
    write_file(out_dir / (stem + ".gp"), s.str(), written);
    run_gnuplot(out_dir, stem + ".gp");
    if (written) written->push_back(out_dir / (stem + ".svg")), written->push_back(out_dir / (stem + ".png"));
}

}  // namespace mw
