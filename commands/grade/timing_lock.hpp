// One grade times at a time on a host. Two grades started together (an
// instructor's two terminals, a test suite run with -j) would otherwise
// time their calls against each other: each side of each race waits for a
// core at random, and a reference solution measured 0.82 of its own rung
// beside a busy core where alone it measures 0.99-1.05. A grade takes this
// lock before it picks its cores and starts its worker, and keeps it until
// the worker is stopped.
//
// Work that times nothing but takes a core (compiling a submission, an
// emulated run's calls) takes the same lock shared: any number of those at
// once, none beside a timing. A compile of another grade on the timed core
// was the last neighbour the exclusive lock let through: the grade tests
// run two at a time beside a busy core still measured a reference solution
// at 0.87 of its own rung in one of five rounds. A grade waiting to time
// can wait out a stream of shared holders, up to its `max_wait_s`.
//
// The lock is flock(2) on a file in the temporary folder (the sandbox sees
// a /tmp of its own, so no submission can reach it): released by the
// kernel when the grader exits however it exits, never stale. Only a file
// of root's or the grader's own user is used (another user could hold it to
// stall every grade); on a host with other users, point MEMWALL_GRADE_LOCK
// into a folder only the graders can reach. A grade that cannot use the
// file, or waits longer than `max_wait_s`, times anyway and its report says
// so.
#pragma once

#include <string>

namespace mw::grade {

class TimingLock {
public:
    enum class Mode { times, keeps_off };  // exclusive; shared, keeping off every timing

    // Waits up to `max_wait_s` for the lock at MEMWALL_GRADE_LOCK if set,
    // else <temp folder>/memwall-grade-timing.lock.
    explicit TimingLock(double max_wait_s, Mode mode = Mode::times);
    ~TimingLock();
    TimingLock(const TimingLock&) = delete;
    TimingLock& operator=(const TimingLock&) = delete;

    bool held() const { return fd_ >= 0; }
    Mode mode() const { return mode_; }
    double waited_s() const { return waited_s_; }
    const std::string& path() const { return path_; }
    const std::string& why_not() const { return why_not_; }  // empty when held

private:
    int fd_ = -1;
    Mode mode_;
    double waited_s_ = 0;
    std::string path_, why_not_;
};

// MEMWALL_GRADE_LOCK_WAIT_S if set (seconds, 0 to 86400), else `fallback`;
// std::invalid_argument naming the value otherwise.
double timing_lock_wait_s(double fallback);

}  // namespace mw::grade
