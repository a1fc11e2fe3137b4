// Placeholders in lesson text, resolved against results files (see
// lesson_render.hpp for the syntax).
#include "commands/lessons/lesson_render.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "commands/levels.hpp"
#include "harness/results.hpp"
#include "harness/runner.hpp"
#include "harness/ceilings.hpp"
#include "harness/command.hpp"
#include "harness/plot.hpp"
#include "harness/registry.hpp"
#include "harness/strings.hpp"

namespace mw::lesson {

namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// "m=512,n=512,k=512" and "k=512,m=512,n=512" are the same shape.
std::string canonical_shape(const std::string& text) {
    std::map<std::string, std::string> axes;
    std::stringstream ss(text);
    std::string part;
    while (std::getline(ss, part, ',')) {
        auto eq = part.find('=');
        if (eq == std::string::npos) throw Error("bad shape '" + text + "' (want axis=value,...)");
        axes[trim(part.substr(0, eq))] = trim(part.substr(eq + 1));
    }
    std::string s;
    for (auto& [k, v] : axes) s += (s.empty() ? "" : ",") + k + "=" + v;
    return s;
}

Value json_value(const nlohmann::json& j, const std::string& what) {
    if (j.is_number()) return j.get<double>();
    if (j.is_string()) return j.get<std::string>();
    if (j.is_boolean()) return std::string(j.get<bool>() ? "yes" : "no");
    throw Error(what + " is " + (j.is_null() ? "null" : "not a number or text"));
}

// Follows "a.b.c" into a JSON object ("dram_triad_gbps.0" indexes arrays).
const nlohmann::json* json_path(const nlohmann::json& root, const std::string& path) {
    const nlohmann::json* j = &root;
    std::stringstream ss(path);
    std::string key;
    while (std::getline(ss, key, '.')) {
        if (j->is_object() && j->contains(key)) j = &(*j)[key];
        else if (j->is_array() && !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit) &&
                 std::stoul(key) < j->size())
            j = &(*j)[std::stoul(key)];
        else return nullptr;
    }
    return j;
}

double need_number(const Value& v, const std::string& what) {
    if (auto* d = std::get_if<double>(&v)) return *d;
    throw Error(what + " is text, not a number");
}

// ------------------------------------------------------------------ refs

bool same_op(const Context& ctx, const nlohmann::json& r) { return ctx.op.empty() || r.value("op", ctx.op) == ctx.op; }

// A run of `variant` on the context's backend and op that ran (any shape).
bool run_of(const Context& ctx, const nlohmann::json& r, const std::string& variant) {
    return r.value("variant", "") == variant && r.value("backend", "") == ctx.backend && same_op(ctx, r) &&
           r.value("ran", true);
}

const nlohmann::json& find_run(const Context& ctx, const std::string& variant, const std::string& shape) {
    const std::string want = shape.empty() ? (ctx.shape ? ctx.shape->str() : "") : canonical_shape(shape);
    std::vector<std::string> seen;
    for (auto& r : ctx.runs) {
        if (!run_of(ctx, r, variant)) continue;
        const std::string s = canonical_shape(r.value("shape_str", ""));
        if (want.empty() || s == want) return r;
        seen.push_back(s);
    }
    if (!seen.empty())
        throw Error("no run of '" + variant + "' at " + want + " (recorded shapes: " + join(seen) + ")");
    std::vector<std::string> names;
    for (auto& r : ctx.runs)
        if (r.value("backend", "") == ctx.backend && same_op(ctx, r)) names.push_back(r.value("variant", "?"));
    throw Error("no " + ctx.backend + " run of variant '" + variant + "'" + (ctx.op.empty() ? "" : " of " + ctx.op) +
                " in the results (runs: " + (names.empty() ? "none" : join(names)) + ")");
}

// The file stem `memwall plot` gives op's figures in these results
// (harness/plot.hpp: roofline-<stem>.png, speedup-<stem>.png): the shape
// joins it only where the results hold several shapes of the op, as level
// 01's recorded run does (512^3 and 1024^3). The run at the context's shape,
// else the op's one plotted shape. plot_stem groups all the runs each
// time, so it is asked once per shape, not once per run.
std::string plot_stem_ref(const std::string& op, const Context& ctx) {
    const nlohmann::json results = {{"runs", ctx.runs}};
    const std::string want = ctx.shape ? ctx.shape->str() : "";
    std::vector<std::string> shapes;  // the op's shapes that have a figure
    std::string stem_any;
    for (const auto& r : ctx.runs) {
        if (r.value("op", "") != op || r.value("backend", "") != ctx.backend) continue;
        const std::string s = canonical_shape(r.value("shape_str", ""));
        if (std::find(shapes.begin(), shapes.end(), s) != shapes.end()) continue;
        const std::string stem = plot_stem(results, r);
        if (stem.empty()) continue;
        if (s == want) return stem;
        shapes.push_back(s);
        stem_any = stem;
    }
    if (shapes.size() == 1) return stem_any;
    if (shapes.empty()) throw Error("no plotted " + ctx.backend + " run of " + op + " in the results");
    throw Error("the results hold " + op + " at " + join(shapes) + ", not at " + (want.empty() ? "no shape" : want) +
                ": which figure is meant?");
}

double best_time(const nlohmann::json& run) {
    const auto* t = json_path(run, "time_s.best");
    if (!t || !t->is_number() || t->get<double>() <= 0) throw Error("run of '" + run.value("variant", "?") + "' has no time");
    return t->get<double>();
}

double peak_bytes(const nlohmann::json& run) {
    const auto* b = json_path(run, "peak_bytes");
    if (!b || !b->is_number() || b->get<double>() <= 0)
        throw Error("run of '" + run.value("variant", "?") + "' has no peak_bytes (recorded before memory tracking?)");
    return b->get<double>();
}

Value run_ref(const std::string& body, const Context& ctx) {
    // variant[@shape].field.path
    std::string variant, shape, field;
    const auto at = body.find('@');
    const auto dot = body.find('.', at == std::string::npos ? 0 : at);
    if (dot == std::string::npos) throw Error("run reference needs a field, e.g. run:naive.gflops");
    if (at != std::string::npos && at < dot) {
        variant = body.substr(0, at);
        shape = body.substr(at + 1, dot - at - 1);
    } else {
        variant = body.substr(0, dot);
    }
    field = body.substr(dot + 1);
    if (variant == "self") variant = ctx.self;
    const auto& run = find_run(ctx, variant, shape);
    if (field == "time_ms") return best_time(run) * 1e3;
    const auto* j = json_path(run, field);
    if (!j) throw Error("run of '" + variant + "' has no field '" + field + "'");
    return json_value(*j, "run:" + body);
}

double peak_for(const Ceilings& c, const std::string& dtype, int threads) {
    double best = 0;
    for (auto& p : c.peaks)
        if (p.dtype == dtype && (threads == 0 || p.threads == threads)) best = std::max(best, p.gflops);
    if (best <= 0)
        throw Error("no calibrated " + dtype + " peak" + (threads ? " on " + std::to_string(threads) + " thread(s)" : ""));
    return best;
}

// FLOPs per cycle of one core: the measured one-thread fp32 peak over the
// measured clock; without a clock (older ceilings files), what the widest ISA
// does with two FMA ports — twice too many on cores that run AVX-512 at
// 256 bits a cycle (Zen 4), which is why the clock is measured.
double flops_per_cycle(const Ceilings& c) {
    if (c.clock_ghz > 0) return peak_for(c, "fp32", 1) / c.clock_ghz;
    std::string isa;
    for (auto& p : c.peaks)
        if (p.dtype == "fp32" && p.threads == 1) isa = p.isa;
    if (isa.find("avx512") != std::string::npos) return 64;
    if (isa.find("avx2") != std::string::npos || isa.find("fma") != std::string::npos) return 32;
    if (isa.empty()) throw Error("no one-thread fp32 peak in the ceilings");
    return 16;
}

double positive(double x, const std::string& what) {
    if (!(x > 0)) throw Error("ceiling '" + what + "' was not measured");
    return x;
}

Value ceiling_ref(const std::string& name, const Ceilings& c) {
    if (name == "dram_gbps") return positive(dram_gbps(c), name);
    if (name == "dram_read_gbps") return positive(dram_read_gbps(c), name);
    if (name == "dram_1t_gbps") return positive(c.dram_triad_gbps.empty() ? 0 : c.dram_triad_gbps[0], name);
    if (name == "l1_gbps") return positive(c.l1_gbps, name);
    if (name == "l2_gbps") return positive(c.l2_gbps, name);
    if (name == "l3_gbps") return positive(c.l3_gbps, name);
    if (name == "l1d_bytes") return positive(c.l1d_bytes, name);
    if (name == "l2_bytes") return positive(c.l2_bytes, name);
    if (name == "l3_bytes") return positive(c.l3_bytes, name);
    if (name == "threads") return positive(c.threads, name);
    if (name == "ridge") return peak_for(c, "fp32", 0) / positive(dram_gbps(c), "dram_gbps");
    if (name == "flops_per_cycle") return flops_per_cycle(c);
    if (name == "datapath") return fma_datapath(c, flops_per_cycle(c));
    if (name == "clock_source")
        return std::string(c.clock_ghz > 0 ? "measured by `memwall calibrate` with a chain of dependent adds, one per cycle"
                                           : "not measured in these ceilings (an older calibration): derived from the "
                                             "one-thread peak assuming two FMA pipes of the widest vector width");
    if (name == "clock_ghz") return c.clock_ghz > 0 ? c.clock_ghz : peak_for(c, "fp32", 1) / flops_per_cycle(c);
    if (name.rfind("peak.", 0) == 0) {
        // peak.<dtype>[.<N>t]
        std::string rest = name.substr(5), dtype = rest;
        int threads = 0;
        if (auto d = rest.find('.'); d != std::string::npos) {
            dtype = rest.substr(0, d);
            std::string t = rest.substr(d + 1);
            if (t.size() < 2 || t.back() != 't') throw Error("bad peak reference '" + name + "' (peak.fp32.1t)");
            threads = std::stoi(t.substr(0, t.size() - 1));
        }
        return peak_for(c, dtype, threads);
    }
    throw Error("unknown ceiling '" + name +
                "'; valid: dram_gbps, dram_read_gbps, dram_1t_gbps, l1_gbps, l2_gbps, l3_gbps, l1d_bytes, l2_bytes, l3_bytes, "
                "threads, ridge, flops_per_cycle, datapath, clock_ghz, clock_source, peak.<dtype>[.<N>t]");
}

// Bandwidth of the cache sweep at a working set: the first point at least as
// large (the sweep's largest point beyond it).
double sweep_bw(const std::vector<BandwidthPoint>& sweep, double ws, const char* which) {
    if (sweep.empty()) throw Error(std::string("no ") + which + " cache sweep in the ceilings");
    for (auto& p : sweep)
        if (p.working_set_bytes >= ws) return p.gbps;
    return sweep.back().gbps;
}

// The run of `variant` at the context's shape on its backend, when the
// results hold one; else null.
const nlohmann::json* run_at_shape(const Context& ctx, const std::string& variant) {
    if (!ctx.shape) return nullptr;
    const std::string want = ctx.shape->str();
    for (auto& r : ctx.runs)
        if (run_of(ctx, r, variant) && canonical_shape(r.value("shape_str", "")) == want) return &r;
    return nullptr;
}

Value model_ref(const std::string& body, const Context& ctx) {
    const auto dot = body.find('.');
    if (dot == std::string::npos) throw Error("model reference needs a field: model:blocked.intensity");
    std::string variant = body.substr(0, dot), field = body.substr(dot + 1);
    if (variant == "self") variant = ctx.self;
    if (!ctx.shape) throw Error("no shape to evaluate the model at");
    // A run of the variant at this shape recorded its models as they were on
    // its machine: a model that depends on the machine (the speculative
    // lever's widened target is sized from the L3) must be read from the
    // record, or a copy rendered elsewhere would not be the recorded one.
    static const std::map<std::string, std::string> recorded_field = {
        {"flops", "flops"}, {"bytes", "bytes"}, {"compulsory_bytes", "compulsory_bytes"},
        {"intensity", "intensity"}, {"executed_flops", "executed_flops"}, {"units", "units_per_call"}};
    if (const auto* run = run_at_shape(ctx, variant); run && recorded_field.count(field)) {
        const auto* j = json_path(*run, recorded_field.at(field));
        if (j && j->is_number()) return j->get<double>();
    }
    const Op* op = find_op(ctx.op);
    if (!op) throw Error("unknown op '" + ctx.op + "'");
    auto b = parse_backend(ctx.backend);
    const Variant* v = nullptr;
    for (auto* x : variants_of(ctx.op, b)) if (x->name == variant) v = x;
    if (!v) throw Error("no " + ctx.backend + " variant '" + variant + "' of " + ctx.op);
    const double flops = op->flops(*ctx.shape);
    const double compulsory = op->compulsory_bytes(*ctx.shape, DType::f32);
    const double bytes = v->bytes ? v->bytes(*ctx.shape, DType::f32) : compulsory;
    if (field == "flops") return flops;
    if (field == "bytes") return bytes;
    if (field == "compulsory_bytes") return compulsory;
    if (field == "intensity") return flops / bytes;
    if (field == "executed_flops") return v->executed_flops ? v->executed_flops(*ctx.shape) : flops;
    if (field == "units") {
        if (op->unit.name.empty() || !op->unit.per_call) throw Error("op '" + op->name + "' declares no unit of work");
        return op->unit.per_call(*ctx.shape);
    }
    throw Error("unknown model field '" + field +
                "'; valid: flops, executed_flops, units, bytes, compulsory_bytes, intensity");
}

Value resolve_ref(const std::string& ref, const Context& ctx);

Value predict_ref(const std::string& variant_in, const Context& ctx) {
    const std::string variant = variant_in == "self" ? ctx.self : variant_in;
    for (auto& s : ctx.steps) {
        const std::string op = s.value("op", ctx.level_op.empty() ? ctx.op : ctx.level_op);
        if (s.value("variant", "") != variant || op != ctx.op) continue;
        if (!s.contains("predict") || !s["predict"].contains("gflops"))
            throw Error("step '" + variant + "' has no predict.gflops formula in level.json");
        Context sub = ctx;
        sub.self = variant;
        return evaluate(s["predict"]["gflops"].get<std::string>(), sub);
    }
    throw Error("no step '" + variant + "'" + (ctx.op.empty() ? "" : " of " + ctx.op) + " in level.json");
}

// A step's predicted time per call in ms: its predict.time_ms formula, else
// the op's FLOPs over the predicted GFLOP/s. An op that does no arithmetic
// (a transpose) has no GFLOP/s to divide by and must state its time.
Value predict_time_ref(const std::string& variant_in, const Context& ctx) {
    const std::string variant = variant_in == "self" ? ctx.self : variant_in;
    for (auto& s : ctx.steps) {
        const std::string op = s.value("op", ctx.level_op.empty() ? ctx.op : ctx.level_op);
        if (s.value("variant", "") != variant || op != ctx.op) continue;
        Context sub = ctx;
        sub.self = variant;
        if (s.contains("predict") && s["predict"].contains("time_ms"))
            return evaluate(s["predict"]["time_ms"].get<std::string>(), sub);
        const double flops = std::get<double>(model_ref("self.flops", sub));
        if (!(flops > 0))
            throw Error("step '" + variant + "' of " + ctx.op +
                        " does no arithmetic: give it a predict.time_ms formula (bytes over a bandwidth) in level.json");
        const Value g = predict_ref(variant, sub);
        if (!std::holds_alternative<double>(g) || !(std::get<double>(g) > 0))
            throw Error("step '" + variant + "' predicts no positive GFLOP/s to turn into a time");
        return flops / std::get<double>(g) / 1e6;
    }
    throw Error("no step '" + variant + "'" + (ctx.op.empty() ? "" : " of " + ctx.op) + " in level.json");
}

// {{claims:LEVER}}: the lever's published claims and their verdicts, a
// markdown table read from the committed `memwall reproduce` report. Open
// claims (figures the seed states without what checking them takes) are
// counted under the table, not listed: `memwall reproduce --lever` lists them.
Value claims_ref(const std::string& lever, const Context& ctx) {
    if (ctx.claims_file.empty()) throw Error("no claims report for this lesson");
    nlohmann::json doc;
    try {
        doc = read_json_file(ctx.claims_file);
    } catch (const std::exception& e) {
        throw Error(std::string("claims report: ") + e.what());
    }
    auto cell = [](std::string t) {
        for (std::size_t i = 0; (i = t.find('|', i)) != std::string::npos; i += 2) t.replace(i, 1, "\\|");
        for (char& c : t) c = c == '\n' ? ' ' : c;
        return t;
    };
    std::map<std::string, int> counts;
    std::string rows;
    for (const auto& c : doc.value("claims", nlohmann::json::array())) {
        if (c.value("lever", "") != lever) continue;
        const std::string verdict = c.value("verdict", "?");
        ++counts[verdict];
        if (verdict == "not measurable here") continue;
        rows += "| `" + c.value("id", "?") + "` | " + cell(c.value("statement", "")) + " | " +
                cell(c.value("published_text", "")) + " | " + cell(c.value("ours_text", "—")) + " | " + verdict + " |\n";
    }
    if (rows.empty()) throw Error("no claims of lever '" + lever + "' in " + ctx.claims_file);
    std::string tally;
    for (const auto& [v, n] : counts) tally += (tally.empty() ? "" : ", ") + std::to_string(n) + " " + v;
    return "| claim | statement | published | ours | verdict |\n|---|---|---|---|---|\n" + rows + "\n" + tally +
           " (`memwall reproduce --lever " + lever + "` recomputes them; `" + doc.value("command", "") + "` wrote the report).";
}

// The shape the GPU kit runs `op` at (its shapes file: "op GPU-shape
// emulated-shape" lines), else the op's default.
Shape gpu_kit_shape(const Op& op, const Context& ctx) {
    std::ifstream in(ctx.gpu_shapes_file);
    if (!in) throw Error("no GPU kit shapes file '" + ctx.gpu_shapes_file + "'");
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::string name, shape;
        if (words >> name >> shape && name == op.name)
            return parse_shape(shape, op.default_shape, op.axes, op.flag_axes);
    }
    return op.default_shape;
}

std::string fmt_ms(double s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g ms", s * 1e3);
    return b;
}

Value gpu_ref(const std::string& op_name, const Context& ctx) {
    const Op* op = find_op(op_name);
    if (!op) throw Error("unknown op '" + op_name + "' in gpu:");
    const Shape shape = gpu_kit_shape(*op, ctx);
    // Without the CUDA backend built, the same sources' emulated rungs carry
    // the same cost models (the vendor rungs are not among them).
    std::vector<const Variant*> rungs = variants_of(op_name, Backend::cuda);
    const bool emulated = rungs.empty();
    if (emulated) rungs = variants_of(op_name, Backend::cuda_emu);
    if (rungs.empty()) throw Error("op '" + op_name + "' has no CUDA rungs");
    // Measured: the fastest correct run of each rung at this shape in any
    // results/<folder>/<lever>-cuda.json.
    std::map<std::string, std::pair<double, std::string>> measured;
    std::error_code ec;
    if (!ctx.results_root.empty())
        for (auto& d : fs::directory_iterator(ctx.results_root, ec)) {
            const fs::path f = d.path() / (op->lever + "-cuda.json");
            if (!fs::is_regular_file(f)) continue;
            nlohmann::json doc;
            try {
                doc = read_json_file(f);
            } catch (const std::exception&) {
                continue;
            }
            const auto& m = doc.value("machine", nlohmann::json::object());
            const std::string gpu = m.contains("gpu") && m["gpu"].is_object() ? m["gpu"].value("name", "") : "";
            for (const auto& r : doc.value("runs", nlohmann::json::array())) {
                if (r.value("op", "") != op_name || r.value("backend", "") != "cuda" || !r.value("correct", false) ||
                    r.value("shape_str", "") != shape.str() || !r.contains("time_s"))
                    continue;
                const double t = r["time_s"].value("best", 0.0);
                auto& best = measured[r.value("variant", "")];
                if (t > 0 && (best.first == 0 || t < best.first))
                    best = {t, (gpu.empty() ? "a GPU" : gpu) + ", results/" + d.path().filename().string()};
            }
        }
    const std::vector<const GpuSpec*> gpus = {find_gpu_spec("H100-SXM5-80GB"), find_gpu_spec("A100-SXM4-80GB")};
    std::string out = "At `" + shape.str() + "` (the GPU kit's shape):\n\n| rung | variant | compute | FLOP/byte |";
    for (const GpuSpec* g : gpus) out += " " + g->name + " at its roofs |";
    out += " measured |\n|---:|---|---|---:|";
    for (std::size_t i = 0; i < gpus.size(); ++i) out += "---:|";
    out += "---|\n";
    for (const Variant* v : rungs) {
        const double flops = v->executed_flops ? v->executed_flops(shape) : op->flops(shape);
        const double bytes = v->bytes ? v->bytes(shape, DType::f32) : op->compulsory_bytes(shape, DType::f32);
        const std::string compute = v->compute.empty() ? "fp32" : v->compute;
        char intensity[32];
        std::snprintf(intensity, sizeof intensity, "%.3g", bytes > 0 ? flops / bytes : 0.0);
        out += "| " + std::to_string(v->rung) + " | " + v->name + " | " + compute + " | " + intensity + " |";
        for (const GpuSpec* g : gpus) {
            const double peak = spec_peak_tflops(*g, compute) * 1e12, bw = g->hbm_gbps * 1e9;
            if (peak <= 0) {
                out += " no " + compute + " units |";
                continue;
            }
            const double tc = flops / peak, tm = bytes / bw;
            out += " " + fmt_ms(std::max(tc, tm)) + (tc >= tm ? " (compute)" : " (memory)") + " |";
        }
        const auto it = measured.find(v->name);
        out += it == measured.end() ? " not measured |\n" : " " + fmt_ms(it->second.first) + " on " + it->second.second + " |\n";
    }
    out += "\nPredictions are lower bounds from the spec sheet (harness/gpu_specs.cpp: dense peaks, boost clock), "
           "with each rung's own FLOP and byte models; no kernel reaches them.";
    if (emulated) out += " (This build has no CUDA backend: the vendor rungs are not listed.)";
    return out;
}

// range:a/b: the speedup of a over b round by round, "lo–hi" over the
// paired rounds of a run recorded with --rounds N (time_s.round_best).
Value range_ref(const std::string& body, const Context& ctx) {
    const auto slash = body.find('/');
    if (slash == std::string::npos) throw Error("range needs two variants: range:simd/naive");
    std::string a = body.substr(0, slash);
    const std::string b = body.substr(slash + 1);
    if (a == "self") a = ctx.self;
    const auto& ra = find_run(ctx, a, "");
    const auto& rb = find_run(ctx, b, "");
    const auto* ta = json_path(ra, "time_s.round_best");
    const auto* tb = json_path(rb, "time_s.round_best");
    auto rounds = [](const nlohmann::json* t) { return t && t->is_array() ? t->size() : std::size_t(1); };
    if (rounds(ta) < 2 || rounds(ta) != rounds(tb))
        throw Error("range:" + body + " needs both runs recorded in one run with --rounds N (N >= 2); '" + a + "' has " +
                    std::to_string(rounds(ta)) + " round(s), '" + b + "' " + std::to_string(rounds(tb)));
    const auto range = paired_ratio_range(*tb, *ta);
    if (!range) throw Error("range:" + body + ": a round has no time");
    const auto [lo, hi] = *range;
    return fmt_num(lo, 3) + "–" + fmt_num(hi, 3);
}

Value resolve_ref(const std::string& ref, const Context& ctx) {
    const auto colon = ref.find(':');
    std::string kind = colon == std::string::npos ? ref : ref.substr(0, colon);
    std::string body = colon == std::string::npos ? "" : ref.substr(colon + 1);
    if (ref.rfind("machine.", 0) == 0) kind = "machine", body = ref.substr(8);
    // OP::rest: the same reference, about another op of the level.
    if (const auto q = body.find("::"); q != std::string::npos &&
        (kind == "run" || kind == "speedup" || kind == "range" || kind == "memory" || kind == "model" || kind == "predict" ||
         kind == "predict_time" || kind == "shape")) {
        Context sub = for_op(ctx, body.substr(0, q));
        if (sub.op != ctx.op) sub.self.clear();
        return resolve_ref(kind + ":" + body.substr(q + 2), sub);
    }
    if (kind == "run") return run_ref(body, ctx);
    if (kind == "speedup" || kind == "memory") {
        // Two variants a/b ("self" for the step's own): b's time over a's, or
        // a's peak memory over b's.
        const auto slash = body.find('/');
        if (slash == std::string::npos)
            throw Error(kind + " needs two variants: " + kind + (kind == "speedup" ? ":simd/naive" : ":tiled/naive"));
        std::string a = body.substr(0, slash);
        const std::string b = body.substr(slash + 1);
        if (a == "self") a = ctx.self;
        if (kind == "speedup") return best_time(find_run(ctx, b, "")) / best_time(find_run(ctx, a, ""));
        return peak_bytes(find_run(ctx, a, "")) / peak_bytes(find_run(ctx, b, ""));
    }
    if (kind == "range") return range_ref(body, ctx);
    if (kind == "ceiling") return ceiling_ref(body, ctx.ceilings);
    if (kind == "machine") {
        if (body == "name") {
            if (ctx.machine_name.empty()) throw Error("no machine name");
            return ctx.machine_name;
        }
        const auto* j = json_path(ctx.machine, body);
        if (!j) throw Error("the machine block has no field '" + body + "'");
        return json_value(*j, "machine." + body);
    }
    if (kind == "shape") {
        if (!ctx.shape) throw Error("no shape");
        auto it = ctx.shape->axes.find(body);
        if (it == ctx.shape->axes.end()) throw Error("shape has no axis '" + body + "'");
        return double(it->second);
    }
    if (kind == "model") return model_ref(body, ctx);
    if (kind == "predict") return predict_ref(body, ctx);
    if (kind == "predict_time") return predict_time_ref(body, ctx);
    if (kind == "claims") return claims_ref(body, ctx);
    if (kind == "gpu") return gpu_ref(body, ctx);
    if (kind == "results") {
        if (body == "stem") return plot_stem_ref(ctx.op, ctx);
        if (body.rfind("stem:", 0) == 0) return plot_stem_ref(body.substr(5), ctx);
        if (body == "path" && !ctx.results_path.empty()) return ctx.results_path;
        if (body == "dir" && !ctx.results_dir.empty()) return ctx.results_dir;
        if (body == "command" && !ctx.results_command.empty()) return ctx.results_command;
        throw Error("unknown or empty results field '" + body + "'; valid: path, dir, command, stem, stem:OP");
    }
    throw Error("unknown reference '" + ref +
                "'; kinds: run:, speedup:, range:, memory:, ceiling:, machine., shape:, model:, predict:, predict_time:, claims:, gpu:, results:");
}

// ------------------------------------------------------------ expressions

struct Parser {
    const std::string& s;
    const Context& ctx;
    std::size_t i = 0;

    void skip() { while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i; }
    bool eat(char c) {
        skip();
        if (i < s.size() && s[i] == c) return ++i, true;
        return false;
    }
    [[noreturn]] void fail(const std::string& why) { throw Error(why + " at column " + std::to_string(i + 1)); }

    Value expr() {
        Value v = term();
        for (;;) {
            if (eat('+')) v = need_number(v, "left of +") + need_number(term(), "right of +");
            else if (eat('-')) v = need_number(v, "left of -") - need_number(term(), "right of -");
            else return v;
        }
    }
    Value term() {
        Value v = unary();
        for (;;) {
            if (eat('*')) v = need_number(v, "left of *") * need_number(unary(), "right of *");
            else if (eat('/')) {
                const double d = need_number(unary(), "right of /");
                if (d == 0) fail("division by zero");
                v = need_number(v, "left of /") / d;
            } else return v;
        }
    }
    Value unary() {
        if (eat('-')) return -need_number(unary(), "after -");
        return primary();
    }
    // A reference: letters, digits and _ . : / @ =, and commas after an '@'
    // until the next '.' (a shape list).
    std::string ref_token() {
        std::size_t b = i;
        bool in_shape = false;
        while (i < s.size()) {
            const char c = s[i];
            if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '/' || c == '=') ++i;
            else if (c == '@') in_shape = true, ++i;
            else if (c == '.') in_shape = false, ++i;
            else if (c == ',' && in_shape) ++i;
            else break;
        }
        return s.substr(b, i - b);
    }
    Value primary() {
        skip();
        if (i >= s.size()) fail("expression ends early");
        const char c = s[i];
        if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
            std::size_t used = 0;
            const double d = std::stod(s.substr(i), &used);
            i += used;
            return d;
        }
        if (eat('(')) {
            Value v = expr();
            if (!eat(')')) fail("missing ')'");
            return v;
        }
        if (!std::isalpha(static_cast<unsigned char>(c))) fail(std::string("unexpected '") + c + "'");
        const std::string tok = ref_token();
        skip();
        if (i < s.size() && s[i] == '(' && tok.find(':') == std::string::npos && tok.find('.') == std::string::npos) {
            ++i;
            std::vector<double> args{need_number(expr(), tok + " argument")};
            while (eat(',')) args.push_back(need_number(expr(), tok + " argument"));
            if (!eat(')')) fail("missing ')' after " + tok + "(...)");
            return call(tok, args);
        }
        return resolve_ref(tok, ctx);
    }
    double call(const std::string& f, const std::vector<double>& a) {
        if ((f == "min" || f == "max") && a.size() >= 2) {
            double r = a[0];
            for (double x : a) r = f == "min" ? std::min(r, x) : std::max(r, x);
            return r;
        }
        if (f == "bw1" && a.size() == 1) return sweep_bw(ctx.ceilings.cache_sweep_1t, a[0], "one-thread");
        if (f == "bwall" && a.size() == 1) return sweep_bw(ctx.ceilings.cache_sweep_all, a[0], "all-thread");
        throw Error("unknown function " + f + "/" + std::to_string(a.size()) +
                    "; valid: min(a,b,...), max(a,b,...), bw1(bytes), bwall(bytes)");
    }
};

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw UsageError("cannot read " + p.string());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

// ------------------------------------------------------------------ public

std::string fmt_num(double x, int digits) {
    if (!std::isfinite(x)) return "??";
    if (x == 0) return "0";
    if (std::fabs(x) >= std::pow(10.0, digits)) return fmt("%.0f", x);
    std::string s = fmt(x, digits);
    if (s.find('e') != std::string::npos) {
        // Small numbers: fixed notation with `digits` significant digits.
        const int decimals = std::min(12, digits - 1 - int(std::floor(std::log10(std::fabs(x)))));
        s = fmt("%.*f", decimals, x);
    }
    return s;
}

Value evaluate(const std::string& expr, const Context& ctx) {
    Parser p{expr, ctx};
    Value v = p.expr();
    p.skip();
    if (p.i != expr.size()) p.fail("unexpected text '" + expr.substr(p.i) + "' (operators need spaces around them)");
    return v;
}

std::string format_value(const Value& v, const std::string& fmt_in) {
    const std::string fmt = trim(fmt_in);
    if (auto* s = std::get_if<std::string>(&v)) return *s;
    const double x = std::get<double>(v);
    if (fmt.empty()) return fmt_num(x);
    if (fmt == "pct") return fmt_num(100 * x, 2) + "%";
    if (fmt == "int") return fmt_num(std::round(x), 30);
    if (fmt == "KiB") return fmt_num(x / 1024) + " KiB";
    if (fmt == "MiB") return fmt_num(x / (1024.0 * 1024)) + " MiB";
    if (fmt.size() == 1 && std::isdigit(static_cast<unsigned char>(fmt[0]))) return fmt_num(x, fmt[0] - '0');
    throw Error("unknown format '" + fmt + "'; valid: a digit (significant digits), pct, int, KiB, MiB");
}

std::string render(const std::string& text, const Context& ctx, std::vector<std::string>* errors) {
    std::string out;
    std::size_t pos = 0;
    while (true) {
        const auto open = text.find("{{", pos);
        if (open == std::string::npos) break;
        const auto close = text.find("}}", open + 2);
        out += text.substr(pos, open - pos);
        if (close == std::string::npos) {
            const std::string msg = "unterminated '{{' near: " + text.substr(open, 40);
            if (!errors) throw Error(msg);
            errors->push_back(msg);
            pos = open + 2;
            out += "{{";
            continue;
        }
        const std::string body = text.substr(open + 2, close - open - 2);
        const auto bar = body.rfind('|');
        try {
            const Value v = evaluate(trim(bar == std::string::npos ? body : body.substr(0, bar)), ctx);
            out += format_value(v, bar == std::string::npos ? "" : body.substr(bar + 1));
        } catch (const std::exception& e) {
            const std::string msg = "{{" + body + "}}: " + e.what();
            if (!errors) throw Error(msg);
            errors->push_back(msg);
            out += "??";
        }
        pos = close + 2;
    }
    return out + text.substr(pos);
}

Level load_level(const fs::path& levels_dir, const fs::path& repo_root, const std::string& name) {
    LevelDir found = find_level(levels_dir, name);
    const auto& doc = found.manifest;
    const std::string& id = found.id;
    Level L;
    L.dir = found.dir;
    L.manifest = doc;
    L.id = id;
    L.title = doc.value("title", id);
    L.op = doc.value("op", "");
    if (!doc.contains("lesson")) throw UsageError("level '" + id + "' has no lesson (no \"lesson\" in level.json)");
    L.lesson_text = read_text(L.dir / doc["lesson"].get<std::string>());
    if (!doc.contains("results")) throw UsageError("level '" + id + "' names no results file (\"results\")");
    L.results_file = repo_root / doc["results"].get<std::string>();
    L.results = read_json_file(L.results_file);
    append_extra_runs(L);
    return L;
}

void append_extra_runs(Level& L) {
    for (const auto& name : L.manifest.value("extra_results", nlohmann::json::array())) {
        const fs::path f = L.results_file.parent_path() / name.get<std::string>();
        if (!fs::exists(f)) continue;
        for (const auto& r : read_json_file(f).value("runs", nlohmann::json::array())) L.results["runs"].push_back(r);
    }
}

Context recorded_context(const Level& L) {
    Context c;
    c.runs = L.results.value("runs", nlohmann::json::array());
    if (L.results.contains("ceilings")) c.ceilings = ceilings_from_json(L.results["ceilings"]);
    c.machine = L.results.value("machine", nlohmann::json::object());
    c.machine_name = L.results_file.parent_path().filename().string();
    c.results_path = L.manifest.value("results", "");
    c.results_dir = fs::relative(L.results_file.parent_path(), L.dir).generic_string();
    const fs::path root = L.dir.parent_path().parent_path();
    c.claims_file = (root / "results" / "claims" / "reproduce.json").string();
    c.results_root = (root / "results").string();
    c.gpu_shapes_file = (root / "scripts" / "gpu-kit" / "shapes").string();
    c.results_command = L.results.value("command", "");
    c.steps = L.manifest.value("steps", nlohmann::json::array());
    c.op = c.level_op = L.op;
    if (c.op.empty() && !c.steps.empty()) c.op = step_op(c.steps[0], "");
    return for_op(c, c.op);
}

Context for_op(const Context& ctx, const std::string& op) {
    Context c = ctx;
    c.op = op;
    if (!op.empty() && !find_op(op)) throw Error("unknown op '" + op + "'");
    bool found = false;
    for (auto& r : c.runs)
        if (r.value("backend", "") == c.backend && r.value("op", op) == op && r.contains("shape")) {
            Shape s;
            for (auto& [k, v] : r["shape"].items()) s.axes[k] = v.get<std::int64_t>();
            c.shape = s;
            found = true;
            break;
        }
    if (!found && op != ctx.op) c.shape.reset();
    return c;
}

std::string step_op(const nlohmann::json& step, const std::string& level_op) { return step.value("op", level_op); }

std::string step_key(const nlohmann::json& step) {
    const std::string v = step.value("variant", "");
    return step.contains("op") ? step["op"].get<std::string>() + "/" + v : v;
}

Sections split_sections(const std::string& text) {
    static const std::regex marker(
        R"(<!--\s*(step:\s*(?:([A-Za-z0-9_]+)/)?([A-Za-z0-9_]+)|measure|end)\s*-->[ \t]*\n?)");
    Sections out;
    std::string* cur = &out.intro;
    std::size_t pos = 0;
    for (std::sregex_iterator it(text.begin(), text.end(), marker), e; it != e; ++it) {
        const auto& m = *it;
        *cur += text.substr(pos, m.position(0) - pos);
        pos = m.position(0) + m.length(0);
        const std::string what = m[1].str();
        if (what == "measure") {
            if (out.steps.empty()) throw Error("'<!-- measure -->' before any '<!-- step: ... -->'");
            cur = &out.steps.back().after;
        } else if (what == "end") {
            cur = &out.outro;
        } else {
            out.steps.push_back({m[2].str(), m[3].str(), "", ""});
            cur = &out.steps.back().before;
        }
    }
    *cur += text.substr(pos);
    return out;
}

std::string render_document(const Level& L, const Context& ctx, std::vector<std::string>* errors) {
    const Sections s = split_sections(L.lesson_text);
    // Each step's text speaks of its own op and variant (self).
    std::string rendered = render(s.intro, ctx, errors);
    for (auto& st : s.steps) {
        Context sc = ctx;
        try {
            if (!st.op.empty()) sc = for_op(ctx, st.op);
        } catch (const Error& e) {
            if (!errors) throw;
            errors->push_back("step " + st.op + "/" + st.variant + ": " + e.what());
        }
        sc.self = st.variant;
        rendered += render(st.before + st.after, sc, errors);
    }
    rendered += render(s.outro, ctx, errors);
    std::string machine = ctx.machine_name;
    if (ctx.machine.contains("cpu_model")) machine += " (" + ctx.machine["cpu_model"].get<std::string>() + ")";
    std::string header = "<!-- Generated by `memwall lesson " + L.id + " --render` from " +
                         (L.dir.filename() / L.manifest.value("lesson", "lesson.md")).string() + " and " +
                         ctx.results_path + ". Edit lesson.md, not this file. -->\n";
    std::string note = "\n> Numbers in this copy come from `" + ctx.results_path + "`, recorded on " + machine;
    if (ctx.machine.contains("git_commit")) note += " at commit " + ctx.machine["git_commit"].get<std::string>();
    note += ".\n";
    // Rows disturbed while timed (harness/disturbance.hpp): slower than that
    // machine can do, and the reader is told which.
    std::vector<std::string> disturbed;
    for (const auto& r : ctx.runs)
        if (r.value("timing_meaningful", true) && r.contains("disturbance") && r["disturbance"].value("disturbed", false))
            disturbed.push_back(r.value("op", std::string("?")) + " / " + r.value("variant", std::string("?")) + " at " +
                                r.value("shape_str", std::string("?")) + " (" +
                                r["disturbance"].value("why", std::string("?")) + ")");
    if (!disturbed.empty())
        note += "> **" + std::to_string(disturbed.size()) + " of its runs were disturbed while timed** (other processes "
                "or the hypervisor took more than 5% of their cores): their times are slower than that machine can "
                "do, and a speedup against them is not its own: " + join(disturbed, "; ") + ".\n";
    note += "\n";
    // The note goes after the title line.
    const auto nl = rendered.find('\n');
    if (rendered.rfind("# ", 0) == 0 && nl != std::string::npos)
        return header + rendered.substr(0, nl + 1) + note + rendered.substr(nl + 1);
    return header + note + rendered;
}

}  // namespace mw::lesson
