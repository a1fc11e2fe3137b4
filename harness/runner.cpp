#include "harness/runner.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>

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

int hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

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
        if (v > (1ll << 31))
            throw UsageError("shape axis '" + axis + "' = " + value + " is too large (at most 2^31)");
        s.axes[axis] = v;
        any = true;
    }
    if (!any) throw UsageError("empty shape: expected axis=value[,axis=value...] with axes " + join(axes));
    return s;
}

std::vector<RunPlan> plan_runs(const RunRequest& req) {
    if (req.targets.empty())
        throw UsageError("name a lever or op to run; levers: " + join(lever_names()) + "; ops: " + join(op_names()));
    if (req.backend == Backend::cuda && gpu_count() == 0)
        throw UsageError("--backend cuda needs a GPU, and there is none here (" + gpu_absent_reason() +
                         "); valid backends here: cpu, cuda-emu");

    std::vector<const Op*> targets;
    for (auto& t : req.targets) {
        bool found = false;
        for (auto& o : ops())
            if (o.lever == t || o.name == t) {
                if (std::find(targets.begin(), targets.end(), &o) == targets.end()) targets.push_back(&o);
                found = true;
            }
        if (!found)
            throw UsageError("unknown lever or op '" + t + "'; levers: " + join(lever_names()) + "; ops: " +
                             join(op_names()));
    }

    std::vector<RunPlan> plans;
    std::set<std::string> requested(req.variants.begin(), req.variants.end()), matched;
    std::set<std::string> valid_variant_names;
    for (const Op* op : targets) {
        auto vs = variants_of(op->name, req.backend);
        for (auto* v : vs) valid_variant_names.insert(v->name);
        if (vs.empty()) continue;
        DType dtype = req.dtype.value_or(op->dtypes.front());
        if (std::find(op->dtypes.begin(), op->dtypes.end(), dtype) == op->dtypes.end()) {
            std::vector<std::string> names;
            for (auto d : op->dtypes) names.push_back(to_string(d));
            throw UsageError("op '" + op->name + "' does not support dtype '" + to_string(dtype) +
                             "'; valid dtypes: " + join(names));
        }
        std::vector<const Variant*> chosen;
        for (auto* v : vs) {
            const bool picked = requested.empty() || requested.count(v->name);
            if (picked) matched.insert(v->name);
            // The naive rung always runs (speedups are measured against it in
            // this run), unless the request skips it.
            if (picked || (v->role == Role::reference && !req.skip_naive)) {
                if (std::find(v->dtypes.begin(), v->dtypes.end(), dtype) == v->dtypes.end()) {
                    if (requested.count(v->name)) {
                        std::vector<std::string> names;
                        for (auto d : v->dtypes) names.push_back(to_string(d));
                        throw UsageError("variant '" + v->name + "' of " + op->name + " does not support dtype '" +
                                         to_string(dtype) + "'; it supports: " + join(names));
                    }
                    continue;
                }
                chosen.push_back(v);
            }
        }
        std::vector<Shape> shapes;
        if (req.shapes.empty()) {
            shapes.push_back(req.quick ? op->quick_shape : op->default_shape);
        } else {
            for (auto& text : req.shapes) {
                Shape s = parse_shape(text, req.quick ? op->quick_shape : op->default_shape, op->axes, op->flag_axes);
                if (op->validate) {
                    auto err = op->validate(s);
                    if (!err.empty()) throw UsageError(err);
                }
                shapes.push_back(s);
            }
        }
        for (auto& s : shapes) plans.push_back({op, s, dtype, chosen});
    }
    for (auto& r : requested)
        if (!matched.count(r))
            throw UsageError("unknown variant '" + r + "' for backend " + to_string(req.backend) +
                             "; valid variants: " + join({valid_variant_names.begin(), valid_variant_names.end()}));
    if (plans.empty()) {
        std::set<std::string> have;
        for (const Op* op : targets)
            for (auto* v : variants_of(op->name)) have.insert(to_string(v->backend));
        throw UsageError("no " + to_string(req.backend) + " variants for " + join(req.targets) +
                         "; backends with variants: " + join({have.begin(), have.end()}));
    }
    return plans;
}

double roof_gflops(const Ceilings& c, double intensity, const std::string& dtype) {
    const double peak = peak_gflops(c, dtype), bw = dram_gbps(c);
    if (peak <= 0 || bw <= 0) return 0;
    return std::min(peak, intensity * bw);
}

namespace {

void poison_outputs(Problem& p) {
    for (auto& b : p.outputs) poison(b);
}

CheckedRun check_instance(const Op& op, Instance& inst, Problem& p, const std::vector<std::vector<double>>& oracle) {
    CheckedRun r;
    poison_outputs(p);
    inst.run();
    inst.sync();
    inst.fetch();
    CheckResult c = check_problem(op, p, oracle);
    r.correct = c.ok;
    r.max_abs = c.max_abs;
    r.max_rel = c.max_rel;
    r.rel_fro = c.rel_fro;
    r.message = c.message;
    return r;
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
    if (v.contract_oracle) return check_instance(op, inst, p, v.contract_oracle(p));
    return check_instance(op, inst, p, oracle);
}

nlohmann::json run_plans(const std::vector<RunPlan>& plans, const RunRequest& req, const Ceilings& ceilings,
                         std::ostream& progress) {
    const int threads = req.threads > 0 ? req.threads : hardware_threads();
    nlohmann::json doc;
    doc["schema"] = kResultsSchema;
    doc["machine"] = machine_info();
    doc["machine"]["threads"] = threads;
    doc["ceilings"] = to_json(ceilings);
    doc["ceilings"]["peak_fp32_gflops"] = peak_gflops(ceilings, "fp32");
    doc["ceilings"]["dram_gbps"] = dram_gbps(ceilings);
    if (!req.command_line.empty()) doc["command"] = req.command_line;
    doc["runs"] = nlohmann::json::array();
    nlohmann::json gbench = {{"context", nullptr}, {"benchmarks", nlohmann::json::array()}};

    std::size_t total = 0, done = 0;
    for (auto& plan : plans) total += plan.variants.size();

    for (auto& plan : plans) {
        const Op& op = *plan.op;
        progress << "== " << op.lever << " / " << op.name << " (" << to_string(req.backend) << ", "
                 << plan.shape.str() << ", " << to_string(plan.dtype) << ", " << threads << " threads)\n";
        progress << "   making inputs (seed " << req.seed << ") and the fp64 oracle..." << std::flush;
        Problem p = op.make_problem(plan.shape, plan.dtype, req.seed);
        const auto oracle = op.oracle(p);
        const auto hashes = input_hashes(p);
        progress << " done\n";

        const double flops = op.flops(plan.shape);
        std::vector<std::size_t> group_rows;
        double naive_rel_fro = -1;
        const double L = op.check.reduction_length ? op.check.reduction_length(plan.shape) : 1.0;

        for (const Variant* v : plan.variants) {
            ++done;
            progress << "   [" << done << "/" << total << "] " << v->name << " ..." << std::flush;
            const double bytes = v->bytes ? v->bytes(plan.shape, plan.dtype) : op.compulsory_bytes(plan.shape, plan.dtype);
            nlohmann::json r = {
                {"lever", op.lever}, {"op", op.name}, {"variant", v->name}, {"role", to_string(v->role)},
                {"backend", to_string(v->backend)}, {"rung", v->rung}, {"dtype", to_string(plan.dtype)},
                {"shape", plan.shape.axes}, {"shape_str", plan.shape.str()}, {"threads", threads},
                {"flops", flops}, {"bytes", bytes}, {"intensity", bytes > 0 ? flops / bytes : 0.0},
                {"compulsory_bytes", op.compulsory_bytes(plan.shape, plan.dtype)},
                {"rationale", v->rationale}, {"source", v->source}, {"requires", v->needs},
                {"seed", req.seed}, {"timing_meaningful", v->backend != Backend::cuda_emu}};
            std::string why;
            if (!runnable_here(*v, &why)) {
                r["ran"] = false;
                r["skip_reason"] = why;
                r["correct"] = false;
                r["time_s"] = {{"median", 0}, {"min", 0}, {"max", 0}, {"best", 0}, {"samples", 0}};
                r["gflops"] = 0;
                r["gbps"] = 0;
                r["error"] = {{"max_abs", nullptr}, {"max_rel", nullptr}, {"rel_fro", nullptr}};
                progress << " not run: " << why << "\n";
                doc["runs"].push_back(r);
                continue;
            }
            omp_set_num_threads(threads);
            r["ran"] = true;
            try {
                // Peak heap growth over prepare + one call: workspaces,
                // materialized intermediates, packed copies.
                const std::size_t heap_before = memtrack::reset_peak();
                Instance inst = v->prepare(p);
                // Lossy variants are judged against the function they claim to compute.
                std::vector<std::vector<double>> contract;
                if (v->contract_oracle) contract = v->contract_oracle(p);
                const auto& expected = v->contract_oracle ? contract : oracle;
                CheckedRun before = check_instance(op, inst, p, expected);
                r["peak_extra_bytes"] = memtrack::peak_bytes() - heap_before + inst.workspace_bytes;
                TimingStats t;
                std::string gb;
                TimingOptions topt = req.timing;
                topt.cold = req.cold;
                if (v->backend == Backend::cuda_emu) {  // emulated: one timed call is all it's worth
                    topt.min_samples = topt.max_samples = 1;
                    topt.budget_s = 0;
                }
                progress << " checked (" << (before.correct ? "ok" : "WRONG") << "), timing..." << std::flush;
                t = time_instance(op.name + "/" + v->name + "/" + to_string(v->backend) + "/" + plan.shape.str(),
                                  inst, topt, &gb);
                // Check again after timing: a variant cannot be right once and wrong afterwards.
                CheckedRun after = check_instance(op, inst, p, expected);
                if (v->contract_oracle) {
                    CheckResult exact = check_problem(op, p, oracle);
                    r["error_vs_exact"] = {{"max_abs", exact.max_abs}, {"max_rel", exact.max_rel}, {"rel_fro", exact.rel_fro}};
                }
                const bool inputs_intact = input_hashes(p) == hashes;
                CheckedRun& worst = before.correct ? after : before;
                CheckResult cr;
                cr.ok = before.correct && after.correct && inputs_intact;
                cr.rel_fro = std::max(before.rel_fro, after.rel_fro);
                std::string message = worst.message;
                if (!inputs_intact) message += (message.empty() ? "" : "; ") + std::string("the variant modified its inputs");
                if (cr.ok && v->role != Role::reference && naive_rel_fro >= 0 && !v->contract_oracle) {
                    apply_baseline_rule(cr, naive_rel_fro, op.check.baseline_factor, plan.dtype, L);
                    if (!cr.ok) message = cr.message;
                }
                if (v->role == Role::reference) naive_rel_fro = cr.rel_fro;
                r["correct"] = cr.ok;
                if (!message.empty()) r["check_message"] = message;
                r["error"] = {{"max_abs", std::max(before.max_abs, after.max_abs)},
                              {"max_rel", std::max(before.max_rel, after.max_rel)},
                              {"rel_fro", cr.rel_fro}};
                r["time_s"] = {{"median", t.median}, {"min", t.min}, {"max", t.max}, {"best", t.min},
                               {"mean", t.mean}, {"samples", t.samples}, {"iterations_per_sample", t.iterations},
                               {"cold", t.cold}};
                r["gflops"] = t.min > 0 ? flops / t.min / 1e9 : 0.0;
                r["gbps"] = t.min > 0 ? bytes / t.min / 1e9 : 0.0;
                if (inst.workspace_bytes) r["workspace_bytes"] = inst.workspace_bytes;
                if (!gb.empty()) {
                    try {
                        auto j = nlohmann::json::parse(gb);
                        if (gbench["context"].is_null()) gbench["context"] = j["context"];
                        for (auto& b : j["benchmarks"]) gbench["benchmarks"].push_back(b);
                    } catch (...) {
                    }
                }
                char line[160];
                std::snprintf(line, sizeof line, " %s  best %.4g ms, median %.4g ms (%d samples), %.3g GFLOP/s\n",
                              cr.ok ? "correct" : "INCORRECT", t.min * 1e3, t.median * 1e3, t.samples,
                              r["gflops"].get<double>());
                progress << line;
                if (!cr.ok) progress << "      " << message << "\n";
            } catch (const std::exception& e) {
                r["correct"] = false;
                r["check_message"] = std::string("failed to run: ") + e.what();
                r["time_s"] = {{"median", 0}, {"min", 0}, {"max", 0}, {"best", 0}, {"samples", 0}};
                r["gflops"] = 0;
                r["gbps"] = 0;
                r["error"] = {{"max_abs", nullptr}, {"max_rel", nullptr}, {"rel_fro", nullptr}};
                progress << " FAILED: " << e.what() << "\n";
            }
            group_rows.push_back(doc["runs"].size());
            doc["runs"].push_back(r);
        }

        // Speedups: ratios of best-of-N times measured in this run.
        auto& runs = doc["runs"];
        const nlohmann::json* naive = nullptr;
        const nlohmann::json* vendor = nullptr;
        for (auto i : group_rows) {
            auto& r = runs[i];
            if (!r.value("ran", false) || r["time_s"]["samples"].get<int>() == 0) continue;
            if (r["role"] == "reference" && !naive) naive = &r;
            if (r["role"] == "vendor" && (!vendor || r["time_s"]["best"] < (*vendor)["time_s"]["best"])) vendor = &r;
        }
        const double naive_best = naive ? (*naive)["time_s"]["best"].get<double>() : 0;
        const double naive_median = naive ? (*naive)["time_s"]["median"].get<double>() : 0;
        const double vendor_best = vendor ? (*vendor)["time_s"]["best"].get<double>() : 0;
        for (auto i : group_rows) {
            auto& r = runs[i];
            const double best = r["time_s"]["best"].get<double>();
            const bool meaningful = r["timing_meaningful"].get<bool>() && best > 0;
            r["speedup_vs_naive"] = meaningful && naive_best > 0 ? nlohmann::json(naive_best / best) : nlohmann::json();
            r["speedup_vs_naive_median"] = meaningful && naive_median > 0
                                               ? nlohmann::json(naive_median / r["time_s"]["median"].get<double>())
                                               : nlohmann::json();
            r["speedup_vs_vendor"] = meaningful && vendor_best > 0 ? nlohmann::json(vendor_best / best) : nlohmann::json();
            const double roof = req.backend == Backend::cpu ? roof_gflops(ceilings, r["intensity"].get<double>()) : 0;
            r["roof_gflops"] = roof > 0 ? nlohmann::json(roof) : nlohmann::json();
            r["fraction_of_roof"] = meaningful && roof > 0 ? nlohmann::json(r["gflops"].get<double>() / roof)
                                                           : nlohmann::json();
        }
    }
    doc["gbench"] = gbench;
    return doc;
}

}  // namespace mw
