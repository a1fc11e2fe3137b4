// A decode step on a busy machine: with one core taken by another process,
// a 2-thread step loses about that core's share, never an order of
// magnitude (model_cpu.hpp's Decoder runs a step on the threads FreeCores
// says are free; without that, each of a step's parallel regions, one per
// weight matrix, waits at its barrier for the thread the scheduler parked
// behind the neighbour).
// Timed, so RUN_SERIAL (tests/kv_cache/CMakeLists.txt).
#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "harness/disturbance.hpp"
#include "kernels/model/model_cpu.hpp"
#include "reference/kv_cache/generate.hpp"
#include "tests/spinners.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

int cpus_allowed() {
    cpu_set_t own;
    return sched_getaffinity(0, sizeof own, &own) == 0 ? CPU_COUNT(&own) : 1;
}

// The median time of `steps` single-token steps of the trained model on
// `threads` threads, after `warm_s` seconds of steps (FreeCores' first
// windows: the neighbour seen).
double median_step_s(mw::model::cpu::Decoder& dec, int threads, int steps, double warm_s) {
    omp_set_num_threads(threads);
    const int vocab = dec.config().vocab, room = dec.config().max_seq;
    int token = 'T';
    auto one = [&] {
        if (dec.position() + 1 >= room) dec.reset();
        const float* z = dec.step(token);
        token = int(std::max_element(z, z + vocab) - z);
    };
    for (const auto t0 = clock_type::now(); std::chrono::duration<double>(clock_type::now() - t0).count() < warm_s;)
        one();
    std::vector<double> t;
    for (int i = 0; i < steps; ++i) {
        const auto a = clock_type::now();
        one();
        t.push_back(std::chrono::duration<double>(clock_type::now() - a).count());
    }
    std::nth_element(t.begin(), t.begin() + std::ptrdiff_t(t.size() / 2), t.end());
    return t[t.size() / 2];
}

TEST(BusyDecode, TwoThreadStepBesideANeighbourWithinOneAndAHalfOfOneThread) {
    if (cpus_allowed() < 2) GTEST_SKIP() << "needs 2 cores (one for the neighbour)";
    const auto& dm = mw::kv_cache::decode_model(4, 256);
    ASSERT_TRUE(dm.trained) << "the committed trained model is the step's";
    mw::model::cpu::Decoder dec(dm.config, dm.params.data());
    const int saved = omp_get_max_threads();
    mw::test::SpinnerOnEveryCore neighbour(1);
    ASSERT_EQ(neighbour.count(), 1u);
    // Up to three tries: a shared host's own load can spoil one (once in CI,
    // 2 threads 0.98 ms against 0.58 ms, passing 3 of 3 alone); the defect
    // this guards against (every parallel region waiting for the parked
    // thread) costs several times one thread's step, in every try.
    double one = 0, two = 0;
    std::string tries;
    for (int attempt = 0; attempt < 3; ++attempt) {
        one = median_step_s(dec, 1, 300, 0.3);
        two = median_step_s(dec, 2, 300, 0.3);
        tries += "\n  try " + std::to_string(attempt) + ": 2 threads " + std::to_string(two * 1e3) +
                 " ms, 1 thread " + std::to_string(one * 1e3) + " ms";
        if (two <= 1.5 * one) break;
    }
    omp_set_num_threads(saved);
    EXPECT_LE(two, 1.5 * one) << "median step beside a process spinning on one core:" << tries;
    if (cpus_allowed() == 2) {  // both cores shared with the neighbour: the count must have come down
        EXPECT_GT(dec.free_cores().reduced(), 0) << "no step ran on fewer threads with one of 2 cores taken";
    }
}

// FreeCores alone: fewer threads while a neighbour spins on one core of 2,
// all of them again once it has gone.
TEST(BusyDecode, FreeCoresComesDownBesideANeighbourAndBackWhenItGoes) {
    if (cpus_allowed() != 2) GTEST_SKIP() << "written for 2 cores, one of them taken";
    mw::FreeCores free;
    auto after_a_window = [&] {
        std::this_thread::sleep_for(std::chrono::duration<double>(mw::kFreeCoresWindowS * 1.5));
        return free.threads(2);
    };
    after_a_window();  // a window that started before the neighbour
    {
        mw::test::SpinnerOnEveryCore neighbour(1);
        after_a_window();  // the neighbour in part of the window
        EXPECT_EQ(after_a_window(), 1) << "the neighbour in all of it; busy cores seen: " << free.busy_cores();
    }
    EXPECT_GT(free.reduced(), 0);
    // Back to 2 once a window is quiet: polled for 2 s, since a shared host's
    // own noise (or the hypervisor's steal) can take part of one window.
    int threads = 1;
    for (int i = 0; i < 13 && threads != 2; ++i) threads = after_a_window();
    EXPECT_EQ(threads, 2) << "the neighbour has gone";
}

// Asking for more threads than the cores is no sign of a busy machine.
TEST(BusyDecode, FreeCoresLeavesMoreThreadsThanCoresAsAsked) {
    mw::FreeCores free;
    std::this_thread::sleep_for(std::chrono::duration<double>(mw::kFreeCoresWindowS * 1.5));
    const int many = 4 * cpus_allowed() + 1;
    int threads = 0;
    for (int i = 0; i < 13 && threads != many; ++i) {  // a quiet window within 2 s
        threads = free.threads(many);
        if (threads != many) std::this_thread::sleep_for(std::chrono::duration<double>(mw::kFreeCoresWindowS * 1.5));
    }
    EXPECT_EQ(threads, many);
}

}  // namespace
