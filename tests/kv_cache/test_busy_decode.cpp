// A decode step on a busy machine: with one core taken by another process,
// a 2-thread step loses about that core's share, never an order of
// magnitude (model_cpu.hpp's Decoder runs a step on the threads FreeCores
// says are free; without that, each of a step's ~70 parallel regions waits
// at its barrier for the thread the scheduler parked behind the neighbour).
// Timed, so RUN_SERIAL (tests/kv_cache/CMakeLists.txt).
#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
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
    const double one = median_step_s(dec, 1, 300, 0.3);
    const double two = median_step_s(dec, 2, 300, 0.3);
    omp_set_num_threads(saved);
    EXPECT_LE(two, 1.5 * one) << "2 threads: median " << two * 1e3 << " ms a step, 1 thread: " << one * 1e3
                              << " ms, beside a process spinning on one core";
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
        after_a_window();  // the window with the neighbour in all of it
        EXPECT_EQ(after_a_window(), 1) << "busy cores seen: " << free.busy_cores();
    }
    after_a_window();
    EXPECT_EQ(after_a_window(), 2) << "the neighbour has gone";
    EXPECT_GT(free.reduced(), 0);
}

}  // namespace
