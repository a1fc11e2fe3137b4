// Run-queue waits (harness/run_queue.hpp): what tells the grader that a
// timed call shared its core with another task.
#include <gtest/gtest.h>

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "harness/run_queue.hpp"

namespace {

using mw::RunQueueWait;
using mw::waited_for_core;

// Only working threads (those that ran a tenth of what the busiest thread
// ran, and at least 0.1 ms) count: a sandbox's process woken by the thaw waits behind
// the call all along. A thread that appeared between the snapshots counts
// from zero; one that is gone counts nothing.
TEST(RunQueueWait, OnlyWorkingThreadsCount) {
    const RunQueueWait::Snapshot before = {{11, {1.0, 0.5}}, {12, {2.0, 0.1}}, {13, {3.0, 0.0}}, {14, {4.0, 0.0}}};
    // Thread 11 ran 10 ms and waited 1 ms, 12 ran 0.1 ms and waited 9 ms, 13
    // ran 1.5 ms and waited 2 ms, 14 is gone, and 15 started between the
    // snapshots, ran 4 ms and waited 0.5 ms.
    const RunQueueWait::Snapshot after = {
        {11, {1.010, 0.501}}, {12, {2.0001, 0.109}}, {13, {3.0015, 0.002}}, {15, {0.004, 0.0005}}};
    EXPECT_NEAR(RunQueueWait::working_wait(before, after), 0.0035, 1e-9);
    EXPECT_NEAR(RunQueueWait::working_ran(before, after), 0.0155, 1e-9);
    EXPECT_EQ(RunQueueWait::working_threads(before, after), 3);
    // With thread 11 at 20 ms, thread 13 is under a tenth.
    const RunQueueWait::Snapshot longer = {
        {11, {1.020, 0.501}}, {12, {2.0001, 0.109}}, {13, {3.0015, 0.002}}, {15, {0.004, 0.0005}}};
    EXPECT_NEAR(RunQueueWait::working_wait(before, longer), 0.0015, 1e-9);
    EXPECT_EQ(RunQueueWait::working_threads(before, longer), 2);
    // 0.1 ms at least: beside a thread that ran 0.5 ms, one that ran 80 us
    // and waited the whole call is not working.
    const RunQueueWait::Snapshot shortly = {{11, {1.0005, 0.5001}}, {12, {2.00008, 0.102}}};
    EXPECT_NEAR(RunQueueWait::working_wait(before, shortly), 0.0001, 1e-9);
    EXPECT_EQ(RunQueueWait::working_threads(before, shortly), 1);
    // Where no thread ran 0.1 ms (the sandbox's processes alone), none works.
    const RunQueueWait::Snapshot wakeups = {{11, {1.00005, 0.51}}, {12, {2.00003, 0.11}}};
    EXPECT_EQ(RunQueueWait::working_wait(before, wakeups), 0);
    EXPECT_EQ(RunQueueWait::working_threads(before, wakeups), 0);
    // A thread id reused between the snapshots counts from zero: thread 13's
    // counters went down, so it is a new thread that ran 2 ms and waited 1 ms.
    const RunQueueWait::Snapshot reused = {{11, {1.010, 0.501}}, {13, {0.002, 0.001}}};
    EXPECT_NEAR(RunQueueWait::working_wait(before, reused), 0.002, 1e-9);
    EXPECT_NEAR(RunQueueWait::working_ran(before, reused), 0.012, 1e-9);
}

// A thread starved on its core (it ran 4 ms of a 300 ms call, as one does
// when its scheduling group's share of that core is cut by the group's work
// on another core) waited the most, though it ran under a tenth of the call;
// only the sandbox's thawed processes beside it, 25 us each, are left out.
TEST(RunQueueWait, AStarvedThreadIsWorking) {
    const RunQueueWait::Snapshot before = {{21, {5.0, 1.0}}, {22, {0.1, 0.0}}, {23, {0.1, 0.0}}};
    const RunQueueWait::Snapshot after = {{21, {5.004, 1.296}}, {22, {0.100025, 0.3}}, {23, {0.100025, 0.3}}};
    EXPECT_NEAR(RunQueueWait::working_wait(before, after), 0.296, 1e-9);
    EXPECT_EQ(RunQueueWait::working_threads(before, after), 1);
    EXPECT_TRUE(waited_for_core(RunQueueWait::working_wait(before, after), 0.004));
    // Nothing ran at all: no thread is working, so no wait is seen (the
    // price of leaving the sandbox's processes out).
    const RunQueueWait::Snapshot frozen = {{21, {5.0, 1.3}}, {22, {0.1, 0.0}}};
    EXPECT_EQ(RunQueueWait::working_wait(before, frozen), 0);
}

TEST(RunQueueWait, WakeUpsAreNotASharedCore) {
    EXPECT_FALSE(waited_for_core(60e-6, 0.001));    // the sandbox's thawed processes
    EXPECT_FALSE(waited_for_core(0.15e-3, 0.005));  // 0.2 ms + 2%: 0.3 ms at 5 ms
    EXPECT_TRUE(waited_for_core(0.31e-3, 0.005));
    EXPECT_TRUE(waited_for_core(3e-3, 0.010));      // a slice of another task
    EXPECT_FALSE(waited_for_core(3e-3, 0.200));     // 2% of 200 ms is 4 ms
}

TEST(RunQueueWait, NoProcessNoWait) {
    const RunQueueWait none({});
    EXPECT_TRUE(none.take().empty());
    const RunQueueWait gone({999999999});
    EXPECT_TRUE(gone.take().empty());
    EXPECT_EQ(RunQueueWait::working_wait({}, {}), 0);
    // This process: its own thread is listed by its id.
    const auto self = RunQueueWait({getpid()}).take();
    EXPECT_EQ(self.count(getpid()), 1u);
}

double spin_for(double seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    double s = 0;
    while ((s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) < seconds) {
    }
    return s;
}

// This process on one core with a second one spinning there: its working
// thread waits for much of the time it spins (the scheduler shares the core;
// with autogroups, the spinner's session may get far more than half of it,
// the more so when this process's session works on the other core too, as
// under ctest beside a grade), and the grader's test calls that disturbed.
TEST(RunQueueWait, ACoreSharedWithASpinnerIsSeen) {
    cpu_set_t saved;
    ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved)) ++cpu;
    ASSERT_LT(cpu, CPU_SETSIZE);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    const pid_t spinner = fork();
    ASSERT_GE(spinner, 0);
    if (spinner == 0) {
        setsid();  // a scheduling group of its own where autogroups are on
        for (;;) __asm__ volatile("");
    }
    spin_for(0.05);  // the spinner is running
    const RunQueueWait wait({getpid()});
    const auto before = wait.take();
    const double call = spin_for(0.3);
    const double waited = RunQueueWait::working_wait(before, wait.take());
    kill(spinner, SIGKILL);
    waitpid(spinner, nullptr, 0);
    sched_setaffinity(0, sizeof saved, &saved);
    EXPECT_GT(waited, 0.05) << "of a " << call << " s spin on a core shared with another spinner";
    EXPECT_LT(waited, call);
    EXPECT_TRUE(waited_for_core(waited, call - waited));
}

}  // namespace
