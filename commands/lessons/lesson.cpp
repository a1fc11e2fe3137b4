// `memwall lesson <level>`: walk a level's ladder in the terminal. For each
// step: the idea and the prediction (worked from FLOPs, bytes and this
// machine's calibrated ceilings), then the rung runs now through the harness
// (checked against the fp64 oracle, timed, with the naive rung as the
// baseline in the same run), the measurement beside the prediction, where the
// point sits on the roofline, and the explanation of the gap.
//
//   memwall lesson 01                       walk every step, Enter between steps
//   memwall lesson 01 --step 3 --only       one step
//   memwall lesson 01 --no-pause --quick    scripts and tests
//   memwall lesson 01 --render --out levels/01-vectorization/lesson.rendered.md
//   memwall lesson 01 --check               every placeholder resolves?
//   memwall lesson 03 --render --results results/local-<host>   the same text with your own numbers
//
// Text comes from levels/<level>/lesson.md, its numbers from the level's
// recorded results file (lesson_render.hpp has the placeholder syntax).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <regex>
#include <sstream>
#include <thread>

#include "harness/command.hpp"
#include "commands/grade/grade.hpp"
#include "commands/lessons/lesson_render.hpp"
#include "harness/results.hpp"
#include "harness/runner.hpp"
#include "harness/strings.hpp"

namespace mw {

namespace {

namespace fs = std::filesystem;

struct LessonOptions {
    std::string level;
    int step = -1;  // -1: from the first
    bool only = false, no_pause = false, quick = false;
    bool render = false, check = false;
    std::string out, backend = "cpu", ceilings_path, shape, json_out, results_out;
    int threads = 0;
    double wait_quiet = 0;
};

// ------------------------------------------------------------ terminal text

bool use_color() {
    static const bool on = isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR") &&
                           std::string(std::getenv("TERM") ? std::getenv("TERM") : "dumb") != "dumb";
    return on;
}
std::string bold(const std::string& s) { return use_color() ? "\033[1m" + s + "\033[0m" : s; }
std::string dim(const std::string& s) { return use_color() ? "\033[2m" + s + "\033[0m" : s; }

std::string rule(const std::string& title, std::size_t width = 78) {
    std::string line = "━━ " + title + " ";
    // Count columns, not bytes (the rule characters are 3 bytes each).
    std::size_t cols = 0;
    for (unsigned char c : line) cols += (c & 0xC0) != 0x80;
    while (cols < width) line += "━", ++cols;
    return bold(line);
}

// Markdown for a terminal: comments dropped, headings in bold, images named.
std::string for_terminal(const std::string& md) {
    static const std::regex comment(R"(<!--[\s\S]*?-->\n?)");
    static const std::regex image(R"(!\[([^\]]*)\]\(([^)]*)\))");
    static const std::regex strong(R"(\*\*([^*]+)\*\*)");
    std::string text = std::regex_replace(md, comment, "");
    text = std::regex_replace(text, image, "[figure: $1 -> $2]");
    text = std::regex_replace(text, strong, use_color() ? "\033[1m$1\033[0m" : "$1");
    std::stringstream in(text);
    std::string line, out;
    bool blank = false;
    while (std::getline(in, line)) {
        if (line.empty()) {
            if (!blank && !out.empty()) out += "\n";
            blank = true;
            continue;
        }
        blank = false;
        if (line.rfind("#", 0) == 0) {
            const auto b = line.find_first_not_of('#');
            out += bold(line.substr(b == std::string::npos ? 0 : b + 1)) + "\n";
        } else {
            out += line + "\n";
        }
    }
    return out;
}

// Wraps `text` at `width` columns, every line after the first indented.
std::string wrap(const std::string& text, const std::string& indent, std::size_t width = 78) {
    std::stringstream in(text);
    std::string word, out, line;
    while (in >> word) {
        if (!line.empty() && line.size() + 1 + word.size() > width) {
            out += line + "\n";
            line = indent;
        }
        line += (line.empty() || line == indent ? "" : " ") + word;
    }
    return out + line;
}

std::string num(double x, int digits = 3) { return lesson::fmt_num(x, digits); }

// A bar of `width` cells filled to `fraction` (capped at 1).
std::string bar(double fraction, int width = 40) {
    const int full = std::clamp(int(std::lround(std::min(fraction, 1.0) * width)), 0, width);
    std::string s;
    for (int i = 0; i < width; ++i) s += i < full ? "█" : "·";
    return s;
}

// Waits for Enter. EOF on stdin means "nobody is there": stop waiting for
// good. Returns false when the student typed q.
bool wait_for_enter(bool& no_pause) {
    if (no_pause) return true;
    std::cout << dim("── Enter: next step · q then Enter: stop ──") << std::flush;
    std::string line;
    if (!std::getline(std::cin, line)) {
        std::cout << "\n";
        no_pause = true;
        return true;
    }
    return line != "q" && line != "Q";
}

// ------------------------------------------------------------ the level

fs::path repo_root() { return grade::source_dir(); }
fs::path levels_root() {
    if (const char* env = std::getenv("MEMWALL_LEVELS_DIR"); env && *env) return env;
    return repo_root() / "levels";
}

std::string step_choices(const nlohmann::json& steps) {
    std::string s;
    for (std::size_t i = 0; i < steps.size(); ++i)
        s += (i ? ", " : "") + std::to_string(i) + " (" + lesson::step_key(steps[i]) + ")";
    return s;
}

// Whether the level's steps span more than one op (then steps are named OP/VARIANT).
bool multi_op(const lesson::Level& L) {
    for (auto& s : L.manifest["steps"])
        if (lesson::step_op(s, L.op) != L.op) return true;
    return false;
}

// --render/--check --results DIR|FILE: the level rendered from someone's own
// results instead of the recorded ones. A folder (the main job's, or one that
// `memwall run <lever> --out DIR/<lever>-cpu.json` wrote) must hold a file
// named like the level's recorded one; ceilings come from the file, else from
// DIR/ceilings.json. The machine is named after the folder.
lesson::Level with_results(lesson::Level L, const std::string& given) {
    fs::path file = given;
    const std::string name = L.results_file.filename().string();
    const std::string make = "memwall run " + L.manifest.value("lever", L.id) + " --out ";
    if (fs::is_directory(file)) {
        file /= name;
        if (!fs::exists(file))
            throw UsageError("--results '" + given + "' has no " + name + " (the level reads its runs from a file named " +
                             "like its recorded one); make it with: " + make + file.string());
    } else if (!fs::exists(file)) {
        throw UsageError("--results '" + given + "': no such folder or file; give a results folder holding " + name +
                         " (" + make + "DIR/" + name + ") or the file itself");
    }
    nlohmann::json doc;
    try {
        doc = read_json_file(file.string());
    } catch (const std::exception& e) {
        throw UsageError("--results: " + std::string(e.what()));
    }
    if (!doc.is_object() || !doc.contains("runs") || !doc["runs"].is_array())
        throw UsageError("'" + file.string() + "' is not a memwall results file (no \"runs\" array)");
    if (!doc.contains("ceilings")) {
        const fs::path c = file.parent_path() / "ceilings.json";
        if (!fs::exists(c))
            throw UsageError("'" + file.string() + "' holds no ceilings and there is no " + c.string() +
                             "; make one with: memwall calibrate --out " + c.string());
        auto cj = read_json_file(c.string());
        if (!cj.contains("ceilings")) throw UsageError("'" + c.string() + "' has no \"ceilings\" field");
        doc["ceilings"] = cj["ceilings"];
    }
    L.results = std::move(doc);
    L.results_file = fs::absolute(file).lexically_normal();
    L.manifest["results"] = file.lexically_normal().string();  // as given: the rendered note quotes it
    lesson::append_extra_runs(L);
    return L;
}

int render_command(const lesson::Level& L, const LessonOptions& o) {
    std::vector<std::string> errors;
    const std::string doc = lesson::render_document(L, lesson::recorded_context(L), &errors);
    const auto sections = lesson::split_sections(L.lesson_text);
    // Every step of the manifest needs its section, in order.
    const auto& steps = L.manifest["steps"];
    for (std::size_t i = 0; i < steps.size(); ++i) {
        const std::string key = lesson::step_key(steps[i]);
        const bool match = i < sections.steps.size() && sections.steps[i].variant == steps[i].value("variant", "") &&
                           sections.steps[i].op == steps[i].value("op", "");
        if (!match) errors.push_back("lesson.md: step " + std::to_string(i) + " should be '<!-- step: " + key + " -->'");
    }
    for (auto& e : errors) std::cerr << "memwall: " << L.id << ": " << e << "\n";
    if (!errors.empty()) {
        std::cerr << "memwall: " << errors.size() << " placeholder(s) or section(s) did not resolve against "
                  << L.results_file.string() << "\n";
        return 1;
    }
    if (o.check) {
        std::cout << L.id << ": every placeholder resolves against " << L.manifest.value("results", "") << "\n";
        return 0;
    }
    if (o.out.empty()) std::cout << doc;
    else {
        write_file_atomic(o.out, doc);
        std::cout << "lesson: " << o.out << "\n";
    }
    return 0;
}

// ------------------------------------------------------------ the walk

struct Walk {
    const lesson::Level& L;
    const LessonOptions& o;
    lesson::Context recorded, live;
    lesson::Sections text;
    std::string op;  // the current step's op
    Shape shape;     // and its shape
    int threads = 0;
    nlohmann::json combined;                               // results doc of the walk
    nlohmann::json summary = nlohmann::json::array();      // one entry per step walked
};

Ceilings walk_ceilings(const LessonOptions& o, int threads) {
    if (!o.ceilings_path.empty()) {
        auto doc = read_json_file(o.ceilings_path);
        if (!doc.contains("ceilings"))
            throw UsageError("'" + o.ceilings_path + "' has no \"ceilings\"; make one with: memwall calibrate --out FILE.json");
        return ceilings_from_json(doc["ceilings"]);
    }
    std::cout << "Measuring this machine's ceilings (quick calibration, a few seconds;"
                 " --ceilings FILE reuses a saved one)...\n"
              << std::flush;
    return calibrate_cpu(threads, true);
}

void print_machine(const Walk& w) {
    const Ceilings& c = w.live.ceilings;
    auto get = [&](const std::string& e) {
        try {
            return lesson::format_value(lesson::evaluate(e, w.live), "");
        } catch (const std::exception&) {
            return std::string("?");
        }
    };
    std::cout << bold("This machine") << ": " << w.live.machine.value("cpu_model", "?") << ", "
              << std::thread::hardware_concurrency() << " hardware threads; the lesson runs with " << w.threads
              << " thread(s)\n"
              << "  DRAM " << get("ceiling:dram_1t_gbps") << " GB/s (1 thread), " << get("ceiling:dram_gbps")
              << " GB/s (all); fp32 peak " << get("ceiling:peak.fp32.1t") << " GFLOP/s (1 thread), "
              << get("ceiling:peak.fp32") << " (all)\n"
              << "  ridge point " << get("ceiling:ridge") << " FLOP/byte; core clock " << get("ceiling:clock_ghz")
              << " GHz" << (c.clock_ghz > 0 ? " (measured: a chain of dependent adds)" : " (not measured: assumed)")
              << "\n  fp32 " << get("ceiling:flops_per_cycle") << " FLOP/cycle/core (the one-thread "
              << (c.peaks.empty() ? "?" : c.peaks.front().isa) << " peak over the clock): " << get("ceiling:datapath")
              << "\n";
    if (multi_op(w.L)) std::cout << "  each step runs its own op at its own shape (named with the step)\n\n";
    else std::cout << "  lesson shape " << w.shape.str() << "\n\n";
}

// Runs one rung (and the naive baseline) now; returns the results doc.
nlohmann::json run_rung(Walk& w, const std::string& variant) {
    RunRequest req;
    req.targets = {w.op};
    req.backend = Backend::cpu;
    req.variants = {variant};
    req.shapes = {w.shape.str()};
    req.threads = w.threads;
    req.quick = false;  // the shape is explicit; only the timing is shortened
    req.timing.budget_s = w.o.quick ? 0.15 : 1.0;
    req.timing.min_samples = 3;
    req.timing.max_samples = w.o.quick ? 10 : 30;
    req.timing.wait_quiet_s = w.o.wait_quiet;
    req.command_line = "memwall lesson " + w.L.id + " (step " + variant + ")";
    auto plans = plan_runs(req);
    std::cout << dim("Running now: " + w.op + " " + w.shape.str() + " on " + std::to_string(w.threads) +
                     " thread(s), with the naive rung as this run's baseline.")
              << "\n"
              << std::flush;
    auto doc = run_plans(plans, req, w.live.ceilings, std::cout);
    return doc;
}

const nlohmann::json* run_of(const nlohmann::json& doc, const std::string& variant) {
    for (auto& r : doc["runs"])
        if (r.value("variant", "") == variant) return &r;
    return nullptr;
}

double opt_number(const nlohmann::json& j, const char* key) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

// Prediction, measurement, recorded number and the roofline, side by side.
nlohmann::json report_step(Walk& w, const nlohmann::json& step, const nlohmann::json& doc) {
    const std::string v = step.value("variant", "");
    const nlohmann::json* r = run_of(doc, v);
    nlohmann::json s = {{"variant", v}, {"op", w.op}, {"title", step.value("title", "")}, {"rung", step.value("rung", 0)}};
    const lesson::Context rec = lesson::for_op(w.recorded, w.op);
    if (!r || !r->value("ran", false)) {
        std::cout << "  " << v << " did not run here: " << (r ? r->value("skip_reason", "?") : "missing") << "\n";
        s["ran"] = false;
        return s;
    }
    lesson::Context lc = w.live;
    lc.self = v;
    double predicted = NAN, predicted_ms = NAN, recorded = NAN;
    std::string why;
    try {
        predicted = std::get<double>(lesson::evaluate("predict:" + v, lc));
        predicted_ms = std::get<double>(lesson::evaluate("predict_time:" + v, lc));
    } catch (const std::exception& e) {
        why = e.what();
    }
    try {
        recorded = std::get<double>(lesson::evaluate("run:" + v + ".gflops", rec));
    } catch (const std::exception&) {
    }
    const double measured = opt_number(*r, "gflops");
    const double measured_ms =
        r->contains("time_s") && (*r)["time_s"].is_object() ? 1e3 * opt_number((*r)["time_s"], "best") : NAN;
    // Predicted over measured time: the same as measured over predicted
    // GFLOP/s, and defined for an op that does no arithmetic.
    const double of_prediction = predicted_ms / measured_ms;
    const double speedup = opt_number(*r, "speedup_vs_naive");
    const double intensity = opt_number(*r, "intensity");
    const double roof = opt_number(*r, "roof_gflops");
    const double ridge = peak_gflops(w.live.ceilings) / dram_gbps(w.live.ceilings);
    const bool correct = r->value("correct", false);

    char line[256];
    std::cout << "\n";
    std::snprintf(line, sizeof line, "  %-28s %12s %12s %14s\n", "", "GFLOP/s", "ms per call", "vs prediction");
    std::cout << bold(line);
    std::snprintf(line, sizeof line, "  %-28s %12s %12s\n", "predicted (this machine)", num(predicted).c_str(),
                  num(predicted_ms).c_str());
    std::cout << line;
    std::snprintf(line, sizeof line, "  %-28s %12s %12s %14s   %s, %sx the naive rung\n", "measured now",
                  num(measured).c_str(), num(measured_ms).c_str(),
                  std::isfinite(of_prediction) ? (num(100 * of_prediction, 2) + "%").c_str() : "",
                  correct ? "correct" : "INCORRECT", num(speedup).c_str());
    std::cout << line;
    if (std::isfinite(recorded)) {
        std::snprintf(line, sizeof line, "  %-28s %12s   %s\n", ("recorded on " + w.recorded.machine_name).c_str(),
                      num(recorded).c_str(), dim("(at " + rec.shape.value_or(Shape{}).str() + ")").c_str());
        std::cout << line;
    }
    if (r->contains("disturbance") && (*r)["disturbance"].value("disturbed", false))
        std::cout << "  " << bold("measured now on a busy machine:") << " "
                  << wrap((*r)["disturbance"].value("why", std::string()) +
                              ". The time is slower than this machine can do: compare it with the prediction "
                              "once the machine is quiet.",
                          "    ")
                  << "\n";
    if (!why.empty()) std::cout << "  (no prediction: " << why << ")\n";
    if (step.contains("predict") && step["predict"].contains("why")) {
        std::vector<std::string> errs;
        std::cout << dim("  " + wrap("prediction: " + lesson::render(step["predict"]["why"].get<std::string>(), lc, &errs),
                                     "    ")) << "\n";
    }

    // Roofline: which side of the ridge, and how close to the roof.
    const bool memory_side = intensity < ridge;
    std::cout << "\n  " << bold("Roofline") << ": intensity " << num(intensity) << " FLOP/byte (the rung's traffic model)"
              << (memory_side ? " < " : " >= ") << "ridge " << num(ridge) << " -> "
              << (memory_side ? "memory-bound" : "compute-bound") << " side\n";
    if (!(intensity > 0) && std::isfinite(measured_ms) && measured_ms > 0) {
        // No arithmetic: the roofline has no point for it; bandwidth does.
        try {
            const double bytes = std::get<double>(lesson::evaluate("model:self.bytes", lc));
            std::cout << "  no arithmetic, so no point on the roofline: the rung's " << num(bytes / (1 << 20))
                      << " MiB in " << num(measured_ms) << " ms is " << num(bytes / measured_ms / 1e6)
                      << " GB/s (DRAM triad " << num(dram_gbps(w.live.ceilings)) << " GB/s)\n";
        } catch (const std::exception&) {
        }
    }
    if (std::isfinite(roof) && roof > 0) {
        const double frac = measured / roof;
        const bool read = r->value("memory_roof", "") == "dram_read";
        std::cout << "  roof here min(" << num(peak_gflops(w.live.ceilings)) << ", " << num(intensity) << " x "
                  << num(read ? dram_read_gbps(w.live.ceilings) : dram_gbps(w.live.ceilings))
                  << (read ? " GB/s read-only DRAM" : " GB/s DRAM triad") << ") = " << num(roof) << " GFLOP/s\n"
                  << "  " << bar(frac) << " " << num(100 * frac, 2) << "% of the roof\n";
        s["fraction_of_roof"] = frac;
    }
    s.update({{"ran", true}, {"correct", correct}, {"shape", w.shape.str()}, {"threads", w.threads},
              {"predicted_gflops", std::isfinite(predicted) ? nlohmann::json(predicted) : nlohmann::json()},
              {"predicted_ms", std::isfinite(predicted_ms) ? nlohmann::json(predicted_ms) : nlohmann::json()},
              {"measured_gflops", measured},
              {"measured_ms", std::isfinite(measured_ms) ? nlohmann::json(measured_ms) : nlohmann::json()},
              {"recorded_gflops", std::isfinite(recorded) ? nlohmann::json(recorded) : nlohmann::json()},
              {"recorded_machine", w.recorded.machine_name},
              {"speedup_vs_naive", std::isfinite(speedup) ? nlohmann::json(speedup) : nlohmann::json()},
              {"intensity", intensity}, {"ridge", ridge}, {"roof_gflops", roof},
              {"bound", memory_side ? "memory" : "compute"}, {"time_s", (*r)["time_s"]}});
    return s;
}

// Keeps one naive run (the first step's) and each step's own rung.
void merge_runs(Walk& w, const nlohmann::json& doc, const std::string& variant) {
    if (w.combined.is_null()) {
        w.combined = doc;
        w.combined.erase("gbench");
        w.combined["command"] = "memwall lesson " + w.L.id;
        w.combined["runs"] = nlohmann::json::array();
    }
    for (auto& r : doc["runs"]) {
        const std::string v = r.value("variant", ""), op = r.value("op", "");
        bool have = false;
        for (auto& x : w.combined["runs"]) have = have || (x.value("variant", "") == v && x.value("op", "") == op);
        if (!have && (v == variant || r.value("role", "") == "reference")) w.combined["runs"].push_back(r);
    }
    // By op (in the order the walk met them), then rung.
    std::vector<std::string> ops;
    for (auto& x : w.combined["runs"])
        if (std::find(ops.begin(), ops.end(), x.value("op", "")) == ops.end()) ops.push_back(x.value("op", ""));
    auto order = [&](const nlohmann::json& x) {
        return std::make_pair(std::find(ops.begin(), ops.end(), x.value("op", "")) - ops.begin(), x.value("rung", 0));
    };
    std::stable_sort(w.combined["runs"].begin(), w.combined["runs"].end(),
                     [&](const nlohmann::json& a, const nlohmann::json& b) { return order(a) < order(b); });
}

void print_summary(const Walk& w) {
    if (w.summary.size() < 2) return;
    const bool several = multi_op(w.L);
    std::cout << "\n"
              << rule("Summary: " + (several ? std::string("each op at its own shape") : w.shape.str()) + ", " +
                      std::to_string(w.threads) + " thread(s)")
              << "\n";
    char line[240];
    const int vw = several ? 28 : 12;
    std::snprintf(line, sizeof line, "  %-4s %-*s %11s %11s %10s %10s %10s %10s  %s\n", "step", vw, "variant",
                  "pred GF/s", "meas GF/s", "pred ms", "meas ms", "vs naive", "of roof", "bound");
    std::cout << bold(line);
    for (auto& s : w.summary) {
        if (!s.value("ran", false)) continue;
        auto n = [&](const char* k, const char* suffix = "") {
            return s.contains(k) && s[k].is_number() ? num(s[k].get<double>()) + suffix : std::string("-");
        };
        const std::string name = several ? s.value("op", "") + "/" + s.value("variant", "") : s.value("variant", "");
        std::snprintf(line, sizeof line, "  %-4d %-*s %11s %11s %10s %10s %10s %10s  %s\n",
                      s.value("step", s.value("rung", 0)), vw, name.c_str(), n("predicted_gflops").c_str(),
                      n("measured_gflops").c_str(), n("predicted_ms").c_str(), n("measured_ms").c_str(),
                      n("speedup_vs_naive", "x").c_str(),
                      s.contains("fraction_of_roof") ? (num(100 * s["fraction_of_roof"].get<double>(), 2) + "%").c_str()
                                                     : "-",
                      s.value("bound", "").c_str());
        std::cout << line;
    }
    std::cout << dim("  GFLOP/s from best-of-N times; speedups are ratios within each step's own run.") << "\n";
}

// Points the walk at step `step`: its op, its shape (--shape, else --quick's
// quick shape, else the level's lesson_shapes[op], or lesson_shape for the
// level's own op, else the op's default) and the live context for both.
void enter_step(Walk& w, const nlohmann::json& step) {
    w.op = lesson::step_op(step, w.L.op);
    const Op* op = find_op(w.op);
    if (!op) throw UsageError("level '" + w.L.id + "' names op '" + w.op + "', which is not built into this memwall");
    const auto& m = w.L.manifest;
    std::string text = w.o.shape;
    if (text.empty() && w.o.quick) text = op->quick_shape.str();
    if (text.empty() && m.contains("lesson_shapes") && m["lesson_shapes"].contains(w.op))
        text = m["lesson_shapes"][w.op].get<std::string>();
    if (text.empty() && w.op == w.L.op) text = m.value("lesson_shape", "");
    if (text.empty()) text = op->default_shape.str();
    w.shape = parse_shape(text, w.o.quick ? op->quick_shape : op->default_shape, op->axes, op->flag_axes);
    w.live.op = w.op;
    w.live.shape = w.shape;
}

int walk(const lesson::Level& L, const LessonOptions& o) {
    const auto& steps = L.manifest["steps"];
    Walk w{L, o, lesson::recorded_context(L), {}, lesson::split_sections(L.lesson_text), {}, {}, 0, nullptr, {}};
    const int hw = std::max(1u, std::thread::hardware_concurrency());
    w.threads = o.threads > 0 ? o.threads : hw;
    const int first = o.step < 0 ? 0 : o.step;
    const int last = o.only ? first : int(steps.size()) - 1;
    w.live.steps = steps;
    w.live.level_op = L.op;
    enter_step(w, steps[first]);  // usage errors (an unknown op, a bad --shape) before calibrating

    w.live.ceilings = walk_ceilings(o, w.threads);
    w.live.machine = machine_info();
    w.live.machine_name = "this machine";

    std::vector<std::string> errs;
    if (first == 0 && !o.only) std::cout << "\n" << for_terminal(lesson::render(w.text.intro, w.recorded, &errs));
    std::cout << "\n";
    print_machine(w);

    bool no_pause = o.no_pause;
    for (int i = first; i <= last; ++i) {
        const auto& step = steps[i];
        const std::string v = step.value("variant", "");
        enter_step(w, step);
        const lesson::StepText* st = nullptr;
        for (auto& t : w.text.steps)
            if (t.variant == v && t.op == step.value("op", "")) st = &t;
        // The recorded context of this step's op, speaking of this variant.
        lesson::Context rec = lesson::for_op(w.recorded, w.op);
        rec.self = v;
        std::cout << rule("Step " + std::to_string(i) + " of " + std::to_string(steps.size() - 1) + " · " +
                          lesson::step_key(step) + " — " + step.value("title", ""))
                  << "\n";
        if (st) std::cout << for_terminal(lesson::render(st->before, rec, &errs)) << "\n";
        auto doc = run_rung(w, v);
        w.summary.push_back(report_step(w, step, doc));
        w.summary.back()["step"] = i;
        merge_runs(w, doc, v);
        if (st && !st->after.empty())
            std::cout << "\n" << dim("The lesson's text quotes the run recorded on " + w.recorded.machine_name + " at " +
                                      rec.shape.value_or(Shape{}).str() + ":") << "\n"
                      << for_terminal(lesson::render(st->after, rec, &errs));
        std::cout << "\n";
        if (i < last && !wait_for_enter(no_pause)) break;
    }
    if (last == int(steps.size()) - 1 && !w.text.outro.empty())
        std::cout << for_terminal(lesson::render(w.text.outro, w.recorded, &errs));
    print_summary(w);
    for (auto& e : errs) std::cerr << "memwall: lesson text: " << e << "\n";

    if (!o.results_out.empty()) {
        write_json_atomic(o.results_out, w.combined);
        std::cout << "results: " << o.results_out << " (memwall plot " << o.results_out << ")\n";
    }
    if (!o.json_out.empty()) {
        nlohmann::json j = {{"schema", "memwall.lesson/1"}, {"level", L.id}, {"shape", w.shape.str()},
                            {"threads", w.threads}, {"steps", w.summary}, {"results", w.combined}};
        write_json_atomic(o.json_out, j);
    }
    bool all_ok = true;
    for (auto& s : w.summary) all_ok = all_ok && s.value("correct", true);
    return all_ok ? 0 : 1;
}

void check_json_path(const std::string& path, const char* what) {
    if (!path.empty() && fs::path(path).extension() != ".json")
        throw UsageError(std::string(what) + " '" + path + "' must end in .json");
}

int run_lesson(const LessonOptions& o) {
    if (o.backend != "cpu")
        throw UsageError("the lesson walks the " + std::string("cpu") + " ladder; unknown or unsupported backend '" +
                         o.backend + "'; valid backends: cpu (the CUDA ladder: memwall run vectorization --backend cuda-emu)");
    check_json_path(o.json_out, "--json");
    if (!(o.render || o.check)) check_json_path(o.results_out, "--results");
    if (o.only && o.step < 0) throw UsageError("--only needs --step N");
    if (!(o.wait_quiet >= 0 && o.wait_quiet <= 3600))
        throw UsageError("--wait-quiet must be between 0 and 3600 seconds, got " + fmt("%g", o.wait_quiet));
    lesson::Level L = lesson::load_level(levels_root(), repo_root(), o.level);
    if ((o.render || o.check) && !o.results_out.empty()) L = with_results(std::move(L), o.results_out);
    const auto& steps = L.manifest["steps"];
    if (o.step >= int(steps.size()) || (o.step < 0 && o.step != -1))
        throw UsageError("step " + std::to_string(o.step) + " is out of range for " + L.id +
                         "; valid steps: " + step_choices(steps));
    if (o.render || o.check) return render_command(L, o);
    return walk(L, o);
}

}  // namespace

MW_REGISTER_COMMAND(lesson, [](CLI::App& app) -> CommandAction {
    auto* sub = app.add_subcommand("lesson", "Walk a level step by step: predict, run the rung now, compare");
    auto o = std::make_shared<LessonOptions>();
    sub->add_option("level", o->level, "Level id, number or lever (e.g. 01, 01-vectorization, vectorization)")->required();
    sub->add_option("--step", o->step, "Start at this step (0 = the naive rung)");
    sub->add_flag("--only", o->only, "Walk only the step given by --step");
    sub->add_flag("--no-pause", o->no_pause, "Do not wait for Enter between steps");
    sub->add_option("--backend", o->backend, "Backend of the ladder (cpu)")->default_val("cpu");
    sub->add_flag("--quick", o->quick, "The op's small quick shape and short timing (tests, smoke runs)");
    sub->add_option("--shape", o->shape, "Shape to run, axis=value,... (default: the level's lesson_shape)");
    sub->add_option("--threads", o->threads, "CPU threads (default: all hardware threads)");
    sub->add_option("--ceilings", o->ceilings_path, "Ceilings from `memwall calibrate --out` (default: quick calibration)");
    sub->add_option("--wait-quiet", o->wait_quiet,
                    "Before each rung's timed calls, wait up to this many seconds for a quiet machine (0: don't)");
    sub->add_option("--json", o->json_out, "Write the walk (predictions, measurements, results) as JSON here");
    sub->add_option("--results", o->results_out,
                    "Walking: write the walk's runs as a results file (for memwall plot). With --render or --check: "
                    "render from this results folder (or file) instead of the recorded results");
    sub->add_flag("--render", o->render,
                  "Print lesson.md with its numbers filled in from the recorded results (or --results DIR)");
    sub->add_option("--out", o->out, "With --render: write the markdown here");
    sub->add_flag("--check", o->check, "Check that every placeholder resolves against the recorded results");
    return [o] { return run_lesson(*o); };
});

}  // namespace mw
