// Timing: statistics are ordered, counts honoured, and the timed region
// contains the work (a 2x longer call measures ~2x longer).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "harness/timing.hpp"

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

}  // namespace
