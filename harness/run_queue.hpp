// How long a process's threads waited for a CPU while they could have run:
// the second field of /proc/<pid>/task/<tid>/schedstat (nanoseconds on a run
// queue; the first is nanoseconds on a CPU). A timed call whose working
// threads waited shared its cores with some other task, and its time says as
// much about that task as about the code: the grader lets such calls confirm
// no best (commands/grade/grade.cpp, speed_rounds), and a timed window
// reports its share of waiting (disturbance.hpp).
#pragma once

#include <sys/types.h>

#include <map>
#include <utility>
#include <vector>

namespace mw {

class RunQueueWait {
public:
    // The threads of the processes `pids`, listed afresh at every take():
    // a thread started between two snapshots counts from zero.
    explicit RunQueueWait(std::vector<pid_t> pids) : pids_(std::move(pids)) {}

    struct Task {
        double ran_s = 0, waited_s = 0;
    };
    using Snapshot = std::map<pid_t, Task>;  // by thread id; a process or thread gone is simply absent
    Snapshot take() const;

    // Seconds the working threads waited between two snapshots taken around
    // a call. A thread is working when it ran at least a tenth of what the
    // busiest thread ran between them, and at least 0.1 ms: the sandbox's own
    // processes, woken for 20-30 us when a call thaws them, wait behind the
    // working thread for the whole call and say nothing about it (and where
    // no thread ran 0.1 ms, none is working: a call whose threads were
    // created and joined inside it leaves only those processes to see). The
    // bar is the busiest thread's run, not the call's length: a thread
    // starved to a few per cent of its core (its scheduling group's share
    // there cut by its group's work on other cores) ran less than a tenth of
    // the call, and it is the one that waited most.
    static double working_wait(const Snapshot& before, const Snapshot& after);
    // Seconds the working threads ran over the same window.
    static double working_ran(const Snapshot& before, const Snapshot& after);
    // How many threads were working.
    static int working_threads(const Snapshot& before, const Snapshot& after);

private:
    std::vector<pid_t> pids_;
};

// A call waited for a core longer than wake-ups take: more than 0.2 ms plus
// 2% of its time (a wake-up on an idle core costs microseconds, the
// sandbox's processes thawed for a call 50-70 us; a task sharing the core
// takes it for slices of milliseconds).
inline bool waited_for_core(double waited_s, double call_s) { return waited_s > 200e-6 + 0.02 * call_s; }

}  // namespace mw
