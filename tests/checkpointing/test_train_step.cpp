// The checkpointing lever's train_step op: every rung against the fp64 block
// stack at odd shapes first (one token; sequences across the attention's
// 96-row blocks; a last segment shorter than k; MHA, GQA, MQA), every rung's
// outputs bit for bit store_all's, every k from 1 to L, the memory models
// against the measured peaks, and the FLOP counts by hand.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>

#include "harness/check.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "reference/checkpointing/train_step.hpp"
#include "tests/checkpointing/train_step_cases.hpp"

namespace {

using mw::test::expect_same_bits;
using mw::test::run_checked;
constexpr auto* shape = &mw::test::train_step_shape;
constexpr auto* op = &mw::test::train_step_op;

class TrainStep : public ::testing::TestWithParam<mw::Shape> {};

TEST_P(TrainStep, EveryRungMatchesTheOracleAndStoreAllsBits) {
    mw::Problem p = op().make_problem(GetParam(), mw::DType::f32, 5);
    ASSERT_EQ(op().validate(GetParam()), "");
    const auto oracle = op().oracle(p);
    const auto vs = mw::variants_of("train_step", mw::Backend::cpu);
    ASSERT_EQ(vs.size(), 4u);
    ASSERT_EQ(vs[0]->name, "store_all");
    const auto want = run_checked(*vs[0], p, oracle);
    for (std::size_t i = 1; i < vs.size(); ++i) {
        EXPECT_EQ(vs[i]->identical_to, "store_all") << vs[i]->name;
        expect_same_bits(run_checked(*vs[i], p, oracle), want, vs[i]->name + " at " + GetParam().str());
    }
}

INSTANTIATE_TEST_SUITE_P(OddShapesFirst, TrainStep,
                         ::testing::Values(shape(1, 1, 1, 2, 1, 1, 1, 0),      // one token, one block
                                           shape(3, 7, 7, 8, 2, 1, 7, 2),      // MQA; segments of 2 + 1
                                           shape(5, 66, 33, 16, 4, 2, 33, 2),  // GQA, two sequences, 2 + 2 + 1
                                           shape(4, 200, 100, 24, 6, 3, 24, 1),
                                           shape(7, 129, 129, 32, 4, 4, 40, 3)),  // MHA; T across 96-row blocks
                         mw::test::shape_test_name);

// Every segment length from 1 (a checkpoint per block) to L (one segment:
// nothing rebuilt) gives store_all's bits; the inputs do not depend on k.
TEST(TrainStepSweep, EveryKFromOneToLIsBitIdentical) {
    const auto vs = mw::variants_of("train_step", mw::Backend::cpu);
    const mw::Variant* every_k = nullptr;
    for (const auto* v : vs)
        if (v->name == "every_k") every_k = v;
    ASSERT_NE(every_k, nullptr);
    mw::Problem p0 = op().make_problem(shape(6, 40, 20, 16, 2, 2, 24, 1), mw::DType::f32, 9);
    const auto oracle = op().oracle(p0);
    const auto want = run_checked(*vs[0], p0, oracle);
    for (long k = 1; k <= 6; ++k) {
        mw::Problem p = op().make_problem(shape(6, 40, 20, 16, 2, 2, 24, k), mw::DType::f32, 9);
        for (std::size_t i = 0; i < p.inputs.size(); ++i)
            ASSERT_EQ(std::memcmp(p.inputs[i].data.get(), p0.inputs[i].data.get(), p0.inputs[i].size_bytes()), 0)
                << "input " << p.inputs[i].name << " depends on every";
        expect_same_bits(run_checked(*every_k, p, oracle), want, "every_k with k = " + std::to_string(k));
    }
}

// The oracle check is tight enough to see a missing block gradient or one
// tensor's gradient 1% off (the bit-identity check sees far less).
TEST(TrainStepCheck, AMissingOrScaledGradientFailsTheOracle) {
    const mw::Shape s = shape(3, 32, 16, 16, 2, 1, 24, 0);
    mw::Problem p = op().make_problem(s, mw::DType::f32, 3);
    const auto oracle = op().oracle(p);
    const auto vs = mw::variants_of("train_step", mw::Backend::cpu);
    run_checked(*vs[0], p, oracle);
    const auto c = mw::checkpointing::config_of(s);
    const std::size_t P = mw::model::layer_param_count(c);
    float* g = p.out("dparams").as<float>();
    const auto W1 = mw::model::bind_layer(c, g + P);  // block 1
    const std::size_t n_w2 = std::size_t(c.d_ff) * c.d_model;
    std::vector<float> keep(W1.w2, W1.w2 + n_w2);
    std::fill(W1.w2, W1.w2 + n_w2, 0.0f);
    EXPECT_FALSE(mw::check_problem(op(), p, oracle).ok) << "block 1's w2 gradient missing";
    for (std::size_t i = 0; i < n_w2; ++i) W1.w2[i] = keep[i] * 1.01f;
    EXPECT_FALSE(mw::check_problem(op(), p, oracle).ok) << "block 1's w2 gradient 1% off";
    std::copy(keep.begin(), keep.end(), W1.w2);
    EXPECT_TRUE(mw::check_problem(op(), p, oracle).ok);
}

// FLOPs by hand: a block at T positions costs 2 T (d (qd + 2 kvd) + qd d +
// 3 d d_ff) for its matrices and 2 x 2 heads hd T (T+1)/2 for its attention.
TEST(TrainStepModel, ExecutedFlopsByHand) {
    const mw::Shape s = shape(16, 512, 256, 256, 8, 4, 704, 4);
    const double T = 256, d = 256, qd = 256, kvd = 128, f = 704, B = 2;
    const double block = B * (2 * T * (d * (qd + 2 * kvd) + qd * d + 3 * d * f) + 4 * 8 * 32 * T * (T + 1) / 2);
    const double scores = B * 2 * 8 * 32 * T * (T + 1) / 2;
    const double useful = 3 * 16 * block;
    EXPECT_NEAR(op().flops(s), useful, 1e-9 * useful);
    using mw::checkpointing::Rung;
    EXPECT_NEAR(mw::checkpointing::executed_flops(s, Rung::every_k), useful + 12 * block, 1e-9 * useful);
    EXPECT_NEAR(mw::checkpointing::executed_flops(s, Rung::selective), useful + 15 * scores, 1e-9 * useful);
    EXPECT_NEAR(mw::checkpointing::executed_flops(s, Rung::recompute_all), useful + 120 * block, 1e-9 * useful);
    // k = 5 at L = 16: segments 5, 5, 5, 1; the last (1 block) is never rebuilt.
    mw::Shape s5 = s;
    s5.axes["every"] = 5;
    EXPECT_NEAR(mw::checkpointing::executed_flops(s5, Rung::every_k), useful + 15 * block, 1e-9 * useful);
    // every = 0: round(sqrt(16)) = 4.
    mw::Shape s0 = s;
    s0.axes["every"] = 0;
    EXPECT_EQ(mw::checkpointing::every_of(s0), 4);
}

// The memory models, term by term, against the peaks the harness measures.
TEST(TrainStepModel, MeasuredPeaksMatchTheMemoryModels) {
    mw::RunRequest req;
    req.targets = {"train_step"};
    req.shapes = {"layers=8,tokens=256,seq=128,d_model=64,heads=4,kv_heads=2,d_ff=96,every=3"};
    req.timing.budget_s = 0.01;
    req.timing.min_samples = req.timing.max_samples = 1;
    req.threads = 2;
    mw::Ceilings c;
    std::ostringstream progress;
    const auto doc = mw::run_plans(mw::plan_runs(req), req, c, progress);
    std::map<std::string, double> peak;
    for (const auto& r : doc["runs"]) {
        ASSERT_TRUE(r["correct"].get<bool>()) << r.dump(2);
        ASSERT_TRUE(r.contains("peak_vs_model")) << r["variant"];
        // Within 10% (the first variant also pays for threads' first scratch).
        EXPECT_GE(r["peak_vs_model"].get<double>(), 0.99) << r["variant"];
        EXPECT_LE(r["peak_vs_model"].get<double>(), 1.10) << r["variant"];
        peak[r["variant"]] = r["peak_extra_bytes"].get<double>();
    }
    // By hand: X = 256 x 64 x 4 = 64 KiB per block input. R per block: xn1,
    // q, o, x_mid, xn2 (5 x 64 KiB), k, v (2 x 32 KiB), r1, r2 (2 x 1 KiB),
    // a, b, h (3 x 96 KiB), p (2 x 4 x 128 x 128 x 4 = 512 KiB): 1186 KiB.
    // S = 4 (256 (64 + 2 x 64 + 2 x 32 + 3 x 96) + 2 threads x 128 x 128).
    // G, what selective keeps: q, o, x_mid (3 X), k, v (X), a, b (2 x 96 KiB).
    const double X = 64 * 1024, R = 1186 * 1024, S = 4 * (256 * 544 + 2 * 128 * 128), G = 4 * X + 2 * 96 * 1024;
    const std::map<std::string, double> hand = {
        {"store_all", 8 * X + 8 * R + S},
        {"every_k", 2 * X + (2 * X + 3 * R) + 2 * X + S},  // checkpoints, segment of k = 3, ping-pong
        {"selective", 8 * X + 8 * G + (R - G) + S},
        {"recompute_all", R + 3 * X + S}};
    for (const auto& r : doc["runs"]) {
        const std::string v = r["variant"];
        EXPECT_DOUBLE_EQ(r["memory_model"]["total"].get<double>(), hand.at(v)) << v;
    }
    // selective's recomputed part (R - G) is xn1, xn2, r1, r2, h and p.
    EXPECT_DOUBLE_EQ(R - G, 2 * X + 2 * 1024 + 96 * 1024 + 512 * 1024);
    EXPECT_GT(peak["store_all"] / peak["every_k"], 2.0);
    EXPECT_LT(peak["recompute_all"], peak["every_k"]);
    EXPECT_LT(peak["selective"], peak["store_all"]);
}

TEST(TrainStepOp, BadShapesNameTheirAxis) {
    EXPECT_NE(op().validate(shape(4, 100, 64, 64, 4, 2, 96, 0)).find("tokens = 100"), std::string::npos);
    EXPECT_NE(op().validate(shape(4, 128, 64, 64, 4, 2, 96, 5)).find("every = 5"), std::string::npos);
    EXPECT_NE(op().validate(shape(4, 128, 64, 64, 3, 1, 96, 0)).find("heads"), std::string::npos);
    EXPECT_NE(op().validate(shape(4, 128, 64, 64, 4, 3, 96, 0)).find("kv_heads"), std::string::npos);
    EXPECT_EQ(op().validate(shape(4, 128, 64, 64, 4, 2, 96, 4)), "");
}

}  // namespace
