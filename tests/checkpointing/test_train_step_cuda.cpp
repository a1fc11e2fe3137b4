// The checkpointing lever's CUDA rungs of train_step
// (reference/checkpointing/train_step.cu, optimized/checkpointing/
// train_step_{every_k,selective,recompute_all}.cu): cuBLAS inside, so they exist only for the real
// GPU backend and never under the emulator (their kernels are checked under
// the emulator one by one in tests/model_kernels).
//
//   TrainStepCudaRegistry  what is registered for which backend (runs anywhere);
//   TrainStepCudaModel     executed FLOPs and the device memory models by hand (runs anywhere);
//   TrainStepCuda          every rung against the fp64 oracle at odd shapes,
//                          bit for bit store_all's, the declared device
//                          memory: SKIPPED without a GPU, never passed.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <stdexcept>

#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "reference/checkpointing/train_step.hpp"
#include "tests/checkpointing/train_step_cases.hpp"

namespace {

using mw::test::expect_same_bits;
using mw::test::run_checked;
constexpr auto* shape = &mw::test::train_step_shape;
constexpr auto* op = &mw::test::train_step_op;

using mw::checkpointing::Rung;

const mw::Variant* cuda_variant(const std::string& name) {
    for (const auto* v : mw::variants_of("train_step", mw::Backend::cuda))
        if (v->name == name) return v;
    return nullptr;
}

#define MW_GPU_OR_SKIP()                                                                 \
    if (!mw::cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";             \
    if (mw::gpu_count() == 0) GTEST_SKIP() << "no GPU: " << mw::gpu_absent_reason();     \
    for (const char* name : {"store_all", "every_k", "selective", "recompute_all"})      \
    ASSERT_NE(cuda_variant(name), nullptr) << name

TEST(TrainStepCudaRegistry, TheFourRungsForTheGpuOnly) {
    const auto gpu = mw::variants_of("train_step", mw::Backend::cuda);
    if (mw::cuda_backend_built()) {
        ASSERT_EQ(gpu.size(), 4u);
        EXPECT_EQ(gpu[0]->name, "store_all");
        EXPECT_EQ(gpu[0]->role, mw::Role::reference);
        const char* names[] = {"store_all", "every_k", "selective", "recompute_all"};
        for (int r = 1; r < 4; ++r) {
            EXPECT_EQ(gpu[std::size_t(r)]->name, names[r]);
            EXPECT_EQ(gpu[std::size_t(r)]->rung, r);
            EXPECT_EQ(gpu[std::size_t(r)]->identical_to, "store_all");
        }
        for (const auto* v : gpu) EXPECT_TRUE(v->memory_model && v->executed_flops) << v->name;
    } else {
        EXPECT_TRUE(gpu.empty());
    }
}

// FLOPs by hand: the batched products multiply the whole [T, T] square, so a
// block forward costs 2 T (d (qd + 2 kvd) + qd d + 3 d d_ff) + 2 x 2 heads hd T^2.
TEST(TrainStepCudaModel, ExecutedFlopsByHand) {
    const mw::Shape s = shape(16, 512, 256, 256, 8, 4, 704, 4);
    const double T = 256, d = 256, qd = 256, kvd = 128, f = 704, B = 2;
    const double block = B * (2 * T * (d * (qd + 2 * kvd) + qd * d + 3 * d * f) + 4 * 8 * 32 * T * T);
    EXPECT_NEAR(mw::checkpointing::executed_flops_cuda(s, Rung::store_all), 48 * block, 1e-9 * 48 * block);
    EXPECT_NEAR(mw::checkpointing::executed_flops_cuda(s, Rung::every_k), 60 * block, 1e-9 * 60 * block);
    // selective: + the score product Q K^T over the square, 2 x 8 heads x 32 hd x T^2
    // per sequence, for every block but the last; recompute_all: + 16 x 15 / 2 block forwards.
    EXPECT_NEAR(mw::checkpointing::executed_flops_cuda(s, Rung::selective), 48 * block + 15 * B * 2 * 8 * 32 * T * T,
                1e-9 * 48 * block);
    EXPECT_NEAR(mw::checkpointing::executed_flops_cuda(s, Rung::recompute_all), 168 * block, 1e-9 * 168 * block);
}

// Device memory by hand at L 8, 2 x 128 tokens, d 64, 4 heads / 2 kv heads, d_ff 96, k 3.
double total(const std::map<std::string, double>& m) {
    double t = 0;
    for (const auto& [k, v] : m) t += v;
    return t;
}
TEST(TrainStepCudaModel, DeviceMemoryByHand) {
    const mw::Shape s = shape(8, 256, 128, 64, 4, 2, 96, 3);
    // X, R as in tests/checkpointing/test_train_step.cpp. Params per block:
    // 2 x 64 gains + 64 x 64 (wq) + 2 x 64 x 32 (wk, wv) + 64 x 64 (wo) + 3 x 64 x 96.
    const double X = 64 * 1024, R = 1186 * 1024, P = 4.0 * 8 * (128 + 4096 + 4096 + 4096 + 18432);
    // Scratch: 256 rows x (2 d + 2 qd + 2 kvd + 3 d_ff) floats, dS [2, 4, 128, 128],
    // 256 positions, 8 inverse frequencies, 32 MiB of cuBLAS workspace.
    const double S = 4.0 * (256 * 608 + 2 * 4 * 128 * 128 + 256 + 8) + 32.0 * 1024 * 1024;
    const double copies = 3 * X + 2 * P + 4;
    EXPECT_DOUBLE_EQ(total(mw::checkpointing::memory_model_cuda(s, Rung::store_all)), 8 * X + 8 * R + S + copies);
    EXPECT_DOUBLE_EQ(total(mw::checkpointing::memory_model_cuda(s, Rung::every_k)),
                     2 * X + (2 * X + 3 * R) + 2 * X + S + copies);
    // GEMM outputs per block: 256 rows x (q 64 + k 32 + v 32 + o 64 + x_mid 64 + a 96 + b 96) floats.
    const double G = 4.0 * 256 * 448;
    EXPECT_DOUBLE_EQ(total(mw::checkpointing::memory_model_cuda(s, Rung::selective)),
                     8 * X + 8 * G + (R - G) + S + copies);
    EXPECT_DOUBLE_EQ(total(mw::checkpointing::memory_model_cuda(s, Rung::recompute_all)), R + 3 * X + S + copies);
}

class TrainStepCuda : public ::testing::TestWithParam<mw::Shape> {};

TEST_P(TrainStepCuda, EveryRungMatchesTheOracleAndStoreAllsBits) {
    MW_GPU_OR_SKIP();
    mw::Problem p = op().make_problem(GetParam(), mw::DType::f32, 5);
    ASSERT_EQ(op().validate(GetParam()), "");
    const auto oracle = op().oracle(p);
    const auto want = run_checked(*cuda_variant("store_all"), p, oracle);
    expect_same_bits(run_checked(*cuda_variant("store_all"), p, oracle), want, "store_all again");
    for (const char* name : {"every_k", "selective", "recompute_all"})
        expect_same_bits(run_checked(*cuda_variant(name), p, oracle), want, std::string(name) + " at " + GetParam().str());
}

// The declared device memory (Instance::workspace_bytes: the rung's
// allocations plus the problem's device copies) is the memory model's total.
TEST_P(TrainStepCuda, DeclaredDeviceMemoryIsTheModel) {
    MW_GPU_OR_SKIP();
    mw::Problem p = op().make_problem(GetParam(), mw::DType::f32, 5);
    for (const char* name : {"store_all", "every_k", "selective", "recompute_all"}) {
        const mw::Variant& v = *cuda_variant(name);
        const mw::Instance inst = v.prepare(p);
        EXPECT_DOUBLE_EQ(double(inst.workspace_bytes), total(v.memory_model(p.shape))) << name;
    }
}

INSTANTIATE_TEST_SUITE_P(OddShapesFirst, TrainStepCuda,
                         ::testing::Values(shape(1, 1, 1, 2, 1, 1, 1, 0),      // one token, one block
                                           shape(3, 7, 7, 8, 2, 1, 7, 2),      // MQA; segments of 2 + 1
                                           shape(5, 66, 33, 16, 4, 2, 33, 2),  // GQA, two sequences, 2 + 2 + 1
                                           shape(4, 254, 127, 24, 6, 3, 24, 1),
                                           shape(7, 129, 129, 32, 4, 4, 40, 3)),  // MHA; T past a 128-thread row
                         mw::test::shape_test_name);

// Every segment length from 1 to L gives store_all's bits.
TEST(TrainStepCudaSweep, EveryKFromOneToLIsBitIdentical) {
    MW_GPU_OR_SKIP();
    mw::Problem p0 = op().make_problem(shape(6, 40, 20, 16, 4, 2, 24, 1), mw::DType::f32, 9);
    const auto oracle = op().oracle(p0);
    const auto want = run_checked(*cuda_variant("store_all"), p0, oracle);
    for (long k = 1; k <= 6; ++k) {
        mw::Problem p = op().make_problem(shape(6, 40, 20, 16, 4, 2, 24, k), mw::DType::f32, 9);
        expect_same_bits(run_checked(*cuda_variant("every_k"), p, oracle), want, "every_k with k = " + std::to_string(k));
    }
}

}  // namespace
