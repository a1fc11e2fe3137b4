// What else the machine did while a variant was timed. A shared host runs
// other work: a spinning neighbour slows a multi-threaded rung, and a chain
// of small parallel regions (a decode step) can lose far more than a core's
// share, waiting at every barrier for a thread the scheduler parked.
// Nothing in a time says so; this does:
//
//   others      CPU time that other processes used on the cores this
//               process may run on (/proc/stat minus this process's own),
//               as a share of those cores over the window;
//   steal       time the hypervisor ran something else on those cores;
//   run queue   how long this process's working threads waited for a core
//               (run_queue.hpp), per second they ran: reported, not judged
//               alone (its own threads beyond the cores, OpenBLAS's pool
//               beside OpenMP's, and every wake-up count there too).
//
// A window is disturbed when others or steal passes kDisturbedShare. Both
// need a window long enough for /proc/stat's ticks (kMinOthersWindowS);
// others is not measured for an MPI rank, whose peers are other processes
// by design. Not opened for a GPU's time (CUDA events) nor for cuda-emu's
// one emulated call (TimingOptions::judge_load).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/run_queue.hpp"

namespace mw {

inline constexpr double kDisturbedShare = 0.05;
inline constexpr double kMinOthersWindowS = 0.4;

struct Disturbance {
    bool measured = false;       // a window was measured at all
    double window_s = 0;
    double others_share = -1;    // -1: not measured (window too short, MPI rank)
    double steal_share = -1;     // -1: not measured (window too short)
    double run_queue_share = 0;  // waited / ran, over the working threads
    int working_threads = 0;     // threads that ran 0.1 ms and a tenth of what the busiest one ran
    int cores = 0;               // the cores this process may run on

    bool disturbed() const {
        return measured && (others_share > kDisturbedShare || steal_share > kDisturbedShare);
    }
    // What disturbed it, in words ("" when nothing did).
    std::string why() const;
    nlohmann::json to_json() const;
};

// The worse of two windows' (rounds of one variant): each share's larger.
Disturbance worse(const Disturbance& a, const Disturbance& b);

// A wait for a quiet machine before a variant's samples (--wait-quiet S):
// windows of kQuietProbeS with this process asleep, until one is not
// disturbed or S seconds have passed. The samples then start on a machine
// that was quiet a moment ago; their own window still says whether it stayed so.
inline constexpr double kQuietProbeS = 0.5;  // >= kMinOthersWindowS: others and steal measurable

struct QuietWait {
    double asked_s = 0;   // 0: no wait asked
    double waited_s = 0;  // the probes' time, the last (quiet) one included
    int probes = 0;
    bool quiet = true;    // false: still disturbed when asked_s ran out
    Disturbance last;     // the last probe's window

    bool asked() const { return asked_s > 0; }
    nlohmann::json to_json() const;
};

QuietWait wait_for_quiet(double max_s);
// The same loop over any probe (one window each): the tests' planted ones.
QuietWait wait_for_quiet(double max_s, const std::function<Disturbance()>& probe);

// Two waits of one variant (its rounds): times and probes added, quiet only if both were.
QuietWait merge(const QuietWait& a, const QuietWait& b);

// Other processes' and the hypervisor's use of this process's cores since
// a start: /proc/stat's busy and steal ticks of those cores, less this
// process's own CPU time. DisturbanceWindow and FreeCores read it.
class CoreLoad {
public:
    CoreLoad();  // starts now, over the cores any thread of this process may run on
    void restart();
    int cores() const { return static_cast<int>(cores_.size()); }
    double elapsed_s() const;

    struct Shares {
        double others = -1;  // of the cores, over the span; -1: not measured
        double steal = -1;
    };
    // Since the start; measured only over a span of at least min_window_s
    // (/proc/stat counts in ticks of 10 ms) and, for others, when
    // others_measurable.
    Shares shares(double min_window_s, bool others_measurable = true) const;

private:
    struct CpuTicks {
        long long busy = 0, steal = 0;
    };
    std::map<int, CpuTicks> read_ticks() const;  // by CPU, of this process's cores

    std::vector<int> cores_;
    std::map<int, CpuTicks> ticks_before_;
    double own_cpu_before_ = 0;
    std::chrono::steady_clock::time_point t0_;
};

// Opened before the timed window, closed after it.
class DisturbanceWindow {
public:
    // others_measurable: false for an MPI rank.
    explicit DisturbanceWindow(bool others_measurable = true);
    Disturbance close() const;

private:
    bool others_measurable_;
    RunQueueWait threads_;
    RunQueueWait::Snapshot threads_before_;
    CoreLoad load_;
};

// How many threads a loop of short parallel steps (a decode step: dozens of
// small parallel regions, a barrier after each) should use now. A thread
// the scheduler parks behind another process holds every barrier of the
// step until it runs again, so with one of two cores taken, a 2-thread step
// can take several times as long as a 1-thread one. threads(want) is want,
// or, when other processes kept cores busy (and the hypervisor took them)
// over the last window of kFreeCoresWindowS, at most the cores they left
// (a core counts as taken from 0.4 of it busy), and at least 1; a call
// within a window costs one clock read. The counts say how often it gave
// fewer threads than asked, for a summary to name the cause.
inline constexpr double kFreeCoresWindowS = 0.1;

class FreeCores {
public:
    int threads(int want);
    long calls() const { return calls_; }
    long reduced() const { return reduced_; }  // calls that gave fewer than asked
    // reduced() as a variant's counter, steps_on_fewer_threads (docs/results.md).
    void add_counter(std::map<std::string, double>& counters) const {
        counters["steps_on_fewer_threads"] = double(reduced_);
    }
    double busy_cores() const { return busy_cores_; }  // others + steal, the busiest window so far

private:
    CoreLoad load_;
    int taken_ = 0;  // cores others took in the last window; none until one says so
    double busy_cores_ = 0;
    long calls_ = 0, reduced_ = 0;
};

// OpenMP's thread count for the parallel regions of one scope (a step):
// what `free` gives out of the count OpenMP would use, the caller's count
// restored after.
class FreeThreadsScope {
public:
    explicit FreeThreadsScope(FreeCores& free);
    ~FreeThreadsScope();
    FreeThreadsScope(const FreeThreadsScope&) = delete;
    FreeThreadsScope& operator=(const FreeThreadsScope&) = delete;

private:
    int saved_;
};

}  // namespace mw
