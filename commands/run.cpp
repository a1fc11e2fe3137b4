// `memwall run`: check, time and record variants of levers or ops. The work
// is the engine's (harness/runner.hpp); this file turns flags into a
// RunRequest and writes the results files.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands/cli.hpp"
#include "harness/ceilings.hpp"
#include "harness/command.hpp"
#include "harness/gpu.hpp"
#include "harness/registry.hpp"
#include "harness/results.hpp"
#include "harness/runner.hpp"
#include "harness/strings.hpp"

namespace mw {
namespace {

namespace fs = std::filesystem;

struct RunFlags {
    RunRequest req;
    std::string backend = "cpu", dtype, out, out_dir, ceilings;
    bool threads_given = false;
};

Ceilings load_or_measure_ceilings(const std::string& path, int threads, bool quick) {
    if (!path.empty()) {
        auto doc = read_json_file(path);
        if (!doc.contains("ceilings"))
            throw UsageError("'" + path + "' has no \"ceilings\" field; make one with: memwall calibrate --out FILE.json");
        return ceilings_from_json(doc["ceilings"]);
    }
    std::cerr << "calibrating this machine (quick; pass --ceilings FILE from `memwall calibrate` to reuse a full one)...\n";
    Ceilings c = calibrate_cpu(threads, true);
    calibrate_gpu(c, true);
    return c;
}

// Every flag checked before anything runs.
void validate(RunFlags& f) {
    RunRequest& req = f.req;
    auto b = parse_backend(f.backend);
    if (!b) throw UsageError("unknown backend '" + f.backend + "'; valid backends: " + join(all_backend_names()));
    req.backend = *b;
    if (!f.dtype.empty()) {
        req.dtype = parse_dtype(f.dtype);
        if (!req.dtype) throw UsageError("unknown dtype '" + f.dtype + "'; valid dtypes: " + join(all_dtype_names()));
    }
    if (f.threads_given) check_threads("--threads", req.threads);
    if (req.timing.budget_s < 0) throw UsageError("--budget must be >= 0 seconds");
    if (!(req.timing.until_stable_s >= 0 && req.timing.until_stable_s <= 3600))
        throw UsageError("--until-stable must be between 0 and 3600 seconds, got " + fmt("%g", req.timing.until_stable_s));
    if (!(req.timing.wait_quiet_s >= 0 && req.timing.wait_quiet_s <= 3600))
        throw UsageError("--wait-quiet must be between 0 and 3600 seconds, got " + fmt("%g", req.timing.wait_quiet_s));
    if (req.rounds < 1 || req.rounds > 100)
        throw UsageError("--rounds " + std::to_string(req.rounds) + " is out of range; valid: 1..100");
    if (req.quick) {
        req.timing.budget_s = std::min(req.timing.budget_s, 0.3);
        req.timing.min_samples = 3;
    }
    check_output_path(f.out, "--out");
    if (!f.out_dir.empty() && fs::exists(f.out_dir) && !fs::is_directory(f.out_dir))
        throw UsageError("--out-dir '" + f.out_dir + "' is a file; give a folder");
}

bool any_incorrect(const nlohmann::json& doc) {
    for (auto& r : doc["runs"])
        if (r.value("ran", false) && !r["correct"].get<bool>()) return true;
    return false;
}

// FILE.json and its .md and .csv summaries.
void write_results(const fs::path& out, const nlohmann::json& doc) {
    write_json_atomic(out, doc);
    write_file_atomic(fs::path(out).replace_extension(".md"), report_markdown(doc));
    write_file_atomic(fs::path(out).replace_extension(".csv"), report_csv(doc));
    std::cout << "results: " << out.string() << " (+ .md, .csv)\n";
}

// One process, one file per lever, each written when its lever is done.
bool run_per_lever(const RunFlags& f, const std::vector<RunPlan>& plans, const Ceilings& c, bool reporter) {
    std::ostream quiet(nullptr);
    RunProgress job;
    job.total = count_variants(plans);
    std::vector<std::string> levers;
    for (auto& p : plans)
        if (std::find(levers.begin(), levers.end(), p.op->lever) == levers.end()) levers.push_back(p.op->lever);
    bool failed = false;
    for (auto& lever : levers) {
        std::vector<RunPlan> mine;
        for (auto& p : plans)
            if (p.op->lever == lever) mine.push_back(p);
        auto doc = run_plans(mine, f.req, c, reporter ? std::cout : quiet, &job);
        failed = failed || any_incorrect(doc);
        if (reporter) write_results(fs::path(f.out_dir) / (lever + "-" + to_string(f.req.backend) + ".json"), doc);
    }
    return !failed;
}

int run(RunFlags& f) {
    validate(f);
    f.req.command_line = invocation_for_record();
    auto plans = plan_runs(f.req);  // all validation happens before anything runs
    const Ceilings c = load_or_measure_ceilings(
        f.ceilings, f.req.threads > 0 ? f.req.threads : hardware_threads(), f.req.quick);
    // Under mpirun every rank runs the plan (collective variants need them
    // all); only rank 0 prints and writes.
    const bool reporter = launch_rank() == 0;
    bool ok;
    if (!f.out_dir.empty()) {
        ok = run_per_lever(f, plans, c, reporter);
    } else {
        std::ostream quiet(nullptr);
        auto doc = run_plans(plans, f.req, c, reporter ? std::cout : quiet);
        ok = !any_incorrect(doc);
        if (reporter && !f.out.empty()) write_results(f.out, doc);
        else if (reporter) std::cout << "\n" << report_markdown(doc);
    }
    if (!ok && reporter) std::cerr << "memwall: at least one variant is INCORRECT (see check_message)\n";
    return ok ? 0 : 1;
}

}  // namespace

MW_REGISTER_COMMAND_AT(run, "run", 1, [](CLI::App& app) -> CommandAction {
    auto f = std::make_shared<RunFlags>();
    RunRequest& req = f->req;
    auto* run_cmd = app.add_subcommand("run", "Check, time and record variants of levers or ops");
    run_cmd->add_option("targets", req.targets, "Levers or ops to run (see `memwall list`), or all")->required();
    run_cmd->add_option("--backend", f->backend, "cpu, cuda or cuda-emu")->default_val("cpu");
    run_cmd->add_option("--variant", req.variants, "Only these variants (the naive rung always runs too)");
    run_cmd->add_option("--shape", req.shapes,
                        "Shape override, axis=value[,axis=value...]; repeat for several; OP:axis=value,... applies "
                        "to that op only (with several targets)");
    run_cmd->add_option("--dtype", f->dtype, "Data type (default: the op's first)");
    run_cmd->add_option("--threads", req.threads, "CPU threads (default: all hardware threads)");
    run_cmd->add_flag("--quick", req.quick, "Small shapes and short timing (smoke runs)");
    run_cmd->add_flag("--cold", req.cold,
                      "Evict caches before every timed call; on the CPU a read-dominated op's read roof is then "
                      "the best of a read probe run before every call (the same moments)");
    run_cmd->add_flag("--skip-naive", req.skip_naive,
                      "Run the naive rung only if named with --variant (no 'vs naive' speedups then)");
    run_cmd->add_option("--seed", req.seed, "Seed of the generated inputs")->default_val(42);
    run_cmd->add_option("--budget", req.timing.budget_s, "Seconds of timed calls per variant")->default_val(3.0);
    run_cmd->add_option("--until-stable", req.timing.until_stable_s,
                        "After --budget's samples, more batches of as many while a batch still lowers the best time "
                        "by more than 1%, for at most this many seconds more; time_s.stable says whether it settled "
                        "(0: one batch)")
        ->default_val(0.0);
    run_cmd->add_option("--wait-quiet", req.timing.wait_quiet_s,
                        "Before each variant's timed calls, wait up to this many seconds for a quiet machine "
                        "(others and the hypervisor under 5% of this run's cores over half a second); the row's "
                        "quiet_wait says how long, and whether it came (0: don't wait)")
        ->default_val(0.0);
    run_cmd->add_option("--rounds", req.rounds,
                        "Time every variant this many times, round-robin per shape, with statistics over all "
                        "rounds; on the CPU the DRAM read roof is re-measured before each round (a noisy shared "
                        "host), and for a read-dominated op by a read probe beside each variant")
        ->default_val(1);
    run_cmd->add_option("--out", f->out, "Write results JSON here (and .md/.csv beside it)");
    run_cmd->add_option("--out-dir", f->out_dir,
                        "Write one results file per lever here, <lever>-<backend>.json (+ .md, .csv), each as soon "
                        "as its lever is done (e.g. `memwall run all --out-dir DIR`)")
        ->excludes("--out");
    run_cmd->add_option("--ceilings", f->ceilings,
                        "Ceilings from `memwall calibrate --out` (default: quick calibration)");
    return [f, run_cmd] {
        f->threads_given = run_cmd->count("--threads") > 0;
        return run(*f);
    };
});

}  // namespace mw
