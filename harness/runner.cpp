#include "harness/runner.hpp"
#include "harness/unbuilt.hpp"

#include <unistd.h>

#include <omp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <limits>
#include <thread>

#include "harness/command.hpp"
#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/inputs.hpp"
#include "harness/memtrack.hpp"
#include "harness/results.hpp"
#include "harness/strings.hpp"

namespace mw {

namespace {

std::vector<std::string> op_names() {
    std::vector<std::string> v;
    for (auto& o : ops()) v.push_back(o.name);
    std::sort(v.begin(), v.end());
    return v;
}

}  // namespace

Shape parse_shape(const std::string& text, const Shape& base, const std::vector<std::string>& axes,
                  const std::vector<std::string>& flag_axes) {
    Shape s = base;
    std::istringstream in(text);
    std::string part;
    bool any = false;
    while (std::getline(in, part, ',')) {
        auto eq = part.find('=');
        if (eq == std::string::npos || eq == 0)
            throw UsageError("malformed shape '" + text + "': expected axis=value[,axis=value...] with axes " + join(axes));
        std::string axis = part.substr(0, eq), value = part.substr(eq + 1);
        if (std::find(axes.begin(), axes.end(), axis) == axes.end())
            throw UsageError("unknown shape axis '" + axis + "' in '" + text + "'; valid axes: " + join(axes));
        std::size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(value, &used);
        } catch (...) {
            used = 0;
        }
        if (used == 0 || used != value.size())
            throw UsageError("malformed shape value '" + value + "' for axis '" + axis + "': expected a positive integer");
        const bool is_flag = std::find(flag_axes.begin(), flag_axes.end(), axis) != flag_axes.end();
        if (v < 0 || (v == 0 && !is_flag))
            throw UsageError("shape axis '" + axis + "' must be " + (is_flag ? "0 or more" : "positive") + ", got " + value);
        if (v > std::numeric_limits<std::int32_t>::max())
            throw UsageError("shape axis '" + axis + "' = " + value + " is too large (at most 2^31 - 1 = 2147483647)");
        s.axes[axis] = v;
        any = true;
    }
    if (!any) throw UsageError("empty shape: expected axis=value[,axis=value...] with axes " + join(axes));
    return s;
}

namespace {

// The ops the request names (levers, ops or "all"), each once, in the order of ops().
std::vector<const Op*> requested_ops(const RunRequest& req) {
    std::vector<const Op*> targets;
    for (auto& t : req.targets) {
        bool found = false;
        for (auto& o : ops())
            if (t == "all" || o.lever == t || o.name == t) {
                if (std::find(targets.begin(), targets.end(), &o) == targets.end()) targets.push_back(&o);
                found = true;
            }
        if (!found)
            throw UsageError("unknown lever or op '" + t + "'; levers: " + join(lever_names()) + "; ops: " +
                             join(op_names()) + "; or all");
    }
    return targets;
}

// The op a --shape OP:axis=v,... names; none for a shape without one.
std::optional<std::string> shape_op(const std::string& text) {
    const auto colon = text.find(':');
    if (colon == std::string::npos || colon > text.find('=')) return std::nullopt;
    return text.substr(0, colon);
}

// --shape OP:axis=v,... applies to that op only; one naming an op that is
// not run is an error rather than silently unused.
void check_shape_ops(const RunRequest& req, const std::vector<const Op*>& targets) {
    for (auto& text : req.shapes) {
        const auto name = shape_op(text);
        if (!name) continue;
        if (std::none_of(targets.begin(), targets.end(), [&](const Op* o) { return o->name == *name; }))
            throw UsageError("--shape '" + text + "' names op '" + *name + "', which is not run here; ops run: " + [&] {
                std::vector<std::string> n;
                for (const Op* o : targets) n.push_back(o->name);
                return join(n);
            }());
    }
}

std::vector<std::string> dtype_names(const std::vector<DType>& dtypes) {
    std::vector<std::string> names;
    for (auto d : dtypes) names.push_back(to_string(d));
    return names;
}

// The variants of `vs` to run at `dtype`: those requested (all when none
// is), and the naive rung, which always runs (speedups are measured against
// it in this run) unless the request skips it. A requested variant without
// the dtype is an error; the naive rung without it is left out.
std::vector<const Variant*> chosen_variants(const Op& op, const std::vector<const Variant*>& vs, DType dtype,
                                            const RunRequest& req, const std::set<std::string>& requested,
                                            std::set<std::string>& matched) {
    std::vector<const Variant*> chosen;
    for (auto* v : vs) {
        const bool picked = requested.empty() || requested.count(v->name);
        if (picked) matched.insert(v->name);
        if (!picked && (v->role != Role::reference || req.skip_naive)) continue;
        if (std::find(v->dtypes.begin(), v->dtypes.end(), dtype) == v->dtypes.end()) {
            if (requested.count(v->name))
                throw UsageError("variant '" + v->name + "' of " + op.name + " does not support dtype '" +
                                 to_string(dtype) + "'; it supports: " + join(dtype_names(v->dtypes)));
            continue;
        }
        chosen.push_back(v);
    }
    return chosen;
}

// This op's shapes: those prefixed with its name, else the unprefixed ones,
// else its default (or quick) shape.
std::vector<Shape> shapes_of(const Op& op, const RunRequest& req) {
    std::vector<std::string> own, plain;
    for (auto& text : req.shapes) {
        const auto name = shape_op(text);
        if (!name) plain.push_back(text);
        else if (*name == op.name) own.push_back(text.substr(name->size() + 1));
    }
    const std::vector<std::string>& texts = own.empty() ? plain : own;
    const Shape& base = req.quick ? op.quick_shape : op.default_shape;
    if (texts.empty()) return {base};
    std::vector<Shape> shapes;
    for (auto& text : texts) {
        Shape s = parse_shape(text, base, op.axes, op.flag_axes);
        if (op.validate) {
            auto err = op.validate(s);
            if (!err.empty()) throw UsageError(err);
        }
        shapes.push_back(s);
    }
    return shapes;
}

}  // namespace

std::vector<RunPlan> plan_runs(const RunRequest& req) {
    if (req.targets.empty())
        throw UsageError("name a lever or op to run; levers: " + join(lever_names()) + "; ops: " + join(op_names()));
    if (req.backend == Backend::cuda && gpu_count() == 0)
        throw UsageError("--backend cuda needs a GPU, and there is none here (" + gpu_absent_reason() +
                         "); valid backends here: cpu, cuda-emu");
    const std::vector<const Op*> targets = requested_ops(req);
    check_shape_ops(req, targets);

    std::vector<RunPlan> plans;
    std::set<std::string> requested(req.variants.begin(), req.variants.end()), matched;
    std::set<std::string> valid_variant_names;
    for (const Op* op : targets) {
        auto vs = variants_of(op->name, req.backend);
        for (auto* v : vs) valid_variant_names.insert(v->name);
        if (vs.empty()) continue;
        DType dtype = req.dtype.value_or(op->dtypes.front());
        if (std::find(op->dtypes.begin(), op->dtypes.end(), dtype) == op->dtypes.end())
            throw UsageError("op '" + op->name + "' does not support dtype '" + to_string(dtype) +
                             "'; valid dtypes: " + join(dtype_names(op->dtypes)));
        const auto chosen = chosen_variants(*op, vs, dtype, req, requested, matched);
        for (auto& s : shapes_of(*op, req)) {
            for (const Variant* v : chosen)
                if (const std::string why = v->accepts ? v->accepts(s) : ""; !why.empty())
                    throw UsageError(op->name + " '" + v->name + "' (" + to_string(v->backend) + ") cannot take " +
                                     s.str() + ": " + why + "; give a shape within that, or other --variant");
            plans.push_back({op, s, dtype, chosen});
        }
    }
    for (auto& r : requested)
        if (!matched.count(r)) {
            for (const Op* op : targets)
                if (const std::string why = why_unbuilt(op->name, r); !why.empty())
                    throw UsageError(op->name + " '" + r + "' is not in this build: " + why);
            throw UsageError("unknown variant '" + r + "' for backend " + to_string(req.backend) +
                             "; valid variants: " + join({valid_variant_names.begin(), valid_variant_names.end()}));
        }
    if (plans.empty()) {
        std::set<std::string> have;
        for (const Op* op : targets)
            for (auto* v : variants_of(op->name)) have.insert(to_string(v->backend));
        throw UsageError("no " + to_string(req.backend) + " variants for " + join(req.targets) +
                         "; backends with variants: " + join({have.begin(), have.end()}));
    }
    return plans;
}

double roof_gflops(const Ceilings& c, double intensity, const std::string& dtype, bool read_only) {
    const double peak = peak_gflops(c, dtype), bw = read_only ? dram_read_gbps(c) : dram_gbps(c);
    if (peak <= 0 || bw <= 0) return 0;
    return std::min(peak, intensity * bw);
}

namespace {

void poison_outputs(Problem& p) {
    for (auto& b : p.outputs) poison(b);
}

// One call with poisoned outputs, the outputs then brought to the host.
void run_once(Instance& inst, Problem& p) {
    poison_outputs(p);
    inst.run();
    inst.sync();
    inst.fetch();
}

CheckedRun to_checked(const CheckResult& c) {
    CheckedRun r;
    r.correct = c.ok;
    r.max_abs = c.max_abs;
    r.max_rel = c.max_rel;
    r.rel_fro = c.rel_fro;
    r.message = c.message;
    r.near_ties = c.near_ties;
    r.note = c.note;
    r.stat_tests = c.stat_tests;
    return r;
}

CheckedRun check_instance(const Op& op, Instance& inst, Problem& p, const std::vector<std::vector<double>>& oracle,
                          double scale = 1.0) {
    run_once(inst, p);
    return to_checked(check_problem(op, p, oracle, scale));
}

std::vector<std::size_t> input_hashes(const Problem& p) {
    std::vector<std::size_t> h;
    for (auto& b : p.inputs)
        h.push_back(std::hash<std::string_view>{}(
            std::string_view(reinterpret_cast<const char*>(b.data.get()), b.size_bytes())));
    return h;
}

}  // namespace

CheckedRun check_variant(const Op& op, const Variant& v, Problem& p, const std::vector<std::vector<double>>& oracle) {
    Instance inst = v.prepare(p);
    if (v.contract_oracle) return check_instance(op, inst, p, v.contract_oracle(p), v.tolerance_scale);
    return check_instance(op, inst, p, oracle, v.tolerance_scale);
}

double peak_for_mfu(const Ceilings& c, Backend backend, DType dtype) {
    return peak_for_mfu(c, backend, to_string(dtype));
}

double peak_for_mfu(const Ceilings& c, Backend backend, const std::string& want) {
    if (backend == Backend::cuda_emu) return 0;  // an emulated GPU has no peak
    if (backend == Backend::cpu) return peak_gflops(c, want);
    double best = 0;
    for (const auto& p : c.gpu_peaks) {
        const bool same = p.dtype == want || (want == "f32" && p.dtype == "fp32") ||
                          (want == "f16" && p.dtype == "fp16") || (want == "f64" && p.dtype == "fp64") ||
                          (want == "i8" && p.dtype == "int8");
        if (same) best = std::max(best, p.gflops);
    }
    return best;
}

std::size_t problem_bytes(const Problem& p) {
    std::size_t n = 0;
    for (const auto* list : {&p.inputs, &p.outputs})
        for (const Buffer& b : *list) n += b.size_bytes();
    return n;
}

namespace {

using nlohmann::json;

// The fields every row has, whether it ran or not.
json base_row(const Op& op, const Variant& v, const RunPlan& plan, const RunRequest& req, int threads) {
    const double flops = op.flops(plan.shape);
    const double bytes = v.bytes ? v.bytes(plan.shape, plan.dtype) : op.compulsory_bytes(plan.shape, plan.dtype);
    json r = {{"lever", op.lever}, {"op", op.name}, {"variant", v.name}, {"role", to_string(v.role)},
              {"backend", to_string(v.backend)}, {"rung", v.rung}, {"dtype", to_string(plan.dtype)},
              {"shape", plan.shape.axes}, {"shape_str", plan.shape.str()}, {"threads", threads},
              {"flops", flops}, {"bytes", bytes}, {"intensity", bytes > 0 ? flops / bytes : 0.0},
              {"compulsory_bytes", op.compulsory_bytes(plan.shape, plan.dtype)},
              {"rationale", v.rationale}, {"source", v.source}, {"requires", v.needs},
              {"seed", req.seed}, {"timing_meaningful", v.backend != Backend::cuda_emu},
              {"memory_roof", op.read_dominated ? "dram_read" : "dram_triad"},
              {"compute_dtype", v.compute.empty() ? to_string(plan.dtype) : v.compute}};
    r["executed_flops"] = v.executed_flops ? v.executed_flops(plan.shape) : flops;
    if (!op.unit.name.empty() && op.unit.per_call) {
        r["unit"] = op.unit.name;
        r["units_per_call"] = op.unit.per_call(plan.shape);
    }
    return r;
}

void mark_not_timed(json& r) {
    r["time_s"] = {{"median", 0}, {"min", 0}, {"max", 0}, {"best", 0}, {"samples", 0}};
    r["gflops"] = 0;
    r["gbps"] = 0;
    r["error"] = {{"max_abs", nullptr}, {"max_rel", nullptr}, {"rel_fro", nullptr}};
}

// Counter names become JSON keys, CSV columns and lesson placeholders
// (run:V.counters.NAME): letters, digits and '_' only.
void check_counter_name(const std::string& name) {
    const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '_';
    });
    if (!ok) throw std::runtime_error("counter name '" + name + "' is not letters, digits and '_'");
}

json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(); }

json counters_json(const Instance& inst) {
    json out = json::object();
    if (!inst.counters) return out;
    for (auto& [name, value] : inst.counters()) {
        check_counter_name(name);
        out[name] = finite_or_null(value);
    }
    return out;
}

json series_json(const Instance& inst) {
    json out = json::object();
    if (!inst.series) return out;
    for (auto& [name, values] : inst.series()) {
        check_counter_name(name);
        json& list = out[name] = json::array();
        for (double v : values) list.push_back(finite_or_null(v));
    }
    return out;
}

json stat_tests_json(const std::vector<StatTest>& tests) {
    json out = json::object();
    for (auto& t : tests)
        out[t.output] = {{"test", t.test}, {"statistic", t.statistic}, {"dof", t.dof}, {"p_value", t.p_value},
                         {"alpha", t.alpha}, {"samples", t.samples}, {"categories", t.categories}, {"bins", t.bins}};
    return out;
}

// Of the two checked calls' tests, those with the lowest p-value: the row
// shows the call that came closer to failing.
const std::vector<StatTest>& less_likely(const std::vector<StatTest>& a, const std::vector<StatTest>& b) {
    auto min_p = [](const std::vector<StatTest>& t) {
        double p = 2;
        for (auto& x : t) p = std::min(p, x.p_value);
        return p;
    };
    return min_p(b) < min_p(a) ? b : a;
}

bool has_mode(const Op& op, const Problem& p, CheckMode m) {
    return std::any_of(p.outputs.begin(), p.outputs.end(), [&](const Buffer& b) { return op.check.mode_for(b.name) == m; });
}

// Rates from the best-of-N time: useful and executed FLOP/s, MFU and HFU
// against the calibrated peak of the dtype, units/s.
void add_rates(json& r, double best, double peak) {
    const bool timed = best > 0;
    const double flops = r["flops"].get<double>(), executed = r["executed_flops"].get<double>();
    r["gflops"] = timed ? flops / best / 1e9 : 0.0;
    r["gbps"] = timed ? r["bytes"].get<double>() / best / 1e9 : 0.0;
    r["executed_gflops"] = timed ? executed / best / 1e9 : 0.0;
    const bool meaningful = timed && r["timing_meaningful"].get<bool>() && peak > 0;
    r["mfu_peak_gflops"] = peak > 0 ? json(peak) : json();
    r["mfu"] = meaningful ? json(r["gflops"].get<double>() / peak) : json();
    r["hfu"] = meaningful ? json(r["executed_gflops"].get<double>() / peak) : json();
    if (r.contains("units_per_call")) r["units_per_s"] = timed ? r["units_per_call"].get<double>() / best : 0.0;
}

// Google Benchmark's own report of a timing, kept beside the row: its context
// and its aggregates (mean, median, stddev, cv). Its per-repetition rows are
// the samples the row's time_s summarises; they are not kept (one row per
// sample made a results file megabytes long).
void merge_gbench(json& gbench, const std::string& text) {
    if (text.empty()) return;
    try {
        auto j = json::parse(text);
        if (gbench["context"].is_null()) gbench["context"] = j["context"];
        for (auto& b : j["benchmarks"])
            if (b.value("run_type", "") != "iteration") gbench["benchmarks"].push_back(b);
    } catch (...) {
    }
}

// What one variant shares with the others of its (op, shape, dtype).
struct Group {
    const Op& op;
    const RunPlan& plan;
    Problem& problem;
    const std::vector<std::vector<double>>& oracle;
    const std::vector<std::size_t>& input_hashes;
    const RunRequest& req;
    double naive_rel_fro = -1;
    // The read probe that makes a pass before each timed call of the variant
    // being timed (--cold, a read-dominated op; see probe_beside).
    ReadProber* probe = nullptr;
    // Outputs of the variants another one must match bit for bit (identical_to).
    std::map<std::string, std::vector<Buffer>> kept_outputs = {};
};

std::vector<Buffer> copy_outputs(const Problem& p) {
    std::vector<Buffer> out;
    for (const Buffer& b : p.outputs) {
        Buffer c = Buffer::make(b.name, b.dtype, b.count, b.dims);
        std::memcpy(c.data.get(), b.data.get(), b.size_bytes());
        out.push_back(std::move(c));
    }
    return out;
}

// The outputs of `name` (a variant of the group's op and backend) on the
// group's inputs: kept from its own run, or from a run on a fresh copy of
// the problem (the same seed makes the same inputs) when it was not run.
const std::vector<Buffer>& outputs_of(Group& g, const Variant& v) {
    const std::string& name = v.identical_to;
    if (auto it = g.kept_outputs.find(name); it != g.kept_outputs.end()) return it->second;
    const Variant* other = nullptr;
    for (const Variant* c : variants_of(g.op.name, v.backend))
        if (c->name == name) other = c;
    if (!other)
        throw std::runtime_error("variant " + v.name + " must be identical to '" + name + "', which is not a " +
                                 to_string(v.backend) + " variant of " + g.op.name);
    Problem fresh = g.op.make_problem(g.plan.shape, g.plan.dtype, g.req.seed);
    Instance inst = other->prepare(fresh);
    run_once(inst, fresh);
    return g.kept_outputs[name] = copy_outputs(fresh);
}

// Empty when every output equals `want` bit for bit; else names the first
// element that differs and how many do.
std::string compare_bits(const Problem& p, const std::vector<Buffer>& want, const std::string& other) {
    for (std::size_t k = 0; k < p.outputs.size(); ++k) {
        const Buffer& a = p.outputs[k];
        const Buffer& b = want[k];
        const std::size_t esize = a.count ? a.size_bytes() / a.count : 0;
        std::size_t first = a.count, n = 0;
        for (std::size_t i = 0; i < a.count && esize; ++i)
            if (std::memcmp(a.data.get() + i * esize, b.data.get() + i * esize, esize) != 0) {
                if (first == a.count) first = i;
                ++n;
            }
        if (n)
            return "output " + a.name + " is not bit-identical to variant '" + other + "''s: " + std::to_string(n) +
                   " of " + std::to_string(a.count) + " elements differ, the first at [" + std::to_string(first) +
                   "]: " + fmt("%.9g", load_as_double(a, first)) + " vs " + fmt("%.9g", load_as_double(b, first));
    }
    return {};
}

// The first call, inside the memory window: the tracked heap's growth over
// prepare and this call (the oracles are computed before, the check after),
// plus the memory the variant declares the tracker cannot see. peak_bytes
// adds the problem's inputs and outputs, which every variant of the group
// shares. Beside it, the kernel's count over the same window: the process's
// peak resident set growth (rss_growth_bytes; memtrack::rss_growth says what
// it sees and misses).
Instance prepare_and_run_once(const Variant& v, Problem& p, json& r) {
    const long long rss_before = memtrack::rss_window_start();
    const std::size_t heap_before = memtrack::reset_peak();
    Instance inst = v.prepare(p);
    run_once(inst, p);
    const std::size_t extra = memtrack::peak_bytes() - heap_before + inst.workspace_bytes;
    const long long rss = memtrack::rss_growth(rss_before);
    r["problem_bytes"] = problem_bytes(p);
    r["peak_extra_bytes"] = extra;
    r["peak_bytes"] = problem_bytes(p) + extra;
    if (rss >= 0) r["rss_growth_bytes"] = rss;
    return inst;
}

TimingStats time_variant(const Variant& v, const Group& g, const RunRequest& req, Instance& inst, json& gbench) {
    TimingOptions topt = req.timing;
    topt.cold = req.cold;
    if (g.probe && v.backend == Backend::cpu) topt.before_call = [p = g.probe] { p->pass(); };
    if (v.backend == Backend::cuda_emu) {  // emulated: one timed call is all it's worth
        topt.min_samples = topt.max_samples = 1;
        topt.budget_s = 0;
        topt.judge_load = false;
        topt.until_stable_s = 0;
    }
    std::string gb;
    const TimingStats t = time_instance(
        g.op.name + "/" + v.name + "/" + to_string(v.backend) + "/" + g.plan.shape.str(), inst, topt, &gb);
    merge_gbench(gbench, gb);
    return t;
}

// The verdict from both checked calls, the inputs, and the naive variant's
// error; fills correct, check_message, error, near_ties and distribution.
void record_verdict(const Variant& v, Group& g, const CheckedRun& before, const CheckedRun& after, json& r) {
    const Op& op = g.op;
    const bool inputs_intact = input_hashes(g.problem) == g.input_hashes;
    const CheckedRun& worst = before.correct ? after : before;
    CheckResult cr;
    cr.ok = before.correct && after.correct && inputs_intact;
    cr.rel_fro = std::max(before.rel_fro, after.rel_fro);
    std::string message = worst.message;
    if (!inputs_intact) message += (message.empty() ? "" : "; ") + std::string("the variant modified its inputs");
    if (cr.ok && v.role != Role::reference && g.naive_rel_fro >= 0 && !v.contract_oracle) {
        apply_baseline_rule(cr, g.naive_rel_fro, op.check.baseline_factor, g.plan.dtype,
                            op.check.reduction_length ? op.check.reduction_length(g.plan.shape) : 1.0);
        if (!cr.ok) message = cr.message;
    }
    if (v.role == Role::reference) g.naive_rel_fro = cr.rel_fro;
    // Near-ties are accepted but never silent: they stay in the message.
    const std::string& note = before.note.empty() ? after.note : before.note;
    if (!note.empty()) message += (message.empty() ? "" : "\n") + note;
    r["correct"] = cr.ok;
    if (!message.empty()) r["check_message"] = message;
    r["error"] = {{"max_abs", std::max(before.max_abs, after.max_abs)},
                  {"max_rel", std::max(before.max_rel, after.max_rel)},
                  {"rel_fro", cr.rel_fro}};
    if (has_mode(op, g.problem, CheckMode::token_sequence))
        r["near_ties"] = std::max(before.near_ties, after.near_ties);
    if (has_mode(op, g.problem, CheckMode::distribution))
        r["distribution"] = stat_tests_json(less_likely(before.stat_tests, after.stat_tests));
}

void report_progress(std::ostream& progress, const json& r, const TimingStats& t) {
    char line[200];
    std::snprintf(line, sizeof line, " %s  best %.4g ms, median %.4g ms (%d samples), %.3g GFLOP/s",
                  r["correct"].get<bool>() ? "correct" : "INCORRECT", t.min * 1e3, t.median * 1e3, t.samples,
                  r["gflops"].get<double>());
    progress << line;
    if (r.contains("units_per_s"))
        progress << ", " << r["units_per_s"].get<double>() << " " << r["unit"].get<std::string>() << "/s";
    progress << "\n";
    if (t.until_stable && !t.stable)
        progress << "      not stable within --until-stable: "
                 << (t.batches == 1 ? std::string("no time for a second batch of samples")
                                    : std::to_string(t.batches) + " batches, the last still lowered the best by over " +
                                          fmt("%g", kStableShare * 100) + "%")
                 << "\n";
    if (t.quiet_wait.asked() && !t.quiet_wait.quiet)
        progress << "      no quiet machine within --wait-quiet " << fmt("%g", t.quiet_wait.asked_s)
                 << " s (" << t.quiet_wait.last.why() << "): timed anyway\n";
    else if (t.quiet_wait.probes > 1)
        progress << "      waited " << fmt("%.1f", t.quiet_wait.waited_s) << " s for a quiet machine\n";
    if (t.disturbance.disturbed())
        progress << "      DISTURBED while timed: " << t.disturbance.why()
                 << ". The time is slower than this machine can do; time it again on a quiet machine.\n";
    if (r.contains("check_message")) progress << "      " << r["check_message"].get<std::string>() << "\n";
}

// Whether a later variant of the plan must match this one's outputs.
bool needed_as_identical(const Group& g, const Variant& v) {
    for (const Variant* o : g.plan.variants)
        if (o->identical_to == v.name) return true;
    return false;
}

void set_time(json& r, const TimingStats& t);

// Prepares, checks, times and checks again one variant; fills `r` and
// returns the timing (its samples, for merging rounds) and, in `peak`, the
// calibrated peak of the arithmetic it ran (the row's compute_dtype, which
// the path prepare() chose may name: Instance::compute).
TimingStats run_variant(const Variant& v, Group& g, const RunRequest& req, const Ceilings& ceilings, double& peak,
                        json& r, json& gbench, std::ostream& progress) {
    const Op& op = g.op;
    Problem& p = g.problem;
    // Lossy variants are judged against the function they claim to compute.
    // Computed before the memory window opens.
    std::vector<std::vector<double>> contract;
    if (v.contract_oracle) contract = v.contract_oracle(p);
    const auto& expected = v.contract_oracle ? contract : g.oracle;

    // The outputs to match bit for bit, before the memory window opens.
    const std::vector<Buffer>* same_bits = v.identical_to.empty() ? nullptr : &outputs_of(g, v);

    Instance inst = prepare_and_run_once(v, p, r);
    if (!inst.compute.empty()) r["compute_dtype"] = inst.compute;
    peak = peak_for_mfu(ceilings, v.backend, r["compute_dtype"].get<std::string>());
    if (v.memory_model) {
        json terms = json::object();
        double total = 0;
        for (const auto& [term, bytes] : v.memory_model(p.shape)) terms[term] = bytes, total += bytes;
        r["memory_model"] = {{"terms", terms}, {"total", total}};
        r["peak_vs_model"] = total > 0 ? json(r["peak_extra_bytes"].get<double>() / total) : json();
    }
    CheckedRun before = to_checked(check_problem(op, p, expected, v.tolerance_scale));
    std::string bits = same_bits ? compare_bits(p, *same_bits, v.identical_to) : "";
    if (g.kept_outputs.count(v.name) == 0 && needed_as_identical(g, v)) g.kept_outputs[v.name] = copy_outputs(p);
    progress << " checked (" << (before.correct ? "ok" : "WRONG") << "), timing..." << std::flush;
    const TimingStats t = time_variant(v, g, req, inst, gbench);
    // Check again after timing: a variant cannot be right once and wrong afterwards.
    CheckedRun after = check_instance(op, inst, p, expected, v.tolerance_scale);
    if (same_bits && bits.empty()) bits = compare_bits(p, *same_bits, v.identical_to);
    if (same_bits) {
        r["identical_to"] = v.identical_to;
        r["bit_identical"] = bits.empty();
        if (!bits.empty()) after.correct = false, after.message += (after.message.empty() ? "" : "; ") + bits;
    }
    const json counters = counters_json(inst);  // after every call the variant makes here
    const json series = series_json(inst);
    if (v.contract_oracle) {
        CheckResult exact = check_problem(op, p, g.oracle);
        r["error_vs_exact"] = {{"max_abs", exact.max_abs}, {"max_rel", exact.max_rel}, {"rel_fro", exact.rel_fro}};
    }
    record_verdict(v, g, before, after, r);
    if (!counters.empty()) r["counters"] = counters;
    if (!series.empty()) r["series"] = series;
    if (!inst.path.empty()) r["path"] = inst.path;
    set_time(r, t);
    add_rates(r, t.min, peak);
    if (inst.workspace_bytes) r["workspace_bytes"] = inst.workspace_bytes;
    report_progress(progress, r, t);
    return t;
}

void set_time(json& r, const TimingStats& t) {
    r["time_s"] = {{"median", t.median}, {"min", t.min}, {"max", t.max}, {"best", t.min},
                   {"mean", t.mean}, {"samples", t.samples}, {"iterations_per_sample", t.iterations},
                   {"cold", t.cold}};
    if (t.disturbance.measured) r["disturbance"] = t.disturbance.to_json();
    if (t.quiet_wait.asked()) r["quiet_wait"] = t.quiet_wait.to_json();
    if (t.round_best.size() >= 2) r["time_s"]["round_best"] = t.round_best;
    if (t.until_stable) {
        r["time_s"]["batches"] = t.batches;
        r["time_s"]["stable"] = t.stable;
    }
}

// Folds a later round's row into the first: the verdict holds only if every
// round was correct (a wrong round's message and error are kept), the
// timing is over all rounds' samples.
void merge_round(json& r, const json& later, const TimingStats& merged, double peak) {
    if (r.value("correct", false) && !later.value("correct", false)) {
        r["correct"] = false;
        for (const char* k : {"check_message", "error", "bit_identical"})
            if (later.contains(k)) r[k] = later[k];
    }
    set_time(r, merged);
    add_rates(r, merged.min, peak);
}

// The read roof with `threads` threads in `c` (0 where none), and setting it.
double read_roof(const Ceilings& c, int threads) {
    const auto& v = c.dram_read_by_threads_gbps;
    return v.size() >= std::size_t(threads) ? v[std::size_t(threads) - 1] : 0.0;
}
void set_read_roof(Ceilings& c, int threads, double gbps) {
    auto& v = c.dram_read_by_threads_gbps;
    if (v.size() < std::size_t(threads)) v.resize(std::size_t(threads), 0.0);
    v[std::size_t(threads) - 1] = gbps;
}

// Ratios within one group: speedups from best-of-N times, memory from peaks.
void add_group_ratios(json& runs, const std::vector<std::size_t>& rows, const RunRequest& req, const Ceilings& ceilings) {
    const json* naive = nullptr;
    const json* vendor = nullptr;
    const json* naive_memory = nullptr;
    for (auto i : rows) {
        auto& r = runs[i];
        if (!r.value("ran", false)) continue;
        if (r["role"] == "reference" && !naive_memory && r.contains("peak_bytes")) naive_memory = &r;
        if (r["time_s"]["samples"].get<int>() == 0) continue;
        if (r["role"] == "reference" && !naive) naive = &r;
        if (r["role"] == "vendor" && (!vendor || r["time_s"]["best"] < (*vendor)["time_s"]["best"])) vendor = &r;
    }
    const double naive_best = naive ? (*naive)["time_s"]["best"].get<double>() : 0;
    const double naive_median = naive ? (*naive)["time_s"]["median"].get<double>() : 0;
    const double vendor_best = vendor ? (*vendor)["time_s"]["best"].get<double>() : 0;
    const double naive_peak = naive_memory ? (*naive_memory)["peak_bytes"].get<double>() : 0;
    for (auto i : rows) {
        auto& r = runs[i];
        const double best = r["time_s"]["best"].get<double>();
        const bool meaningful = r["timing_meaningful"].get<bool>() && best > 0;
        r["speedup_vs_naive"] = meaningful && naive_best > 0 ? json(naive_best / best) : json();
        r["speedup_vs_naive_median"] =
            meaningful && naive_median > 0 ? json(naive_median / r["time_s"]["median"].get<double>()) : json();
        if (meaningful && naive_best > 0 && &r != naive)  // the naive rung's own: 1x every round
            if (auto range = paired_ratio_range((*naive)["time_s"].value("round_best", json()),
                                                r["time_s"].value("round_best", json())))
                r["speedup_vs_naive_range"] = {{"lo", range->first}, {"hi", range->second},
                                               {"rounds", r["time_s"]["round_best"].size()}};
        r["speedup_vs_vendor"] = meaningful && vendor_best > 0 ? json(vendor_best / best) : json();
        const bool read = r.value("memory_roof", "") == "dram_read";
        const std::string compute = r.value("compute_dtype", "fp32");
        const double roof = req.backend == Backend::cpu ? roof_gflops(ceilings, r["intensity"].get<double>(), compute, read) : 0;
        r["roof_gflops"] = roof > 0 ? json(roof) : json();
        if (read && req.backend == Backend::cpu) r["dram_read_roof_gbps"] = dram_read_gbps(ceilings);  // this shape's
        r["fraction_of_roof"] = meaningful && roof > 0 ? json(r["gflops"].get<double>() / roof) : json();
        if (r.contains("peak_bytes"))
            r["memory_vs_naive"] = naive_peak > 0 ? json(r["peak_bytes"].get<double>() / naive_peak) : json();
    }
}

}  // namespace

std::size_t count_variants(const std::vector<RunPlan>& plans) {
    std::size_t n = 0;
    for (auto& plan : plans) n += plan.variants.size();
    return n;
}

namespace {

double steady_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// "~3 m 20 s left" from the mean time per variant so far (a rough guide:
// naive rungs at large shapes take longer than the rest).
std::string eta_text(const RunProgress& p) {
    if (p.done == 0 || p.done >= p.total) return "";
    const double per = (steady_s() - p.start_s) / double(p.done);
    const int left = int(per * double(p.total - p.done) + 0.5);
    char b[64];
    if (left >= 60) std::snprintf(b, sizeof b, "  (~%d m %02d s left)", left / 60, left % 60);
    else std::snprintf(b, sizeof b, "  (~%d s left)", left);
    return b;
}

// Per variant of a plan: its row, timing and peak over the rounds (rows
// stay in the plan's order).
struct Slot {
    json row;
    TimingStats time;
    double peak = 0;
    bool timed = false;
};

// What run_plans carries from plan to plan: the results document and its
// benchmark records, the progress count, and the roofs. `roofs` is the
// ceilings with the best read figure of the whole run (the file's, one
// measured between rounds, or a read probe's beside a variant), for the
// results' ceilings block and the plots; `plan_roofs` are the roofs each
// shape's ratios use. With rounds or a probe, a shape's read roof is the
// best of the figures measured in its own rounds and beside its own
// variants, the minutes its variants were timed in: each variant and the
// roof then had the same chances at a quiet minute. (The run's best would
// give the roof R x shapes chances, and every fraction of it a bias that
// grows with the number of shapes.)
struct RunState {
    const RunRequest& req;
    const Ceilings& ceilings;
    std::ostream& progress;
    RunProgress& prog;
    int threads;
    json doc;
    json gbench = {{"context", nullptr}, {"benchmarks", json::array()}};
    Ceilings roofs = ceilings;
    std::vector<double> read_rounds;
    bool probed = false;  // a read probe ran beside some variant (probe_beside)
    std::vector<std::vector<std::size_t>> plan_rows;  // per plan, its rows that ran
    std::vector<Ceilings> plan_roofs;
};

// The document's head: schema, machine, the ceilings and the command line.
json results_head(const RunRequest& req, const Ceilings& ceilings, int threads) {
    json doc;
    doc["schema"] = kResultsSchema;
    doc["machine"] = machine_info();
    doc["machine"]["threads"] = threads;
    doc["ceilings"] = to_json(ceilings);
    doc["ceilings"]["peak_fp32_gflops"] = peak_gflops(ceilings, "fp32");
    doc["ceilings"]["dram_gbps"] = dram_gbps(ceilings);
    doc["ceilings"]["dram_read_gbps"] = dram_read_gbps(ceilings);
    if (!req.command_line.empty()) doc["command"] = req.command_line;
    doc["runs"] = json::array();
    doc["timeline"] = json::array();
    return doc;
}

// A read figure measured during a shape's rounds: the run's best and this
// shape's best (`group_read`) take it in. The shape's roof is then its own
// figures alone, at every thread count: the file's figure at another count
// (dram_read_gbps takes the best of them) must not stand in for it.
void take_read_figure(RunState& st, Ceilings& group_roofs, double& group_read, double g) {
    group_read = std::max(group_read, g);
    set_read_roof(st.roofs, st.threads, std::max(read_roof(st.roofs, st.threads), g));  // the run's best
    group_roofs.dram_read_by_threads_gbps.assign(std::size_t(st.threads), 0.0);
    set_read_roof(group_roofs, st.threads, group_read);  // this shape's alone
}

// A round of several starts by measuring the read roof.
void measure_round_roof(RunState& st, Ceilings& group_roofs, double& group_read) {
    const double g = measure_dram_read_gbps(st.threads);
    st.read_rounds.push_back(g);
    take_read_figure(st, group_roofs, group_read, g);
    char line[96];
    std::snprintf(line, sizeof line, ": DRAM read %.1f GB/s now", g);
    st.progress << line;
}

// Folds one round's row `r` (run to the end when `ok`) into the variant's slot.
void fold_round(Slot& slot, json& r, const TimingStats& t, bool ok, double peak, int round) {
    if (round == 0 || !slot.row.value("ran", false)) {
        slot.row = r;
        slot.time = t;
        slot.timed = ok;
        slot.peak = peak;
    } else if (!ok) {
        slot.row["correct"] = false;  // a round that failed fails the variant
        slot.row["check_message"] = r["check_message"];
        slot.row["wall_s"] = slot.row.value("wall_s", 0.0) + r["wall_s"].get<double>();
    } else {
        slot.time = slot.timed ? merge_timing(slot.time, t) : t;
        slot.timed = true;
        slot.row["wall_s"] = slot.row.value("wall_s", 0.0) + r["wall_s"].get<double>();
        merge_round(slot.row, r, slot.time, slot.peak);
    }
}

// One variant in one round: a row that says why it did not run, or the
// variant run, checked and timed, folded into its slot. Returns the round's
// timing (no samples where it did not run or failed).
TimingStats run_slot(RunState& st, Group& group, const Variant& v, int round, Slot& slot) {
    const Op& op = group.op;
    std::ostream& progress = st.progress;
    if (round == 0) progress << "   [" << st.prog.done + 1 << "/" << st.prog.total << "] ";
    else progress << "   [round " << round + 1 << "] ";
    progress << op.lever << " / " << op.name << " rung " << v.rung << " " << v.name
             << (round == 0 ? eta_text(st.prog) : "") << " ..." << std::flush;
    if (round == 0) ++st.prog.done;
    const double variant_start = steady_s();
    json r = base_row(op, v, group.plan, st.req, st.threads);
    std::string why;
    if (!runnable_here(v, &why)) {
        if (round > 0) {
            progress << " not run\n";
            return {};
        }
        r["ran"] = false;
        r["skip_reason"] = why;
        r["correct"] = false;
        mark_not_timed(r);
        progress << " not run: " << why << "\n";
        slot.row = r;
        return {};
    }
    omp_set_num_threads(st.threads);
    r["ran"] = true;
    double peak = 0;
    TimingStats t;
    bool ok = true;
    try {
        t = run_variant(v, group, st.req, st.ceilings, peak, r, st.gbench, progress);
    } catch (const std::exception& e) {
        ok = false;
        r["correct"] = false;
        r["check_message"] = std::string("failed to run: ") + e.what();
        mark_not_timed(r);
        progress << " FAILED: " << e.what() << "\n";
    }
    r["wall_s"] = steady_s() - variant_start;
    fold_round(slot, r, t, ok, peak, round);
    return ok ? t : TimingStats{};
}

// The read probe beside a read-dominated variant (CPU, --rounds or --cold;
// the roof of a single warm round is the ceilings file's): with --cold, a
// pass before every timed call (Group::probe), so its best had as
// many chances as the variant's at the same moments; warm, where a pass
// between calls would empty the caches the calls are timed in, as many
// passes right after the window, in at most as many seconds (kProbeMaxS at
// most). The shape's read roof takes in its best; the row keeps each
// round's figure (`read_probe_gbps`): where they differ by much, the
// memory's speed changed during the run.
constexpr double kProbeMaxS = 2.0;
void probe_beside(RunState& st, Slot& slot, ReadProber& probe, const TimingStats& t, Ceilings& group_roofs,
                  double& group_read) {
    if (!t.cold) {
        const double budget = std::min(kProbeMaxS, t.mean * double(t.samples) * double(std::max(1, t.iterations)));
        const double t0 = steady_s();
        for (int i = 0; i < t.samples && (i < 3 || steady_s() - t0 < budget); ++i) probe.pass();
    }
    const ReadProbe p = probe.result();
    if (p.passes == 0) return;
    st.probed = true;
    take_read_figure(st, group_roofs, group_read, p.gbps);
    auto& row = slot.row;
    if (!row.contains("read_probe_gbps")) row["read_probe_gbps"] = json::array();
    row["read_probe_gbps"].push_back(p.gbps);
    row["read_probe_passes"] = row.value("read_probe_passes", 0) + p.passes;
    st.progress << "      read probe " << (t.cold ? "between its calls" : "after them") << ": "
                << fmt("%.1f", p.gbps) << " GB/s, best of " << p.passes << " passes\n";
}

// The shape's read probe, made on first use; null, with a word on the
// terminal and no more tries, where it cannot be (its array does not fit):
// the shape's roof is then the file's, or its rounds'.
ReadProber* prober(RunState& st, std::optional<ReadProber>& probe, bool& want) {
    if (!probe) try {
            probe.emplace(st.threads);
        } catch (const std::exception& e) {
            st.progress << "      no read probe beside the variants (" << e.what() << ")\n";
            want = false;
            return nullptr;
        }
    return &*probe;
}

// One (op, shape, dtype): inputs and oracle once, then every variant in
// every round; its rows join the document in the plan's order.
void run_plan(RunState& st, const RunPlan& plan) {
    const Op& op = *plan.op;
    const RunRequest& req = st.req;
    std::ostream& progress = st.progress;
    const double plan_start = steady_s();
    progress << "== " << op.lever << " / " << op.name << " (" << to_string(req.backend) << ", "
             << plan.shape.str() << ", " << to_string(plan.dtype) << ", " << st.threads << " threads)\n";
    progress << "   making inputs (seed " << req.seed << ") and the fp64 oracle..." << std::flush;
    Problem p = op.make_problem(plan.shape, plan.dtype, req.seed);
    const auto oracle = op.oracle(p);
    const auto hashes = input_hashes(p);
    progress << " done\n";
    Group group{op, plan, p, oracle, hashes, req};
    std::vector<Slot> slots(plan.variants.size());
    const int rounds = std::max(1, req.rounds);
    Ceilings group_roofs = st.ceilings;
    double group_read = 0;  // the best read figure of this shape's rounds
    // The read probe beside each variant (probe_beside), made once for the
    // shape when a variant first needs it.
    bool want_probe = (rounds > 1 || req.cold) && req.backend == Backend::cpu && op.read_dominated;
    std::optional<ReadProber> probe;
    for (int round = 0; round < rounds; ++round) {
        if (rounds > 1) {
            progress << "   round " << round + 1 << " of " << rounds;
            if (req.backend == Backend::cpu) measure_round_roof(st, group_roofs, group_read);
            progress << "\n";
        }
        for (std::size_t vi = 0; vi < plan.variants.size(); ++vi) {
            const Variant& v = *plan.variants[vi];
            ReadProber* p = want_probe && runnable_here(v, nullptr) ? prober(st, probe, want_probe) : nullptr;
            if (p) p->reset();
            group.probe = req.cold ? p : nullptr;
            const TimingStats t = run_slot(st, group, v, round, slots[vi]);
            group.probe = nullptr;
            if (p && t.samples > 0) probe_beside(st, slots[vi], *p, t, group_roofs, group_read);
        }
    }
    json& runs = st.doc["runs"];
    std::vector<std::size_t> group_rows;
    for (auto& slot : slots) {
        if (rounds > 1 && slot.row.value("ran", false)) slot.row["rounds"] = rounds;
        if (slot.row.value("ran", false)) group_rows.push_back(runs.size());
        runs.push_back(std::move(slot.row));
    }
    st.plan_rows.push_back(group_rows);
    st.plan_roofs.push_back(group_roofs);
    st.doc["timeline"].push_back({{"lever", op.lever}, {"op", op.name}, {"shape", plan.shape.str()},
                                  {"wall_s", steady_s() - plan_start}});
}

}  // namespace

// Every plan's shape must fit this machine before any of them runs: its
// compulsory bytes (what a call must at least read and write, so at least
// what its buffers hold) within the physical memory. Checked in doubles, so
// a product of 2^31 axes neither overflows nor ends in std::bad_alloc later.
void check_plans_fit_memory(const std::vector<RunPlan>& plans) {
    const double total = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
    if (total <= 0) return;
    for (auto& plan : plans) {
        const double need = plan.op->compulsory_bytes(plan.shape, plan.dtype);
        if (!(need <= total))
            throw UsageError(plan.op->name + " at " + plan.shape.str() + " needs at least " + fmt("%.3g", need / 1e9) +
                             " GB for its inputs and outputs, more than this machine's " + fmt("%.3g", total / 1e9) +
                             " GB of memory: choose a smaller shape");
    }
}

nlohmann::json run_plans(const std::vector<RunPlan>& plans, const RunRequest& req, const Ceilings& ceilings,
                         std::ostream& progress, RunProgress* job) {
    check_plans_fit_memory(plans);
    const int threads = req.threads > 0 ? req.threads : hardware_threads();
    json head = results_head(req, ceilings, threads);
    RunProgress local;
    RunProgress& prog = job ? *job : local;
    if (!job) prog.total = count_variants(plans);
    if (prog.start_s < 0) prog.start_s = steady_s();
    RunState st{req, ceilings, progress, prog, threads, std::move(head)};
    for (auto& plan : plans) run_plan(st, plan);
    // Ratios once every round is in, each shape against its own roofs.
    json& doc = st.doc;
    for (std::size_t i = 0; i < st.plan_rows.size(); ++i)
        add_group_ratios(doc["runs"], st.plan_rows[i], req, st.plan_roofs[i]);
    if (!st.read_rounds.empty() || st.probed) {
        doc["ceilings"]["dram_read_rounds_gbps"] = st.read_rounds;
        doc["ceilings"]["dram_read_by_threads_gbps"] = st.roofs.dram_read_by_threads_gbps;
        doc["ceilings"]["dram_read_gbps"] = dram_read_gbps(st.roofs);
    }
    doc["gbench"] = st.gbench;
    return doc;
}

}  // namespace mw
