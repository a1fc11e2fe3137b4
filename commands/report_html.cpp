// `memwall report DIR --html [--compare OTHER]`: see commands/report_html.hpp.
//
// The page is plain HTML and CSS, no script: plots are gnuplot's SVG inlined
// (their ids prefixed per plot, so several can share one document), long
// tables sit in <details>. Levers come from the results files themselves,
// ordered by their level number (levels/NN-<lever>/) and then by name, so a
// lever that lands later appears without an edit here.
#include "commands/report_html.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "commands/claims/formulas.hpp"
#include "commands/levels.hpp"
#include "harness/plot.hpp"
#include "harness/results.hpp"
#include "harness/command.hpp"
#include "harness/strings.hpp"

namespace mw {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ------------------------------------------------------------- the folder

constexpr const char* kClaimsSchema = "memwall.claims-report/1";
constexpr const char* kJobSchema = "memwall.job/1";

struct ResultsFile {
    fs::path path;
    json doc;
};

struct Folder {
    fs::path dir;
    json ceilings;  // ceilings.json
    json job;       // job.json, or null
    json claims;    // a claims report, or null
    fs::path claims_path;
    std::vector<ResultsFile> results;
    std::vector<std::string> ignored;  // JSON files without a memwall schema
};

std::string family(const std::string& schema) { return schema.substr(0, schema.find('/')); }

json parse_file(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) throw UsageError("cannot read '" + p.string() + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)
        throw UsageError("'" + p.string() + "' is empty (a run that was cut off?); re-run the command that makes it");
    try {
        return json::parse(text);
    } catch (const json::parse_error& e) {
        throw UsageError("'" + p.string() + "' is not valid JSON (truncated?): " + e.what() +
                         "; re-run the command that makes it");
    }
}

// Reads and validates every JSON file of `dir`; throws UsageError naming the
// first bad file.
Folder load_folder(const fs::path& dir) {
    if (!fs::exists(dir)) throw UsageError("results folder '" + dir.string() + "' does not exist");
    if (!fs::is_directory(dir))
        throw UsageError("'" + dir.string() + "' is not a folder; give the folder that holds ceilings.json and the "
                         "results files");
    Folder f;
    f.dir = dir;
    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    const std::map<std::string, std::string> expected = {{"memwall.results", kResultsSchema},
                                                         {"memwall.ceilings", kCeilingsSchema},
                                                         {"memwall.claims-report", kClaimsSchema},
                                                         {"memwall.job", kJobSchema}};
    for (auto& p : files) {
        json doc = parse_file(p);
        const std::string schema =
            doc.is_object() && doc.contains("schema") && doc["schema"].is_string() ? doc["schema"].get<std::string>() : "";
        const auto it = expected.find(family(schema));
        if (it == expected.end()) {
            f.ignored.push_back(p.filename().string());
            continue;
        }
        if (schema != it->second)
            throw UsageError("'" + p.string() + "' has schema \"" + schema + "\"; this memwall reads " + it->second +
                             " (made by another version: re-run it with this build)");
        if (schema == kResultsSchema) {
            try {
                validate_results(doc);
            } catch (const std::exception& e) {
                throw UsageError("'" + p.string() + "': " + e.what());
            }
            f.results.push_back({p, std::move(doc)});
        } else if (schema == kCeilingsSchema) {
            if (!doc.contains("ceilings") || !doc["ceilings"].is_object())
                throw UsageError("'" + p.string() + "' has no \"ceilings\" object");
            if (p.filename() == "ceilings.json" || f.ceilings.is_null()) f.ceilings = std::move(doc);
        } else if (schema == kClaimsSchema) {
            if (!doc.contains("claims") || !doc["claims"].is_array())
                throw UsageError("'" + p.string() + "' has no \"claims\" array");
            f.claims = std::move(doc);
            f.claims_path = p;
        } else {
            f.job = std::move(doc);
        }
    }
    if (!f.job.is_null())
        for (auto& name : f.job.value("files", json::array()))
            if (name.is_string() && !fs::exists(dir / name.get<std::string>()))
                throw UsageError("'" + (dir / name.get<std::string>()).string() +
                                 "' is missing (job.json lists it); re-run scripts/main-job.sh");
    if (!fs::exists(dir / "ceilings.json"))
        throw UsageError("'" + (dir / "ceilings.json").string() +
                         "' is missing; make it with: memwall calibrate --out " + (dir / "ceilings.json").string());
    if (f.results.empty())
        throw UsageError("no results files (" + std::string(kResultsSchema) + ") in '" + dir.string() +
                         "'; make one with: memwall run LEVER --out " + (dir / "LEVER-cpu.json").string());
    return f;
}

// ------------------------------------------------------------- text

std::string esc(const std::string& s) { return html_escape(s); }

std::string num_or_dash(const json& r, const char* key, int prec = 3, const char* suffix = "") {
    auto it = r.find(key);
    return it != r.end() && it->is_number() ? fmt(it->get<double>(), prec) + suffix : "—";
}

// 957x, 49.3x, 1.31x, 0.501x: no exponents in a table.
std::string ratio_str(double v) { return v >= 100 ? fmt("%.0fx", v) : v >= 10 ? fmt("%.1fx", v) : fmt("%.3gx", v); }

std::string ratio_or_dash(const json& r, const char* key) {
    auto it = r.find(key);
    return it != r.end() && it->is_number() ? ratio_str(it->get<double>()) : "—";
}

// The speedup's range over paired rounds (speedup_vs_naive_range), small, under the ratio; "" without one.
std::string range_html(const json& r) {
    auto it = r.find("speedup_vs_naive_range");
    if (it == r.end() || !it->is_object() || !it->value("lo", json()).is_number() || !it->value("hi", json()).is_number())
        return "";
    const json& g = *it;
    return "<br><small title=\"the range over " + std::to_string(g.value("rounds", 0)) +
           " interleaved rounds, each round's best against the naive rung's best of the same round\">" +
           ratio_str(g["lo"].get<double>()) + "–" + ratio_str(g["hi"].get<double>()) + "</small>";
}

std::string duration_str(double s) {
    return s >= 60 ? fmt("%d m %02d s", int(s) / 60, int(s) % 60) : fmt("%.1f s", s);
}

std::string anchor(const std::string& s) {
    std::string o;
    for (unsigned char c : s) o += std::isalnum(c) ? char(std::tolower(c)) : '-';
    return o;
}

bool timed(const json& r) {
    return r.value("ran", true) && r.value("timing_meaningful", true) && r.value("backend", "") != "cuda-emu" &&
           r["time_s"].value("samples", 0) > 0;
}

std::string shape_of(const json& r) { return r.value("shape_str", r["shape"].dump()); }

// ------------------------------------------------------------- plots

// gnuplot's SVG, made fit to inline: the prolog dropped, ids (and the
// references to them) prefixed so that several plots share a document.
std::string inline_svg(const fs::path& p, const std::string& prefix, const std::string& label) {
    std::ifstream f(p);
    if (!f) return "";
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    const auto start = s.find("<svg");
    if (start == std::string::npos) return "";
    s = s.substr(start);
    auto replace_all = [&](const std::string& from, const std::string& to) {
        for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
    };
    replace_all("id='gp", "id='" + prefix + "gp");
    replace_all("id=\"gp", "id=\"" + prefix + "gp");
    replace_all("#gp", "#" + prefix + "gp");
    replace_all("id=\"gnuplot_canvas\"", "id=\"" + prefix + "canvas\"");
    s.replace(0, 4, "<svg class=\"plot\" role=\"img\" aria-label=\"" + esc(label) + "\" data-plot=\"" + esc(prefix) + "\"");
    return s;
}

struct Plots {
    fs::path tmp;    // where they are drawn
    fs::path final;  // DIR/plots
    int next_id = 0;
    bool enabled = true;  // false: --no-plots
};

// ------------------------------------------------------------- claims

// The measured figure a CPU-experiment claim concerns, read from this
// folder's runs of the same op (select + field, per peak when asked).
std::string measured_for_claim(const json& claim, const std::vector<const json*>& runs, const json& doc_ceilings) {
    const json& check = claim.value("check", json::object());
    if (check.value("kind", "") != "cpu-experiment" || !check.contains("field")) return "";
    std::istringstream cmd(check.value("command", ""));
    std::string word, op;
    cmd >> word >> op;  // "run gemm ..."
    const std::string field = check["field"];
    const json sel = check.value("select", json::object());
    const bool take_min = check.value("reduce", "max") == "min";
    const json* chosen = nullptr;
    for (const json* r : runs) {
        if ((*r)["op"] != op || !timed(*r) || !(*r)["correct"].get<bool>()) continue;
        bool ok = true;
        for (auto& [k, v] : sel.items()) ok = ok && r->contains(k) && (*r)[k] == v;
        if (!ok || !(*r).contains(field) || !(*r)[field].is_number()) continue;
        const double v = (*r)[field].get<double>();
        if (!chosen || (take_min ? v < (*chosen)[field].get<double>() : v > (*chosen)[field].get<double>())) chosen = r;
    }
    if (!chosen) return "";
    double v = (*chosen)[field].get<double>();
    if (check.contains("per_peak_dtype")) {  // the same peak the experiment divides by: the best over thread counts
        double peak = 0;
        for (auto& pk : doc_ceilings.value("peaks", json::array()))
            if (pk.value("dtype", "") == check["per_peak_dtype"]) peak = std::max(peak, pk.value("gflops", 0.0));
        if (peak <= 0) return "";
        v /= peak;
    }
    const std::string unit = claim["published"].value("unit", "");
    try {
        v = calc::to_unit(v, check.value("dim", "1"), unit);
    } catch (const std::exception&) {
    }
    return fmt(v, 3) + (unit == "%" || unit == "x" ? "" : " ") + unit + " (this job's " + op + " " +
           (*chosen)["variant"].get<std::string>() + " at " + shape_of(*chosen) + ")";
}

std::string verdict_class(const std::string& v) {
    if (v == "reproduced" || v == "correct" || v == "faster") return "ok";
    if (v == "differs" || v == "slower" || v == "INCORRECT" || v == "error" || v.rfind("now INCORRECT", 0) == 0)
        return "bad";
    return "na";
}

std::string badge(const std::string& v) { return "<span class=\"b " + verdict_class(v) + "\">" + esc(v) + "</span>"; }

void claims_table(std::ostream& h, const std::vector<const json*>& rows, const std::vector<const json*>& runs,
                  const json& ceilings) {
    h << "<table class=\"claims\"><thead><tr><th>claim</th><th>published</th><th>recomputed here</th>"
         "<th>verdict</th><th>measured in this job</th></tr></thead><tbody>\n";
    for (const json* c : rows) {
        const std::string v = c->value("verdict", "");
        h << "<tr><td><b>" << esc(c->value("id", "")) << "</b><br>" << esc(c->value("statement", ""));
        if (c->contains("explanation") && v != "reproduced")
            h << "<div class=\"why\">" << esc((*c)["explanation"].get<std::string>()) << "</div>";
        h << "</td><td>" << esc(c->value("published_text", "")) << "</td><td>" << esc(c->value("ours_text", "—"))
          << "</td><td>" << badge(v);
        if (c->contains("severity")) h << "<br><small>" << esc((*c)["severity"].get<std::string>()) << "</small>";
        const std::string m = measured_for_claim(*c, runs, ceilings);
        h << "</td><td>" << (m.empty() ? "—" : esc(m)) << "</td></tr>\n";
    }
    h << "</tbody></table>\n";
}

// ------------------------------------------------------------- page parts

const char* kStyle = R"(
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d1d1f;background:#f6f7f9;margin:0}
main{max-width:1320px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:28px;margin:8px 0 4px}h2{font-size:22px;margin:40px 0 8px;padding-top:10px;border-top:3px solid #1f77b4}
h3{font-size:17px;margin:26px 0 8px;color:#333}
.sub{color:#555;margin:0 0 18px}
section.card,div.card{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:14px 18px;margin:14px 0}
table{border-collapse:collapse;font-size:13px;margin:8px 0;background:#fff}
th,td{border:1px solid #dde1e6;padding:4px 8px;text-align:right;vertical-align:top}
th{background:#eef1f5;font-weight:600}
td.l,th.l,table.claims td,table.claims th{text-align:left}
table.claims td:first-child{max-width:520px}
.b{display:inline-block;padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600;white-space:nowrap}
.b.ok{background:#d8f3dc;color:#1b5e20}.b.bad{background:#fde2e1;color:#b71c1c}.b.na{background:#eceff1;color:#455a64}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:12px;margin:10px 0}
figure.roofline{grid-column:1/-1;max-width:1100px;justify-self:center;width:100%}
figure{margin:0;background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:4px}
svg.plot{width:100%;height:auto;display:block}
.why{color:#666;font-size:12px;margin-top:3px}
.msg{color:#666;font-size:12px;text-align:left;max-width:360px}
.toc a{margin-right:14px}
.dim{color:#888}
.disturbed{background:#fff3cd}
details{margin:8px 0}summary{cursor:pointer;color:#1f4e79;font-weight:600}
code{background:#eef1f5;padding:1px 4px;border-radius:3px}
)";

void machine_block(std::ostream& h, const Folder& f) {
    const json& m = f.ceilings.value("machine", json::object());
    const json& c = f.ceilings["ceilings"];
    h << "<section class=\"card\" id=\"machine\"><h2 style=\"border:0;margin-top:0\">Machine and measured ceilings</h2>\n";
    h << "<p><b>" << esc(m.value("cpu_model", "unknown CPU")) << "</b>, " << m.value("cores", 0) << " hardware threads";
    if (m.contains("caches") && m["caches"].is_object()) {
        h << "; caches";
        for (auto& [k, v] : m["caches"].items()) h << " " << esc(k) << " " << esc(v.is_string() ? v.get<std::string>() : v.dump());
    }
    if (m.value("hypervisor", false)) h << "; a virtual machine";
    h << ".<br>";
    if (m.contains("cpu_flags")) {
        std::vector<std::string> fl;
        for (auto& x : m["cpu_flags"]) fl.push_back(x.get<std::string>());
        h << "<span class=\"dim\">flags: " << esc(join(fl)) << "</span><br>";
    }
    h << "compiler " << esc(m.value("compiler", "?")) << " (" << esc(m.value("build_type", "")) << esc(m.value("compiler_flags", ""))
      << "), commit <code>" << esc(m.value("git_commit", "?")) << "</code>" << (m.value("git_dirty", false) ? " with local changes" : "");
    if (m.contains("gpu") && m["gpu"].is_object() && m["gpu"].contains("name"))
        h << "<br>GPU: <b>" << esc(m["gpu"]["name"].get<std::string>()) << "</b>";
    h << "</p>\n<table><tr><th class=\"l\">ceiling</th><th>measured</th></tr>\n";
    auto row = [&](const std::string& what, const std::string& val) {
        h << "<tr><td class=\"l\">" << esc(what) << "</td><td>" << esc(val) << "</td></tr>\n";
    };
    if (c.contains("dram_triad_gbps"))
        for (size_t i = 0; i < c["dram_triad_gbps"].size(); ++i)
            row("DRAM triad, " + std::to_string(i + 1) + " thread" + (i ? "s" : ""), fmt(c["dram_triad_gbps"][i].get<double>()) + " GB/s");
    if (c.contains("dram_read_by_threads_gbps"))
        for (size_t i = 0; i < c["dram_read_by_threads_gbps"].size(); ++i)
            row("DRAM read-only, " + std::to_string(i + 1) + " thread" + (i ? "s" : ""),
                fmt(c["dram_read_by_threads_gbps"][i].get<double>()) + " GB/s");
    for (const char* k : {"l1", "l2", "l3"}) {
        const std::string key = std::string(k) + "_gbps";
        if (c.contains(key) && c[key].is_number() && c[key].get<double>() > 0) {
            std::string name = k;
            name[0] = 'L';
            std::string val = fmt(c[key].get<double>()) + " GB/s";
            if (c.contains("caches_bytes") && c["caches_bytes"].contains(std::string(k) == "l1" ? "l1d" : k))
                val += " (size " + bytes_str(c["caches_bytes"][std::string(k) == "l1" ? "l1d" : k].get<double>()) + ")";
            row(name + " plateau, all threads", val);
        }
    }
    if (c.contains("clock_ghz") && c["clock_ghz"].is_number() && c["clock_ghz"].get<double>() > 0)
        row("core clock", fmt(c["clock_ghz"].get<double>()) + " GHz");
    for (auto& p : c.value("peaks", json::array()))
        row(p.value("dtype", "") + " peak, " + p.value("isa", "") + ", " + std::to_string(p.value("threads", 0)) + " thread" +
                (p.value("threads", 0) == 1 ? "" : "s"),
            fmt(p.value("gflops", 0.0)) + (p.value("dtype", "") == "int8" ? " GOP/s" : " GFLOP/s"));
    if (c.contains("gpu_name") && !c["gpu_name"].get<std::string>().empty()) {
        row("GPU DRAM", fmt(c.value("gpu_dram_gbps", 0.0)) + " GB/s");
        for (auto& p : c.value("gpu_peaks", json::array()))
            row("GPU " + p.value("dtype", "") + " peak (" + p.value("isa", "") + ")", fmt(p.value("gflops", 0.0)) + " GFLOP/s");
    }
    h << "</table>\n<p class=\"dim\">From " << esc(f.dir.filename().string()) << "/ceilings.json ("
      << esc(c.value("source", "measured")) << "). Every roofline below draws these roofs.</p>\n";
    if (!f.job.is_null() && f.job.contains("parts")) {
        h << "<h3>How long the job took</h3><table><tr><th class=\"l\">part</th><th>wall time</th><th>CPU time</th></tr>\n";
        double total = 0, total_cpu = 0;
        for (auto& p : f.job["parts"]) {
            const std::string name = p.value("name", "?");
            const bool sub = name.rfind("  ", 0) == 0;  // a lever's share of the run above it
            h << "<tr><td class=\"l\"" << (sub ? " style=\"padding-left:24px\"" : "") << ">" << esc(sub ? name.substr(2) : name)
              << "</td><td>" << duration_str(p.value("seconds", 0.0)) << "</td><td>"
              << (p.contains("cpu_seconds") ? duration_str(p["cpu_seconds"].get<double>()) : "") << "</td></tr>\n";
            if (!sub) total += p.value("seconds", 0.0), total_cpu += p.value("cpu_seconds", 0.0);
        }
        h << "<tr><th class=\"l\">total</th><th>" << duration_str(total) << "</th><th>"
          << (total_cpu > 0 ? duration_str(total_cpu) : "") << "</th></tr></table>\n";
        if (f.job.contains("note")) h << "<p class=\"dim\">" << esc(f.job["note"].get<std::string>()) << "</p>\n";
    }
    h << "</section>\n";
}

struct GroupRef {
    const ResultsFile* file;
    std::string op, backend, dtype, shape;
    std::vector<const json*> runs;
};

void runs_table(std::ostream& h, const GroupRef& g) {
    bool units = false, mfu = false, mem = false, counters = false;
    std::string unit = "units";
    for (const json* r : g.runs) {
        units = units || (r->contains("units_per_s") && (*r)["units_per_s"].is_number());
        if (r->contains("unit")) unit = (*r)["unit"].get<std::string>();
        mfu = mfu || (r->contains("mfu") && (*r)["mfu"].is_number());
        mem = mem || (r->contains("peak_bytes") && (*r)["peak_bytes"].is_number());
        counters = counters || r->contains("counters");
    }
    h << "<table><thead><tr><th>rung</th><th class=\"l\">variant</th><th class=\"l\">role</th><th>time best [median]</th>"
         "<th>samples</th><th>GFLOP/s</th><th>GB/s</th><th>FLOP/B</th><th>vs naive</th><th>vs vendor</th><th>of roof</th>";
    if (units) h << "<th>" << esc(unit) << "/s</th>";
    if (mfu) h << "<th>MFU</th>";
    if (mem) h << "<th>peak memory</th><th>memory vs naive</th>";
    h << "<th>correct</th><th>max abs err</th><th>max rel err</th><th class=\"l\">check</th></tr></thead><tbody>\n";
    for (const json* rp : g.runs) {
        const json& r = *rp;
        h << "<tr><td>" << r["rung"] << "</td><td class=\"l\" title=\"" << esc(r.value("rationale", "")) << "\">"
          << esc(r["variant"].get<std::string>()) << "</td><td class=\"l\">" << esc(r["role"].get<std::string>()) << "</td>";
        if (!r.value("ran", true)) {
            h << "<td colspan=\"" << (8 + units + mfu + 2 * mem) << "\" class=\"l\">not run: " << esc(r.value("skip_reason", ""))
              << "</td><td>" << badge("not run") << "</td><td></td><td></td><td></td></tr>\n";
            continue;
        }
        const json& t = r["time_s"];
        const bool disturbed = r.contains("disturbance") && r["disturbance"].value("disturbed", false);
        if (timed(r))
            h << "<td" << (disturbed ? " class=\"disturbed\" title=\"disturbed while timed: " +
                                           esc(r["disturbance"].value("why", std::string())) +
                                           ". Slower than this machine can do.\"" : std::string())
              << ">" << time_str(t.value("best", t.value("min", 0.0))) << " [" << time_str(t.value("median", 0.0))
              << "]" << (disturbed ? " (disturbed)" : "") << "</td><td>" << t.value("samples", 0) << "</td><td>"
              << num_or_dash(r, "gflops") << "</td><td>" << num_or_dash(r, "gbps") << "</td>";
        else
            h << "<td class=\"dim\">emulated: not timed</td><td>—</td><td>—</td><td>—</td>";
        h << "<td>" << num_or_dash(r, "intensity") << "</td><td>" << ratio_or_dash(r, "speedup_vs_naive") << range_html(r)
          << "</td><td>"
          << ratio_or_dash(r, "speedup_vs_vendor") << "</td><td>" << num_or_dash(r, "fraction_of_roof", 2) << "</td>";
        if (units) h << "<td>" << (timed(r) ? num_or_dash(r, "units_per_s", 4) : "—") << "</td>";
        if (mfu) h << "<td>" << num_or_dash(r, "mfu", 2) << "</td>";
        if (mem)
            h << "<td>" << (r.contains("peak_bytes") && r["peak_bytes"].is_number() ? bytes_str(r["peak_bytes"].get<double>()) : "—")
              << "</td><td>" << ratio_or_dash(r, "memory_vs_naive") << "</td>";
        const bool ok = r["correct"].get<bool>();
        h << "<td>" << badge(ok ? "correct" : "INCORRECT") << "</td><td>" << num_or_dash(r["error"], "max_abs", 3)
          << "</td><td>" << num_or_dash(r["error"], "max_rel", 3) << "</td><td class=\"msg\">"
          << esc(r.value("check_message", r.value("check_note", ""))) << "</td></tr>\n";
    }
    h << "</tbody></table>\n";
    if (counters) {
        std::set<std::string> names;
        for (const json* r : g.runs)
            if (r->contains("counters"))
                for (auto& [k, v] : (*r)["counters"].items()) names.insert(k);
        h << "<details><summary>Counters (" << names.size() << ")</summary><table><tr><th class=\"l\">variant</th>";
        for (auto& n : names) h << "<th>" << esc(n) << "</th>";
        h << "</tr>\n";
        for (const json* r : g.runs) {
            if (!r->contains("counters")) continue;
            h << "<tr><td class=\"l\">" << esc((*r)["variant"].get<std::string>()) << "</td>";
            for (auto& n : names) h << "<td>" << num_or_dash((*r)["counters"], n.c_str(), 6) << "</td>";
            h << "</tr>\n";
        }
        h << "</table></details>\n";
    }
}

// Plots of one group, drawn once per results file; inlined.
void group_plots(std::ostream& h, const GroupRef& g, Plots& plots, const std::map<const ResultsFile*, fs::path>& plot_dirs) {
    std::string stem;
    for (const json* r : g.runs)
        if (stem.empty()) stem = plot_stem(g.file->doc, *r);
    if (stem.empty()) {
        h << "<p class=\"dim\">No plots: emulated runs say nothing about speed (cuda-emu checks correctness only).</p>\n";
        return;
    }
    if (!plots.enabled) {
        h << "<p class=\"dim\">No plots: this page was made without gnuplot (<code>--no-plots</code>, as the GPU kit "
             "makes it); <code>scripts/gpu-kit.sh --import</code> draws them.</p>\n";
        return;
    }
    const fs::path dir = plot_dirs.at(g.file);
    h << "<div class=\"plots\">\n";
    for (const char* kind : {"roofline", "speedup", "memory"}) {
        const fs::path p = dir / (std::string(kind) + "-" + stem + ".svg");
        if (!fs::exists(p)) continue;
        const std::string svg = inline_svg(p, "p" + std::to_string(plots.next_id++) + "-",
                                           std::string(kind) + " of " + g.op + " (" + g.backend + ", " + g.shape + ")");
        if (svg.empty()) throw std::runtime_error("gnuplot wrote no SVG in " + p.string());
        h << "<figure class=\"" << kind << "\">" << svg << "</figure>\n";
    }
    h << "</div>\n";
}

std::vector<GroupRef> groups_of(const std::vector<ResultsFile>& files, const std::string& lever) {
    std::vector<GroupRef> out;
    for (auto& f : files)
        for (auto& r : f.doc["runs"]) {
            if (r["lever"] != lever) continue;
            const std::string op = r["op"], be = r["backend"], dt = r["dtype"], sh = shape_of(r);
            auto it = std::find_if(out.begin(), out.end(), [&](const GroupRef& g) {
                return g.file == &f && g.op == op && g.backend == be && g.dtype == dt && g.shape == sh;
            });
            if (it == out.end()) {
                out.push_back({&f, op, be, dt, sh, {}});
                it = out.end() - 1;
            }
            it->runs.push_back(&r);
        }
    return out;
}

// Levers in the order of their levels (levels/NN-<lever>), then by name.
std::vector<std::string> lever_order(const Folder& f, std::map<std::string, fs::path>& lessons) {
    std::set<std::string> names;
    for (auto& rf : f.results)
        for (auto& r : rf.doc["runs"]) names.insert(r["lever"].get<std::string>());
    std::vector<std::pair<std::string, std::string>> keyed;
    const fs::path levels = source_root() / "levels";
    for (auto& n : names) {
        std::string key = "99-" + n;
        try {
            std::string spelled = n;
            LevelDir d;
            try {
                d = find_level(levels, spelled);
            } catch (const UsageError&) {
                std::replace(spelled.begin(), spelled.end(), '_', '-');
                d = find_level(levels, spelled);
            }
            key = d.id;
            if (fs::exists(d.dir / "lesson.md")) lessons[n] = d.dir / "lesson.md";
        } catch (const std::exception&) {
        }
        keyed.push_back({key, n});
    }
    std::sort(keyed.begin(), keyed.end());
    std::vector<std::string> out;
    for (auto& [k, n] : keyed) out.push_back(n);
    return out;
}

std::string relative_link(const fs::path& target, const fs::path& from_dir) {
    std::error_code ec;
    fs::path rel = fs::relative(fs::absolute(target), fs::absolute(from_dir), ec);
    return ec || rel.empty() ? fs::absolute(target).string() : rel.string();
}

std::string best_speedup(const std::vector<GroupRef>& groups, std::string* where) {
    double best = 0;
    for (auto& g : groups)
        for (const json* r : g.runs)
            if ((*r)["role"] == "optimized" && (*r)["correct"].get<bool>() && timed(*r) &&
                r->contains("speedup_vs_naive") && (*r)["speedup_vs_naive"].is_number() &&
                (*r)["speedup_vs_naive"].get<double>() > best) {
                best = (*r)["speedup_vs_naive"].get<double>();
                *where = g.op + " " + (*r)["variant"].get<std::string>() + " (" + g.backend + ")";
            }
    return best > 0 ? ratio_str(best) : "—";
}

// The smallest peak memory of a correct optimized rung relative to the naive one.
std::string least_memory(const std::vector<GroupRef>& groups, std::string* where) {
    double least = 0;
    for (auto& g : groups)
        for (const json* r : g.runs)
            if ((*r)["role"] == "optimized" && (*r)["correct"].get<bool>() && r->contains("memory_vs_naive") &&
                (*r)["memory_vs_naive"].is_number() && (least == 0 || (*r)["memory_vs_naive"].get<double>() < least)) {
                least = (*r)["memory_vs_naive"].get<double>();
                *where = g.op + " " + (*r)["variant"].get<std::string>() + " (" + g.backend + ")";
            }
    if (least >= 0.995) where->clear();  // no rung saves memory
    return least > 0 && least < 0.995 ? ratio_str(least) : "—";
}

// ------------------------------------------------------------- the page

// What the parts of the page read: this folder (and the baseline's, when
// comparing), its levers in order with their groups, lessons and claims,
// and the plots drawn for its results files.
struct Page {
    const Folder& f;
    const Folder& base;
    bool comparing = false;
    fs::path page_dir;
    Plots& plots;
    std::map<const ResultsFile*, fs::path> plot_dirs;
    std::map<std::string, fs::path> lessons;
    std::vector<std::string> levers;
    std::map<std::string, std::vector<GroupRef>> lever_groups;
    std::map<std::string, std::vector<const json*>> claims;  // by lever
    std::map<std::string, const json*> base_runs;            // the baseline's runs by key

    const std::vector<const json*>& claims_of(const std::string& lever) const {
        static const std::vector<const json*> none;
        const auto it = claims.find(lever);
        return it == claims.end() ? none : it->second;
    }
};

// Plots: a temporary folder beside the page, one subfolder per results file.
void draw_plots(Page& pg) {
    for (auto& rf : pg.f.results) {
        const fs::path d = pg.plots.tmp / rf.path.stem();
        plot_results(rf.doc, d);
        pg.plot_dirs[&rf] = d;
    }
}

// Levers (with their lessons and groups), claims by lever, and the
// baseline's runs by key for the comparison.
void gather(Page& pg) {
    pg.levers = lever_order(pg.f, pg.lessons);
    for (auto& l : pg.levers) pg.lever_groups[l] = groups_of(pg.f.results, l);
    if (!pg.f.claims.is_null())
        for (auto& c : pg.f.claims["claims"]) pg.claims[c.value("lever", "")].push_back(&c);
    if (pg.comparing)
        for (auto& rf : pg.base.results)
            for (auto& r : rf.doc["runs"]) pg.base_runs[run_key(r)] = &r;
}

void page_head(std::ostream& h, const Page& pg) {
    const json& m = pg.f.ceilings.value("machine", json::object());
    const std::string host = m.value("hostname", pg.f.dir.filename().string());
    h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      << "<title>memwall results: " << esc(host) << "</title>\n<style>" << kStyle << "</style></head><body><main>\n";
    h << "<h1>memwall results: " << esc(m.value("cpu_model", "?")) << " (" << esc(host) << ")</h1>\n";
    h << "<p class=\"sub\">Naive and optimized rungs of every lever in <code>" << esc(pg.f.dir.filename().string())
      << "/</code>, each checked against an fp64 oracle, timed (best of N samples; speedups are ratios of best-of-N "
         "times within one run) and placed on this machine's measured roofline. Emulated CUDA rungs (cuda-emu) are "
         "checked for correctness only and left out of every timing and plot.</p>\n";
}

// "faster / slower / within noise" counts of a lever's runs against the
// baseline, and how many were not judged (a side disturbed while timed).
std::string baseline_counts(const Page& pg, const std::vector<GroupRef>& gs) {
    int fa = 0, sl = 0, no = 0, nj = 0;
    for (auto& g : gs)
        for (const json* r : g.runs) {
            auto it = pg.base_runs.find(run_key(*r));
            if (it == pg.base_runs.end()) continue;
            const auto v = compare_runs(*it->second, *r).verdict;
            fa += v == "faster", sl += v == "slower", no += v == "within noise";
            nj += v.rfind("not judged", 0) == 0;
        }
    return std::to_string(fa) + " / " + std::to_string(sl) + " / " + std::to_string(no) +
           (nj ? " (" + std::to_string(nj) + " not judged: disturbed while timed)" : "");
}

void overview_row(std::ostream& h, const Page& pg, const std::string& l) {
    const auto& gs = pg.lever_groups.at(l);
    const auto& claims = pg.claims_of(l);
    std::set<std::string> ops;
    int ran = 0, ok = 0;
    for (auto& g : gs) {
        ops.insert(g.op);
        for (const json* r : g.runs)
            if (r->value("ran", true)) ++ran, ok += (*r)["correct"].get<bool>();
    }
    std::string where, mem_where;
    const std::string best = best_speedup(gs, &where), mem = least_memory(gs, &mem_where);
    int repro = 0, differs = 0, assumed = 0;
    for (const json* c : claims) {
        repro += c->value("verdict", "") == "reproduced";
        differs += c->value("verdict", "") == "differs";
        assumed += c->value("verdict", "") == "depends on an assumption";
    }
    h << "<tr><td class=\"l\"><a href=\"#lever-" << anchor(l) << "\">" << esc(l) << "</a></td><td class=\"l\">"
      << esc(join({ops.begin(), ops.end()})) << "</td><td>" << ran << "</td><td>"
      << "<span class=\"b " << (ok == ran ? "ok" : "bad") << "\">" << ok << "/" << ran
      << (ok == ran ? "" : " correct") << "</span>"
      << "</td><td class=\"l\">" << best << (where.empty() ? "" : " <span class=\"dim\">" + esc(where) + "</span>")
      << "</td><td class=\"l\">" << mem << (mem_where.empty() ? "" : " <span class=\"dim\">" + esc(mem_where) + "</span>")
      << "</td><td>" << (claims.empty() ? std::string("—") : std::to_string(repro) + " reproduced, " + std::to_string(differs) + " differ" +
                                                 (assumed ? ", " + std::to_string(assumed) + " depend on an assumption" : ""))
      << "</td><td class=\"l\">";
    if (pg.lessons.count(l))
        h << "<a href=\"" << esc(relative_link(pg.lessons.at(l), pg.page_dir)) << "\">"
          << esc(pg.lessons.at(l).parent_path().filename().string()) << "</a>";
    else h << "—";
    h << "</td>";
    if (pg.comparing) h << "<td>" << baseline_counts(pg, gs) << "</td>";
    h << "</tr>\n";
}

void overview(std::ostream& h, const Page& pg) {
    h << "<div class=\"card\"><table><thead><tr><th class=\"l\">lever</th><th class=\"l\">ops</th><th>variants run</th>"
         "<th>correct</th><th class=\"l\">best speedup over naive</th><th class=\"l\">least peak memory vs naive</th>"
         "<th>claims checked here</th><th class=\"l\">lesson</th>";
    if (pg.comparing) h << "<th>vs baseline: faster / slower / within noise</th>";
    h << "</tr></thead><tbody>\n";
    for (auto& l : pg.levers) overview_row(h, pg, l);
    h << "</tbody></table></div>\n";
}

void compare_block(std::ostream& h, const Page& pg) {
    const json& m = pg.f.ceilings.value("machine", json::object());
    const json& bm = pg.base.ceilings.value("machine", json::object());
    h << "<section class=\"card\" id=\"compare\"><h3>Compared with " << esc(pg.base.dir.filename().string()) << "</h3><p>Baseline: "
      << esc(bm.value("cpu_model", "?")) << " (" << esc(bm.value("hostname", "?")) << "), commit <code>"
      << esc(bm.value("git_commit", "?")) << "</code>. This folder: commit <code>" << esc(m.value("git_commit", "?"))
      << "</code>. Ratio = baseline best time / this folder's best time (above 1: faster here). A verdict of "
         "faster or slower needs the ratio beyond the noise: twice the larger spread (median / best) of the two "
         "runs, at least 5%. Times from two runs are not a measured speedup; re-run both in one session to confirm "
         "a small one. Each lever's table is in its section.</p></section>\n";
}

// A lever's runs against the baseline's of the same key.
void baseline_table(std::ostream& h, const Page& pg, const std::vector<const json*>& lever_runs) {
    h << "<h3>Against the baseline</h3><table><thead><tr><th class=\"l\">op / backend / dtype / shape / variant</th>"
         "<th>baseline</th><th>here</th><th>ratio</th><th>noise</th><th>verdict</th></tr></thead><tbody>\n";
    int n = 0;
    for (const json* r : lever_runs) {
        auto it = pg.base_runs.find(run_key(*r));
        if (it == pg.base_runs.end()) continue;
        const auto v = compare_runs(*it->second, *r);
        const auto& tb = (*it->second)["time_s"];
        const auto& tn = (*r)["time_s"];
        h << "<tr><td class=\"l\">" << esc(run_key(*r)) << "</td><td>" << time_str(tb.value("best", tb.value("min", 0.0)))
          << "</td><td>" << time_str(tn.value("best", tn.value("min", 0.0))) << "</td><td>"
          << (v.ratio > 0 ? fmt(v.ratio) + "x" : "—") << "</td><td>" << (v.noise > 0 ? "±" + fmt(100 * v.noise, 2) + "%" : "—")
          << "</td><td>" << badge(v.verdict) << "</td></tr>\n";
        ++n;
    }
    if (n == 0) h << "<tr><td class=\"l\" colspan=\"6\">no variant of this lever is in both folders</td></tr>\n";
    h << "</tbody></table>\n";
}

// The published claims about a lever: those checked here in a table, those
// that need a GPU folded away.
void lever_claims(std::ostream& h, const Page& pg, const std::string& l, const std::vector<const json*>& lever_runs) {
    const auto& claims = pg.claims_of(l);
    std::vector<const json*> checked, gpu;
    for (const json* c : claims) (c->value("verdict", "") == "needs a GPU" ? gpu : checked).push_back(c);
    h << "<h3>Published claims about " << esc(l) << "</h3>\n";
    if (pg.f.claims.is_null()) {
        h << "<p class=\"dim\">No claims report in this folder (<code>memwall reproduce --run-experiments --out "
          << esc(pg.f.dir.filename().string()) << "/claims.json</code>).</p>\n";
        return;
    }
    if (claims.empty()) {
        h << "<p class=\"dim\">experiments/claims.json has no claims for this lever.</p>\n";
        return;
    }
    int repro = 0;
    for (const json* c : checked) repro += c->value("verdict", "") == "reproduced";
    h << "<p>" << checked.size() << " checked on this machine: " << repro << " reproduced, " << checked.size() - repro
      << " not" << (gpu.empty() ? "" : "; " + std::to_string(gpu.size()) + " need a GPU (listed below)") << ".</p>\n";
    claims_table(h, checked, lever_runs, pg.f.ceilings["ceilings"]);
    if (!gpu.empty()) {
        h << "<details><summary>" << gpu.size() << (gpu.size() == 1 ? " claim" : " claims") << " that need a GPU</summary>\n";
        claims_table(h, gpu, lever_runs, pg.f.ceilings["ceilings"]);
        h << "</details>\n";
    }
}

// One lever: its lesson, each group's plots and runs, the comparison, its claims.
void lever_section(std::ostream& h, Page& pg, const std::string& l) {
    h << "<section class=\"lever\" id=\"lever-" << anchor(l) << "\" data-lever=\"" << esc(l) << "\">\n<h2>" << esc(l) << "</h2>\n";
    if (pg.lessons.count(l)) {
        const fs::path& lesson = pg.lessons.at(l);
        h << "<p>Lesson: <a href=\"" << esc(relative_link(lesson, pg.page_dir)) << "\">"
          << esc(relative_link(lesson, source_root())) << "</a> (walk it with <code>memwall lesson "
          << esc(lesson.parent_path().filename().string().substr(0, 2)) << "</code>)</p>\n";
    }
    std::vector<const json*> lever_runs;
    for (auto& g : pg.lever_groups.at(l)) {
        h << "<h3 id=\"" << anchor(l + "-" + g.op + "-" + g.backend + "-" + g.shape) << "\">" << esc(g.op) << " <span class=\"dim\">("
          << esc(g.backend) << ", " << esc(g.dtype) << ", " << esc(g.shape) << ", " << g.runs.front()->value("threads", 1)
          << " threads; " << esc(g.file->path.filename().string()) << ")</span></h3>\n";
        group_plots(h, g, pg.plots, pg.plot_dirs);
        runs_table(h, g);
        lever_runs.insert(lever_runs.end(), g.runs.begin(), g.runs.end());
    }
    if (pg.comparing) baseline_table(h, pg, lever_runs);
    lever_claims(h, pg, l, lever_runs);
    h << "</section>\n";
}

// Claims of levers without runs here (the roofline arithmetic, levers not run).
void other_claims(std::ostream& h, const Page& pg) {
    if (pg.f.claims.is_null()) return;
    std::vector<const json*> rest;
    std::set<std::string> rest_levers;
    for (auto& [l, cs] : pg.claims)
        if (std::find(pg.levers.begin(), pg.levers.end(), l) == pg.levers.end())
            for (const json* c : cs) rest.push_back(c), rest_levers.insert(l);
    if (rest.empty()) return;
    std::map<std::string, int> counts;
    for (const json* c : rest) counts[c->value("verdict", "")]++;
    h << "<section class=\"lever\" id=\"other-claims\"><h2>Other claims</h2><p>Claims of "
      << esc(join({rest_levers.begin(), rest_levers.end()})) << " (no runs of theirs in this folder): ";
    bool first = true;
    for (auto& [v, n] : counts) h << (first ? "" : ", ") << n << " " << esc(v), first = false;
    h << ". From <code>" << esc(pg.f.claims_path.filename().string()) << "</code>: <code>" << esc(pg.f.claims.value("command", ""))
      << "</code>.</p>\n<details><summary>All " << rest.size() << "</summary>\n";
    claims_table(h, rest, {}, pg.f.ceilings["ceilings"]);
    h << "</details></section>\n";
}

void page_foot(std::ostream& h, const Page& pg) {
    h << "<p class=\"dim\" style=\"margin-top:40px\">Made by <code>memwall report " << esc(pg.f.dir.filename().string())
      << " --html" << (pg.comparing ? " --compare " + esc(pg.base.dir.filename().string()) : "")
      << "</code> from";
    for (auto& rf : pg.f.results) h << " " << esc(rf.path.filename().string());
    if (!pg.f.ignored.empty()) h << "; not read (no memwall schema): " << esc(join(pg.f.ignored));
    if (pg.plots.enabled) h << ". The plots are also in <code>plots/</code> as SVG and PNG with their gnuplot scripts";
    h << ".</p>\n";
    h << "</main></body></html>\n";
}

// The whole page, part after part.
std::string render(Page& pg) {
    std::ostringstream h;
    page_head(h, pg);
    overview(h, pg);
    machine_block(h, pg.f);
    if (pg.comparing) compare_block(h, pg);
    for (auto& l : pg.levers) lever_section(h, pg, l);
    other_claims(h, pg);
    page_foot(h, pg);
    return h.str();
}

}  // namespace

fs::path write_html_report(const HtmlReportOptions& opts) {
    const Folder f = load_folder(opts.dir);
    Folder base;
    const bool comparing = !opts.compare_dir.empty();
    if (comparing) base = load_folder(opts.compare_dir);
    const fs::path out = opts.out.empty() ? fs::path(opts.dir) / "index.html" : fs::path(opts.out);
    if (fs::exists(out) && fs::is_directory(out)) throw UsageError("--out '" + out.string() + "' is a folder; give a file name");
    if (opts.plots && !gnuplot_available())
        throw UsageError("gnuplot not found: apt-get install gnuplot-nox (or scripts/install-deps.sh), or pass --no-plots");

    const fs::path page_dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
    std::random_device rd;
    Plots plots{page_dir / (".plots.tmp." + std::to_string(getpid()) + "." + std::to_string(rd())), page_dir / "plots", 0,
                opts.plots};
    Page pg{f, base, comparing, page_dir, plots};
    try {
        if (plots.enabled) draw_plots(pg);
        gather(pg);
        const std::string html = render(pg);
        // Plots first (they are extras), the page last: the rename is the commit.
        std::error_code ec;
        if (plots.enabled) {
            fs::remove_all(plots.final, ec);
            fs::rename(plots.tmp, plots.final, ec);
            if (ec) fs::remove_all(plots.tmp, ec);
        }
        write_file_atomic(out, html);
    } catch (...) {
        std::error_code ec;
        fs::remove_all(plots.tmp, ec);
        throw;
    }
    return out;
}

}  // namespace mw
