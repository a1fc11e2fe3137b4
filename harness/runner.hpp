// `memwall run`: resolve what to run, check, time and record each variant.
#pragma once

#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/ceilings.hpp"
#include "harness/command.hpp"  // UsageError
#include "harness/check.hpp"
#include "harness/registry.hpp"
#include "harness/timing.hpp"

namespace mw {

struct RunRequest {
    std::vector<std::string> targets;   // lever or op names
    Backend backend = Backend::cpu;
    std::vector<std::string> variants;  // empty = all of the backend
    std::vector<std::string> shapes;    // "k=v[,k=v...]" overrides of the default shape
    std::optional<DType> dtype;
    int threads = 0;                    // 0 = all hardware threads
    bool quick = false;
    bool cold = false;
    bool skip_naive = false;            // the naive rung runs only if named in `variants`
    // Rounds per shape: every variant is timed `rounds` times, round-robin,
    // and its statistics are over all rounds' samples, so a quiet or a busy
    // minute of a shared host falls on every variant alike. With more than
    // one round on the CPU, the read-only DRAM roof is measured again before
    // each round and the roof is the best of those and the ceilings file's.
    int rounds = 1;
    std::uint64_t seed = 42;
    TimingOptions timing;
    std::string command_line;           // recorded in the results
};

// One (op, shape, dtype) to run, with the variants picked for it.
struct RunPlan {
    const Op* op = nullptr;
    Shape shape;
    DType dtype = DType::f32;
    std::vector<const Variant*> variants;
};

// Validates the request against the registry; throws UsageError on any bad
// name, shape, dtype or backend (before anything runs).
std::vector<RunPlan> plan_runs(const RunRequest& req);

// Parses "m=1024,n=7" (positive integers) onto `base`, checking axis names
// against `axes`. Throws UsageError naming the bad part.
// Axes in `flag_axes` may be 0 (switches such as causal=0/1).
Shape parse_shape(const std::string& text, const Shape& base, const std::vector<std::string>& axes,
                  const std::vector<std::string>& flag_axes = {});

// Progress across several run_plans calls (`memwall run all --out-dir`,
// one call per lever): variants done of the whole job and when it started,
// for the estimate of the time left printed on each variant's line.
struct RunProgress {
    std::size_t done = 0, total = 0;
    double start_s = -1;  // steady-clock seconds; set on first use
};
// Variants the plans will run (the `total` of a RunProgress).
std::size_t count_variants(const std::vector<RunPlan>& plans);

// Runs the plans; progress lines go to `progress`. Returns the results doc
// (with "wall_s" per run and per plan, under "timeline").
nlohmann::json run_plans(const std::vector<RunPlan>& plans, const RunRequest& req, const Ceilings& ceilings,
                         std::ostream& progress, RunProgress* job = nullptr);

// Checks one variant on one problem (prepare, poison outputs, run, fetch,
// compare with the oracle). Used by tests and by run_plans.
struct CheckedRun {
    bool correct = false;
    double max_abs = 0, max_rel = 0, rel_fro = 0;
    std::string message;
    std::size_t near_ties = 0;          // token_sequence outputs (see harness/check.hpp)
    std::string note;                   // near-ties named, also when correct
    std::vector<StatTest> stat_tests;   // distribution outputs
};
CheckedRun check_variant(const Op& op, const Variant& v, Problem& p, const std::vector<std::vector<double>>& oracle);

// The peak MFU and HFU are measured against: the calibrated peak of `dtype`
// on the backend (CPU: the best over thread counts, as on the roofline; a
// GPU: its measured peak). 0 when none was calibrated, and on cuda-emu.
double peak_for_mfu(const Ceilings& c, Backend backend, DType dtype);
// The same for a ceilings dtype name ("fp32", "int8", ...): a variant's
// Variant::compute when it names one. 0 when that peak was not calibrated.
double peak_for_mfu(const Ceilings& c, Backend backend, const std::string& dtype);

// Bytes of a problem's inputs and outputs, the part of peak_bytes every
// variant of a run shares.
std::size_t problem_bytes(const Problem& p);

// The all-threads roof for an intensity: min(peak, intensity * DRAM).
// min(peak, intensity x bandwidth); the bandwidth is the triad's, or with
// read_only the read-only stream's (Op::read_dominated).
double roof_gflops(const Ceilings& c, double intensity, const std::string& dtype = "fp32", bool read_only = false);

}  // namespace mw
