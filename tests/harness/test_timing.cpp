// Timing: statistics are ordered, counts honoured, and the timed region
// contains the work (a 2x longer call measures ~2x longer).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "harness/timing.hpp"
#include "tests/spinners.hpp"

namespace {

mw::Instance sleeper(std::chrono::microseconds d) {
    mw::Instance inst;
    inst.run = [d] { std::this_thread::sleep_for(d); };
    return inst;
}

TEST(Timing, StatisticsAreOrderedAndCounted) {
    auto inst = sleeper(std::chrono::microseconds(200));
    mw::TimingOptions o;
    o.budget_s = 0.02;
    o.min_samples = 4;
    o.max_samples = 6;
    o.min_sample_s = 0;
    auto t = mw::time_instance("sleep200us", inst, o);
    EXPECT_GE(t.samples, 4);
    EXPECT_LE(t.samples, 6);
    EXPECT_LE(t.min, t.median);
    EXPECT_LE(t.median, t.max);
    EXPECT_GE(t.min, 190e-6);  // sleep never returns early
}

// Rounds of one variant merge into one set of statistics over all their
// samples (hand-made, so the expected figures do not come from the code).
TEST(Timing, MergedRoundsAreStatisticsOverEverySample) {
    mw::TimingStats a, b;
    a.per_call = {3e-3, 1e-3, 2e-3};
    a.iterations = 1, a.cold = true;
    b.per_call = {0.5e-3, 9e-3};
    b.iterations = 1;
    const auto m = mw::merge_timing(a, b);
    EXPECT_EQ(m.samples, 5);
    EXPECT_DOUBLE_EQ(m.min, 0.5e-3);  // the later round's best wins
    EXPECT_DOUBLE_EQ(m.max, 9e-3);
    EXPECT_DOUBLE_EQ(m.median, 2e-3);  // of 0.5 1 2 3 9
    EXPECT_DOUBLE_EQ(m.mean, 15.5e-3 / 5);
    EXPECT_TRUE(m.cold);
    // and from real timings: the samples of both are kept, sorted
    auto inst = sleeper(std::chrono::microseconds(100));
    mw::TimingOptions o;
    o.budget_s = 0.005, o.min_samples = 3, o.max_samples = 3, o.min_sample_s = 0;
    const auto t1 = mw::time_instance("r1", inst, o), t2 = mw::time_instance("r2", inst, o);
    ASSERT_EQ(t1.per_call.size(), 3u);
    const auto t = mw::merge_timing(t1, t2);
    EXPECT_EQ(t.samples, 6);
    EXPECT_DOUBLE_EQ(t.min, std::min(t1.min, t2.min));
    EXPECT_TRUE(std::is_sorted(t.per_call.begin(), t.per_call.end()));
}

TEST(Timing, TimedRegionScalesWithWork) {
    mw::TimingOptions o;
    o.budget_s = 0.05;
    o.min_samples = 5;
    auto a = sleeper(std::chrono::milliseconds(2));
    auto b = sleeper(std::chrono::milliseconds(8));
    auto ta = mw::time_instance("a", a, o), tb = mw::time_instance("b", b, o);
    EXPECT_GT(tb.min / ta.min, 2.5);
    EXPECT_LT(tb.min / ta.min, 4.5);
}

TEST(Timing, ProducesGoogleBenchmarkJson) {
    auto inst = sleeper(std::chrono::microseconds(50));
    mw::TimingOptions o;
    o.budget_s = 0.001;
    o.min_samples = 3;
    std::string json;
    mw::time_instance("gbjson", inst, o, &json);
    EXPECT_NE(json.find("\"benchmarks\""), std::string::npos);
    EXPECT_NE(json.find("gbjson"), std::string::npos);
}

// --- what else the machine did while a variant was timed (disturbance.hpp) ---

// A call that keeps its core busy for `d` (a sleep would leave the core to
// a neighbour and wait for nothing).
mw::Instance spinner(std::chrono::microseconds d) {
    mw::Instance inst;
    inst.run = [d] {
        const auto t0 = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - t0 < d) {
        }
    };
    return inst;
}

mw::TimingOptions half_second() {
    mw::TimingOptions o;
    o.budget_s = 0.6;  // past kMinOthersWindowS: /proc/stat's ticks can judge it
    o.min_sample_s = 0.01;
    o.min_samples = 5;
    o.estimate_s = 1e-3;  // the call's time, however slow the warm-up call was beside a neighbour
    return o;
}

// With a process spinning on every core, other processes hold at least half
// of the cores and this one's thread waits for its core about as long as it
// runs: the window is disturbed, and says why.
TEST(Disturbance, APlantedNeighbourIsSeen) {
    auto inst = spinner(std::chrono::microseconds(1000));
    mw::test::SpinnerOnEveryCore neighbours;
    ASSERT_GT(neighbours.count(), 0u);
    const auto t = mw::time_instance("spin1ms", inst, half_second());
    neighbours.stop();
    const mw::Disturbance& d = t.disturbance;
    ASSERT_TRUE(d.measured);
    EXPECT_GE(d.window_s, mw::kMinOthersWindowS);
    EXPECT_GT(d.others_share, 0.3);
    EXPECT_GT(d.run_queue_share, 0.2);
    EXPECT_TRUE(d.disturbed());
    EXPECT_NE(d.why().find("other processes used"), std::string::npos) << d.why();
    EXPECT_TRUE(d.to_json()["disturbed"].get<bool>());
}

// The same window on a quiet machine: nothing else on the cores, no waiting.
// (Steal, the hypervisor's, is the host's to decide: not asserted.)
TEST(Disturbance, AQuietWindowIsNot) {
    auto inst = spinner(std::chrono::microseconds(1000));
    const auto t = mw::time_instance("spin1ms", inst, half_second());
    const mw::Disturbance& d = t.disturbance;
    ASSERT_TRUE(d.measured);
    EXPECT_GE(d.others_share, 0);
    EXPECT_LT(d.others_share, mw::kDisturbedShare) << d.to_json().dump();
    EXPECT_LT(d.run_queue_share, mw::kDisturbedShare) << d.to_json().dump();
}

// Rounds of one variant keep the worse of their windows; a window too short
// for the ticks leaves others and steal unmeasured (null), not zero.
TEST(Disturbance, TheWorseRoundIsKeptAndUnmeasuredIsNull) {
    mw::Disturbance a, b;
    a.measured = b.measured = true;
    a.cores = b.cores = 2;
    a.window_s = 0.1, b.window_s = 1.0;
    b.others_share = 0.2, b.steal_share = 0.01, a.run_queue_share = 0.03, b.run_queue_share = 0.01;
    const nlohmann::json ja = a.to_json();
    EXPECT_TRUE(ja["others_share"].is_null());
    EXPECT_TRUE(ja["steal_share"].is_null());
    EXPECT_FALSE(ja["disturbed"].get<bool>());
    const mw::Disturbance w = mw::worse(a, b);
    EXPECT_DOUBLE_EQ(w.others_share, 0.2);
    EXPECT_DOUBLE_EQ(w.run_queue_share, 0.03);
    EXPECT_DOUBLE_EQ(w.window_s, 1.1);
    EXPECT_TRUE(w.disturbed());
    EXPECT_EQ(w.why(), "other processes used 20% of its 2 cores");
    EXPECT_FALSE(mw::worse(mw::Disturbance{}, a).disturbed());  // one unmeasured side: the other's
    // Timing rounds merge so.
    mw::TimingStats r1, r2;
    r1.per_call = {1e-3}, r2.per_call = {2e-3};
    r1.disturbance = a, r2.disturbance = b;
    EXPECT_TRUE(mw::merge_timing(r1, r2).disturbance.disturbed());
}

// Calls whose time is planted (device_time: the harness records what it
// returns): steady ones settle at the second batch; ones each 3% quicker
// than the last never do (a batch of three lowers the best by 9%), and stop
// at --until-stable's cap. Each sleeps a millisecond, so the 0.1 s cap
// below holds a few dozen batches, not thousands.
mw::Instance planted(double first_s, double factor) {
    mw::Instance inst;
    auto d = std::make_shared<double>(first_s);
    inst.run = [] {};
    inst.device_time = [d, factor](bool) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        const double t = *d;
        *d *= factor;
        return t;
    };
    return inst;
}

TEST(Timing, UntilStableStopsWhenTheBestHolds) {
    mw::TimingOptions o;
    o.budget_s = 0.01, o.min_samples = 3, o.max_samples = 3, o.min_sample_s = 0;
    o.judge_load = false;
    auto steady = planted(5e-4, 1.0);
    const auto once = mw::time_instance("steady", steady, o);
    EXPECT_FALSE(once.until_stable);
    EXPECT_EQ(once.batches, 1);
    o.until_stable_s = 2.0;
    const auto settled = mw::time_instance("steady", steady, o);
    EXPECT_TRUE(settled.until_stable);
    EXPECT_TRUE(settled.stable);
    EXPECT_EQ(settled.batches, 2);  // the second batch cannot lower a constant best
    EXPECT_EQ(settled.samples, 3 * settled.batches);
    o.until_stable_s = 0.1;
    auto falling = planted(4e-3, 0.97);
    std::string gbench;
    const auto capped = mw::time_instance("falling", falling, o, &gbench);
    EXPECT_FALSE(capped.stable);
    EXPECT_GE(capped.batches, 3);
    EXPECT_EQ(capped.samples, 3 * capped.batches);
    // Google Benchmark's record holds every batch, the later ones named so.
    const auto doc = nlohmann::json::parse(gbench);
    EXPECT_NE(gbench.find("falling/batch:2"), std::string::npos);
    int iterations = 0;
    for (const auto& b : doc["benchmarks"]) iterations += b.value("run_type", "") == "iteration";
    EXPECT_EQ(iterations, 3 * capped.batches);
    // Rounds: stable only if every round was.
    mw::TimingStats a = settled, b = capped;
    const auto both = mw::merge_timing(a, b);
    EXPECT_FALSE(both.stable);
    EXPECT_EQ(both.batches, settled.batches + capped.batches);
}

// --wait-quiet: beside a spinner on every core the real probes see it, and
// the wait gives up after its seconds and says why. (Whether the machine is
// quiet afterwards is the host's to decide, so the end of a wait is shown
// with planted probes: three busy windows, then a quiet one.)
TEST(Disturbance, AWaitForQuietEndsOnTheFirstQuietProbe) {
    mw::test::SpinnerOnEveryCore neighbours;
    ASSERT_GT(neighbours.count(), 0u);
    const mw::QuietWait busy = mw::wait_for_quiet(1.2);
    neighbours.stop();
    EXPECT_FALSE(busy.quiet);
    EXPECT_GE(busy.probes, 2);
    EXPECT_GE(busy.waited_s, 1.2);
    EXPECT_LT(busy.waited_s, 1.2 + 2 * mw::kQuietProbeS + 0.5);
    EXPECT_NE(busy.to_json()["why"].get<std::string>().find("other processes used"), std::string::npos)
        << busy.to_json().dump();
    int calls = 0;
    auto probe = [&calls] {
        mw::Disturbance d;
        d.measured = true, d.cores = 2, d.window_s = 0.5;
        d.others_share = ++calls <= 3 ? 0.5 : 0.01;
        d.steal_share = 0;
        return d;
    };
    const mw::QuietWait waited = mw::wait_for_quiet(30, probe);
    EXPECT_TRUE(waited.quiet) << waited.to_json().dump();
    EXPECT_EQ(waited.probes, 4);
    EXPECT_FALSE(waited.to_json().contains("why"));
    calls = 0;
    const mw::QuietWait never = mw::wait_for_quiet(1e-9, probe);  // one probe at least, however short the wait
    EXPECT_EQ(never.probes, 1);
    EXPECT_FALSE(never.quiet);
    EXPECT_EQ(never.to_json()["why"], "other processes used 50% of its 2 cores");
}

// Two rounds' waits: times and probes add up; quiet only if both were, and
// the failed one's last probe says why. A wait not asked is no wait.
TEST(Disturbance, TwoRoundsWaitsAddUp) {
    mw::QuietWait a, b;
    a.asked_s = b.asked_s = 2;
    a.waited_s = 0.5, a.probes = 1;
    b.waited_s = 2.1, b.probes = 4, b.quiet = false;
    b.last.measured = true, b.last.cores = 2, b.last.others_share = 0.3;
    const mw::QuietWait m = mw::merge(a, b);
    EXPECT_DOUBLE_EQ(m.waited_s, 2.6);
    EXPECT_EQ(m.probes, 5);
    EXPECT_FALSE(m.quiet);
    EXPECT_EQ(m.to_json()["why"], "other processes used 30% of its 2 cores");
    EXPECT_TRUE(mw::merge(a, a).quiet);
    EXPECT_DOUBLE_EQ(mw::merge(mw::QuietWait{}, a).waited_s, 0.5);
    EXPECT_FALSE(mw::QuietWait{}.asked());
    mw::TimingStats r1, r2;
    r1.per_call = {1e-3}, r2.per_call = {2e-3};
    r1.quiet_wait = a, r2.quiet_wait = b;
    EXPECT_FALSE(mw::merge_timing(r1, r2).quiet_wait.quiet);
    // A wait of 0 asks for none and takes no time.
    EXPECT_EQ(mw::wait_for_quiet(0).probes, 0);
}

// A GPU's time comes from CUDA events: the CPU's load is not judged.
TEST(Disturbance, ADeviceTimeIsNotJudged) {
    mw::Instance inst;
    inst.run = [] {};
    inst.device_time = [](bool) { return 1e-3; };
    mw::TimingOptions o;
    o.budget_s = 0.005, o.min_samples = 2, o.max_samples = 2;
    EXPECT_FALSE(mw::time_instance("gpu", inst, o).disturbance.measured);
    // Nor an emulated call's (the runner asks so for cuda-emu).
    auto cpu = spinner(std::chrono::microseconds(100));
    o.judge_load = false;
    EXPECT_FALSE(mw::time_instance("emulated", cpu, o).disturbance.measured);
}

// Its own threads waiting behind each other (more of them than cores) are
// reported, but are not a disturbance: a quieter machine would not help.
TEST(Disturbance, OwnThreadsWaitingIsNotADisturbance) {
    mw::Disturbance d;
    d.measured = true;
    d.cores = 1, d.working_threads = 2;
    d.others_share = 0.01, d.steal_share = 0, d.run_queue_share = 0.9;
    EXPECT_FALSE(d.disturbed());
    EXPECT_EQ(d.why(), "");
    d.others_share = 0.4;
    EXPECT_EQ(d.why(), "other processes used 40% of its 1 core; its threads waited for a core 90% as long as they ran");
}

}  // namespace
