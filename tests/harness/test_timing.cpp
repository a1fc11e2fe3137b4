// Timing: statistics are ordered, counts honoured, and the timed region
// contains the work (a 2x longer call measures ~2x longer).
#include <gtest/gtest.h>

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
