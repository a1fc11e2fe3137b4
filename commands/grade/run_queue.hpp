// How long a process's threads waited for a CPU while they could have run:
// the second field of /proc/<pid>/task/<tid>/schedstat (nanoseconds on a run
// queue; the first is nanoseconds on a CPU). The grader's speed test runs
// both sides confined to the same cores, so a timed call whose working
// threads waited shared its core with some other task (another grade, the
// compiler of one, a neighbour pinned there): its time says as much about
// that task as about the code, and it must not be what confirms a side's
// best (grade.cpp, speed_rounds).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace mw::grade {

class RunQueueWait {
public:
    // The threads of `pids`, listed now (threads started later are not followed).
    explicit RunQueueWait(const std::vector<pid_t>& pids);

    struct Task {
        double ran_s = 0, waited_s = 0;
    };
    using Snapshot = std::vector<Task>;  // one per thread listed; zeros where it could not be read
    Snapshot take() const;

    // Seconds the working threads waited between two snapshots taken around
    // a call of `call_s`. A thread is working when it ran a tenth of the
    // call: the sandbox's own processes, woken when a call thaws them, wait
    // behind the working thread for the whole call and say nothing about it.
    static double working_wait(const Snapshot& before, const Snapshot& after, double call_s);

private:
    std::vector<std::string> files_;
};

// A call waited for its core longer than wake-ups take: more than 0.2 ms and
// 2% of its time (a wake-up on an idle core costs microseconds, the
// sandbox's processes thawed for a call 50-70 us; a task sharing the core
// takes it for slices of milliseconds).
inline bool waited_for_core(double waited_s, double call_s) { return waited_s > 200e-6 + 0.02 * call_s; }

}  // namespace mw::grade
