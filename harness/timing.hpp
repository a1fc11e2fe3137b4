// Timing, with Google Benchmark as the engine. The harness owns warm-up,
// repetitions, cache eviction and statistics; variants never time themselves.
//
// Each sample is one Google Benchmark repetition of `iterations` calls; the
// timed region is the call alone (manual time), so cache eviction (cold mode)
// and GPU L2 flushes stay outside it. On a GPU the time comes from CUDA events
// (Instance::device_time). On shared virtual machines the median wanders; the
// best-of-N sample is stable to a few percent, so headline speedups use it.
#pragma once

#include <vector>

#include <functional>
#include <string>

#include "harness/disturbance.hpp"
#include "harness/registry.hpp"

namespace mw {

struct TimingOptions {
    double budget_s = 3.0;          // target total timed time per variant
    double min_sample_s = 0.02;     // batch calls until one sample lasts this long
    int min_samples = 5;
    int max_samples = 100;   // best-of-N needs a window long enough to outlast a noisy neighbour
    bool cold = false;              // evict caches before every call
    double estimate_s = 0;          // time of one call if known (from the check run)
    bool judge_load = true;         // measure what else the machine did (disturbance.hpp); not for cuda-emu
    double wait_quiet_s = 0;        // before the samples, wait up to this long for a quiet machine (0: don't)
    // After the budget's samples, more batches of as many samples while a
    // batch still lowers the best by more than kStableShare, for at most
    // this many seconds more (0: one batch, the budget's).
    double until_stable_s = 0;
    // Called before every timed call (and before its eviction where cold),
    // outside the timed span: the read probe beside a read-dominated
    // variant (ReadProber). CPU calls only.
    std::function<void()> before_call;
};

inline constexpr double kStableShare = 0.01;

struct TimingStats {
    double median = 0, min = 0, max = 0, mean = 0;  // seconds per call
    int samples = 0;
    int iterations = 0;  // calls per sample
    bool cold = false;
    std::vector<double> per_call;  // every sample's seconds per call, sorted
    Disturbance disturbance;       // what else the machine did while the samples ran
    QuietWait quiet_wait;          // the wait for a quiet machine before them (TimingOptions::wait_quiet_s)
    std::vector<double> round_best;  // each round's best seconds per call, in round order (merge_timing)
    bool until_stable = false;     // until_stable_s was asked (and could be: not for an MPI rank)
    int batches = 1;               // batches of samples (more than one only with until_stable_s)
    bool stable = true;            // until_stable_s: the last batch lowered the best by kStableShare or less
};

// One set of statistics over the samples of both (e.g. two rounds of the
// same variant): best, median and the rest over the union of samples; the
// worse disturbance of the two; each round's best kept, a's then b's.
TimingStats merge_timing(const TimingStats& a, const TimingStats& b);

// Times `inst` under the name `name`. When `gbench_json` is given it receives
// Google Benchmark's own JSON document for this benchmark.
TimingStats time_instance(const std::string& name, Instance& inst, const TimingOptions& opts,
                          std::string* gbench_json = nullptr);

// Seconds for one call of inst.run() + sync(), measured once (warm-up/probe).
double time_once(Instance& inst);

// Touch a buffer larger than the last-level cache (CPU cold-cache mode), on
// every thread of the OpenMP team: each core's own L1 and L2 are emptied
// too, and the team is awake when the timed call starts, as it is between
// the layers of a decode step. (A team left asleep through a one-thread
// eviction made every cold call pay the wake-up: a 1 ms int4 GEMV on the
// 2-core EPYC guest measured 12-15% faster with OMP_WAIT_POLICY=active.)
void evict_cpu_caches();

// The q-quantile (0..1) of `v` by nearest rank: element round(q (n - 1)) of
// the sorted values; `empty` when there are none. Latency percentiles
// (p50, p99) of decode loops.
double percentile(std::vector<double> v, double q, double empty = 0.0);

}  // namespace mw
