// The notebook facade (memwall_nb.hpp): C++17 on purpose, so that what the
// notebook loads never needs the C++20 project headers. It runs the memwall
// binary and reads back the JSON the CLI writes.
#include "memwall_nb.hpp"

#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace mwnb {

namespace {

std::string g_build = default_build_dir();
std::string g_work = default_work_dir();
// What this session ran, for summary().
int g_steps = 0, g_steps_correct = 0, g_runs = 0, g_runs_correct = 0;

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

bool exists(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

std::string read_file(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

nlohmann::json read_json(const std::string& p) { return nlohmann::json::parse(read_file(p)); }

double num(const nlohmann::json& j, const char* key) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
}

}  // namespace

void configure(const std::string& build_dir, const std::string& work_dir) {
    g_build = build_dir;
    g_work = work_dir;
    if (!exists(memwall_binary()))
        throw std::runtime_error("no memwall binary at " + memwall_binary() +
                                 "; build the project first (cmake --preset release && cmake --build --preset release)");
    ::mkdir(g_work.c_str(), 0755);
    std::printf("memwall_nb: build tree %s, files in %s\n", g_build.c_str(), g_work.c_str());
    std::fflush(stdout);
}

bool quick() {
    const char* e = std::getenv("MEMWALL_NB_QUICK");
    const bool q = e && std::string(e) == "1";
    std::printf("memwall_nb: %s\n", q ? "quick shapes and short timing (MEMWALL_NB_QUICK=1)"
                                        : "the lesson's shapes (set MEMWALL_NB_QUICK=1 for quick ones)");
    std::fflush(stdout);
    return q;
}

bool note(const std::string& text) {
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
    return true;
}

std::string memwall_binary() { return g_build + "/memwall"; }
std::string work_path(const std::string& name) { return g_work + "/" + name; }

void memwall(const std::string& args) {
    const std::string cmd = quote(memwall_binary()) + " " + args + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("cannot start: " + cmd);
    std::string tail;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) {
        std::cout.write(buf, static_cast<std::streamsize>(n));
        std::cout.flush();
        tail.append(buf, n);
        if (tail.size() > 2000) tail.erase(0, tail.size() - 2000);
    }
    const int status = ::pclose(p);
    if (status != 0) {
        const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        throw std::runtime_error("memwall " + args + " exited with status " + std::to_string(rc) + ":\n" + tail);
    }
}

nlohmann::json run_json(const std::string& args, const std::string& name) {
    const std::string path = work_path(name);
    memwall(args + " --out " + quote(path));
    auto doc = read_json(path);
    for (const auto& r : doc.value("runs", nlohmann::json::array())) {
        ++g_runs;
        g_runs_correct += r.value("correct", false) ? 1 : 0;
    }
    return doc;
}

std::string calibrate() {
    const std::string path = work_path("ceilings.json");
    if (!exists(path)) memwall("calibrate --quick --out " + quote(path));
    return path;
}

Step run_step(const std::string& level, int step, bool quick) {
    const std::string base = work_path("step" + std::to_string(step));
    memwall("lesson " + quote(level) + " --step " + std::to_string(step) + " --only --no-pause" +
            (quick ? " --quick" : "") + " --ceilings " + quote(calibrate()) + " --json " + quote(base + ".json") +
            " --results " + quote(base + "-results.json"));
    const auto doc = read_json(base + ".json");
    const auto& s = doc.at("steps").at(0);
    Step out;
    out.index = step;
    out.op = s.value("op", "");
    out.variant = s.value("variant", "");
    out.title = s.value("title", "");
    out.shape = s.value("shape", "");
    out.bound = s.value("bound", "");
    out.predicted_gflops = num(s, "predicted_gflops");
    out.measured_gflops = num(s, "measured_gflops");
    out.recorded_gflops = num(s, "recorded_gflops");
    out.predicted_ms = num(s, "predicted_ms");
    out.measured_ms = num(s, "measured_ms");
    out.speedup_vs_naive = num(s, "speedup_vs_naive");
    out.intensity = num(s, "intensity");
    out.roof_gflops = num(s, "roof_gflops");
    out.fraction_of_roof = num(s, "fraction_of_roof");
    out.correct = s.value("correct", false);
    out.results_file = base + "-results.json";
    ++g_steps;
    g_steps_correct += out.correct ? 1 : 0;
    return out;
}

std::string merge_results(const std::vector<Step>& steps, const std::string& name) {
    if (steps.empty()) throw std::runtime_error("merge_results: no steps");
    nlohmann::json merged;
    for (const auto& st : steps) {
        auto doc = read_json(st.results_file);
        if (merged.is_null()) {
            merged = doc;
            merged["runs"] = nlohmann::json::array();
        }
        for (const auto& r : doc["runs"]) {
            bool have = false;
            for (const auto& x : merged["runs"]) have = have || x.value("variant", "") == r.value("variant", "");
            if (!have) merged["runs"].push_back(r);
        }
    }
    const std::string path = work_path(name);
    std::ofstream(path) << merged.dump(2) << "\n";
    return path;
}

std::vector<std::string> plot(const std::string& results_file) {
    const std::string dir = work_path("plots");
    memwall("plot " + quote(results_file) + " --out-dir " + quote(dir));
    std::vector<std::string> pngs;
    // memwall plot names its files after (lever, op, backend).
    for (const char* kind : {"roofline", "speedup"}) {
        const auto doc = read_json(results_file);
        const auto& r = doc.at("runs").at(0);
        const std::string p = dir + "/" + kind + "-" + r.value("lever", "") + "-" + r.value("op", "") + "-" +
                              r.value("backend", "") + ".png";
        if (exists(p)) pngs.push_back(p);
    }
    return pngs;
}

Image image(const std::string& png_path) { return Image{png_path, read_file(png_path)}; }

nlohmann::json mime_bundle_repr(const Image& img) {
    auto bundle = nlohmann::json::object();
    bundle["image/png"] = base64(img.png);
    bundle["text/plain"] = "<image " + img.path + ">";
    return bundle;
}

void verdict(const Step& s) {
    std::printf("\n=> %s/%s at %s: %.4g ms per call", s.op.c_str(), s.variant.c_str(), s.shape.c_str(), s.measured_ms);
    if (s.predicted_ms > 0) std::printf(" (predicted %.4g ms)", s.predicted_ms);
    if (s.predicted_gflops > 0)
        std::printf(", %.3g GFLOP/s = %.0f%% of the predicted %.3g", s.measured_gflops,
                    100 * s.measured_gflops / s.predicted_gflops, s.predicted_gflops);
    else if (s.measured_gflops > 0)
        std::printf(", %.3g GFLOP/s", s.measured_gflops);
    std::printf("; %s\n", s.correct ? "correct" : "INCORRECT");
    std::fflush(stdout);
}

void verdicts(const nlohmann::json& results) {
    for (const auto& r : results.at("runs")) {
        const double ms = r.contains("time_s") ? 1e3 * num(r["time_s"], "best") : 0;
        std::printf("=> %s/%s at %s: %.4g ms per call, %.3g GFLOP/s; %s\n", r.value("op", "?").c_str(),
                    r.value("variant", "?").c_str(), r.value("shape_str", "?").c_str(), ms, num(r, "gflops"),
                    r.value("correct", false) ? "correct" : "INCORRECT");
    }
    std::fflush(stdout);
}

void summary() {
    // The machine, from the calibration this session ran (or reused).
    std::string machine;
    const std::string ceilings = work_path("ceilings.json");
    if (exists(ceilings)) {
        const auto m = read_json(ceilings).value("machine", nlohmann::json::object());
        machine = " on " + m.value("cpu_model", std::string("?")) + " (" + std::to_string(m.value("cores", 0)) + " cores)";
    }
    std::printf("memwall_nb summary: %d steps run, %d correct; %d runs, %d correct%s\n", g_steps, g_steps_correct,
                g_runs, g_runs_correct, machine.c_str());
    std::fflush(stdout);
}

void print_table(const std::vector<Step>& steps) {
    bool several = false;
    for (const auto& s : steps) several = several || s.op != steps.front().op;
    const int w = several ? 30 : 12;
    std::printf("%-4s %-*s %10s %10s %10s %9s %8s  %s\n", "step", w, "variant", "predicted", "measured", "recorded",
                "x naive", "of roof", "bound");
    for (const auto& s : steps)
        std::printf("%-4d %-*s %10.3g %10.3g %10.3g %9.3g %7.0f%%  %s\n", s.index, w,
                    (several ? s.op + "/" + s.variant : s.variant).c_str(), s.predicted_gflops, s.measured_gflops,
                    s.recorded_gflops, s.speedup_vs_naive, 100 * s.fraction_of_roof, s.bound.c_str());
    if (several)
        std::printf("(GFLOP/s; measured now, each op at its own shape; x naive: over rung 0 of the same op; "
                    "recorded from the level's results file)\n");
    else
        std::printf("(GFLOP/s; measured now at %s, recorded from the level's results file)\n",
                    steps.empty() ? "?" : steps.front().shape.c_str());
    std::fflush(stdout);
}

std::string base64(const std::string& in) {
    static const char* tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
        out += tbl[v >> 18 & 63], out += tbl[v >> 12 & 63], out += tbl[v >> 6 & 63], out += tbl[v & 63];
    }
    if (i + 1 == in.size()) {
        const unsigned v = (unsigned char)in[i] << 16;
        out += tbl[v >> 18 & 63], out += tbl[v >> 12 & 63], out += "==";
    } else if (i + 2 == in.size()) {
        const unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
        out += tbl[v >> 18 & 63], out += tbl[v >> 12 & 63], out += tbl[v >> 6 & 63], out += '=';
    }
    return out;
}

}  // namespace mwnb
