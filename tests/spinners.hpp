// A process spinning on each CPU a test may use: the planted neighbour of
// the tests that a busy machine is seen (the grader's disturbed calls, a
// timed window's disturbance, a busy core's share).
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <vector>

namespace mw::test {

// A process spinning on each CPU this test may use, while it lives: every
// core the grader (or a timed run) can choose is busy; or on the first
// `at_most` of them (one: a neighbour that takes one core). Each in a session of its own: where
// autogroups are on, a group whose whole weight is on its core (spinners
// sharing the test's group would split its weight between the cores).
class SpinnerOnEveryCore {
public:
    explicit SpinnerOnEveryCore(std::size_t at_most = CPU_SETSIZE) {
        cpu_set_t own;
        if (sched_getaffinity(0, sizeof own, &own) != 0) return;
        for (int cpu = 0; cpu < CPU_SETSIZE && pids_.size() < at_most; ++cpu) {
            if (!CPU_ISSET(cpu, &own)) continue;
            const pid_t p = fork();
            if (p < 0) continue;
            if (p == 0) {
                setsid();
                cpu_set_t one;
                CPU_ZERO(&one);
                CPU_SET(cpu, &one);
                sched_setaffinity(0, sizeof one, &one);
                for (;;) __asm__ volatile("");
            }
            pids_.push_back(p);
        }
    }
    ~SpinnerOnEveryCore() { stop(); }
    SpinnerOnEveryCore(const SpinnerOnEveryCore&) = delete;
    SpinnerOnEveryCore& operator=(const SpinnerOnEveryCore&) = delete;
    void stop() {
        for (pid_t p : pids_) kill(p, SIGKILL), waitpid(p, nullptr, 0);
        pids_.clear();
    }
    std::size_t count() const { return pids_.size(); }

private:
    std::vector<pid_t> pids_;
};

}  // namespace mw::test
