// The GPU block of the CUDA train_step rungs (kernels/model/block_cuda.cuh)
// run under cuda-emu, its cuBLAS calls answered by the loop-based stand-in in
// tests/checkpointing/fake_cublas/ (written from cuBLAS's column-major
// definition, not from the block): a stack of blocks, forward, loss and
// backward, against the op's fp64 oracle at odd shapes (one token, MQA, GQA,
// MHA, T past a 128-thread row). It checks what no GPU-less machine could
// otherwise: the row-major mapping of every product, its leading dimensions
// and strides, GQA's kv head per query head, the residual and norm gradients.
// cuBLAS's own algorithms and bits are the GPU suite's business
// (test_train_step_cuda.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "harness/cuda/launch.hpp"  // cuda_emu's runtime: test targets build with MEMWALL_EMU=1 when the emulator is built
#include "harness/registry.hpp"
#include "reference/checkpointing/train_step.hpp"
#include "tests/checkpointing/train_step_cases.hpp"

#if MEMWALL_EMU
#include "kernels/model/block_cuda.cuh"
#endif

namespace {

constexpr auto* shape = &mw::test::train_step_shape;
constexpr auto* op = &mw::test::train_step_op;

class TrainStepBlockEmu : public ::testing::TestWithParam<mw::Shape> {};

#if MEMWALL_EMU
// A problem's buffer, copied into device memory taken from `mem`.
float* upload_to(mw::model::gpu::DeviceMemory& mem, const mw::Buffer& b) {
    float* d = mem.take<float>(b.count);
    MW_CUDA_CHECK(cudaMemcpy(d, b.data.get(), b.size_bytes(), cudaMemcpyHostToDevice));
    return d;
}
#endif

TEST_P(TrainStepBlockEmu, StoreAllStackMatchesTheOracle) {
#if !MEMWALL_EMU
    GTEST_SKIP() << "the emulator is not built";
#else
    namespace gpu = mw::model::gpu;
    mw::Problem p = op().make_problem(GetParam(), mw::DType::f32, 5);
    const auto oracle = op().oracle(p);
    const mw::model::Config c = mw::checkpointing::config_of(p.shape);
    const int B = mw::checkpointing::batch_of(p.shape), T = int(p.shape["seq"]), L = c.layers;
    const std::size_t X = std::size_t(p.shape["tokens"]) * c.d_model, P = mw::model::layer_param_count(c);

    gpu::DeviceMemory mem;
    gpu::Block block(c, B, T, mem);
    block.bind(nullptr);
    auto upload = [&](const mw::Buffer& b) { return upload_to(mem, b); };
    const float *params = upload(p.in("params")), *dy = upload(p.in("dy"));
    float *loss = mem.take<float>(1), *dparams = mem.take<float>(L * P), *dx = mem.take<float>(X);
    std::vector<float*> x = {upload(p.in("x"))};
    std::vector<mw::model::cpu::BlockActs> acts;
    const mw::model::cpu::BlockSizes sz(c, B, T);
    for (int l = 0; l < L; ++l) {
        acts.push_back(mem.acts(sz));
        x.push_back(mem.take<float>(X));
        block.forward(mw::model::bind_layer(c, params + l * P), x[l], acts[l], x[l + 1]);
    }
    gpu::begin_backward(x[L], dy, X, loss, dparams, L * P, dx, nullptr);
    for (int l = L - 1; l >= 0; --l)
        block.backward(mw::model::bind_layer(c, params + l * P), mw::model::bind_layer(c, dparams + l * P), x[l],
                       acts[l], dx);
    for (auto [name, from] : {std::pair{"loss", (const float*)loss}, {"dparams", dparams}, {"dx", dx}})
        MW_CUDA_CHECK(cudaMemcpy(p.out(name).data.get(), from, p.out(name).size_bytes(), cudaMemcpyDeviceToHost));
    const auto r = mw::check_problem(op(), p, oracle);
    EXPECT_TRUE(r.ok) << GetParam().str() << ": " << r.message;
#endif
}

// What the selective and recompute_all CUDA rungs rely on, under the
// emulator: a block's cheap activations rebuilt by recompute_cheap from its
// GEMM outputs (DeviceMemory::acts split in two, joined by combine), and a
// block re-run into one shared set of activations, give store_all's
// gradients bit for bit.
TEST_P(TrainStepBlockEmu, RecomputedActivationsGiveStoreAllsBits) {
#if !MEMWALL_EMU
    GTEST_SKIP() << "the emulator is not built";
#else
    namespace gpu = mw::model::gpu;
    mw::Problem p = op().make_problem(GetParam(), mw::DType::f32, 7);
    const mw::model::Config c = mw::checkpointing::config_of(p.shape);
    const int B = mw::checkpointing::batch_of(p.shape), T = int(p.shape["seq"]), L = c.layers;
    const std::size_t X = std::size_t(p.shape["tokens"]) * c.d_model, P = mw::model::layer_param_count(c);
    const mw::model::cpu::BlockSizes sz(c, B, T);
    gpu::DeviceMemory mem;
    gpu::Block block(c, B, T, mem);
    block.bind(nullptr);
    auto upload = [&](const mw::Buffer& b) { return upload_to(mem, b); };
    const float *params = upload(p.in("params")), *x0 = upload(p.in("x"));
    auto W = [&](int l) { return mw::model::bind_layer(c, params + l * P); };
    std::vector<float*> x = {const_cast<float*>(x0)};
    for (int l = 0; l < L; ++l) x.push_back(mem.take<float>(X));
    const mw::model::cpu::BlockActs full = mem.acts(sz), kept = mem.acts(sz, true, false),
                                    cheap = mem.acts(sz, false, true);
    EXPECT_EQ(kept.p, nullptr);
    EXPECT_EQ(cheap.q, nullptr);
    const mw::model::cpu::BlockActs split = mw::model::cpu::combine(kept, cheap);
    // Per (strategy, block): the dx and dparams of the block's backward from
    // the same upstream gradient, read back to the host.
    auto backward_of = [&](int l, const mw::model::cpu::BlockActs& A) {
        float* dx = mem.take<float>(X);
        float* g = mem.take<float>(P);
        MW_CUDA_CHECK(cudaMemcpy(dx, p.in("dy").data.get(), X * sizeof(float), cudaMemcpyHostToDevice));
        MW_CUDA_CHECK(cudaMemset(g, 0, P * sizeof(float)));
        block.backward(W(l), mw::model::bind_layer(c, g), x[l], A, dx);
        std::vector<float> out(X + P);
        MW_CUDA_CHECK(cudaMemcpy(out.data(), dx, X * sizeof(float), cudaMemcpyDeviceToHost));
        MW_CUDA_CHECK(cudaMemcpy(out.data() + X, g, P * sizeof(float), cudaMemcpyDeviceToHost));
        return out;
    };
    for (int l = 0; l < L; ++l) block.forward(W(l), x[l], full, x[l + 1]);
    const std::vector<float> last = backward_of(L - 1, full);
    for (int l = 0; l < L; ++l) {
        block.forward(W(l), x[l], full, x[l + 1]);  // store_all's activations of block l
        const std::vector<float> want = backward_of(l, full);
        block.forward(W(l), x[l], split, x[l + 1]);  // selective: GEMM outputs kept ...
        for (auto [ptr, n] : {std::pair{cheap.xn1, sz.xn1}, {cheap.r1, sz.r1}, {cheap.p, sz.p}, {cheap.xn2, sz.xn2},
                              {cheap.r2, sz.r2}, {cheap.h, sz.h}})
            MW_CUDA_CHECK(cudaMemset(ptr, 0xff, n * sizeof(float)));  // ... the cheap ones lost (NaN) ...
        block.recompute_cheap(W(l), x[l], split);  // ... and rebuilt
        const std::vector<float> got = backward_of(l, split);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "selective, block " << l;
    }
    EXPECT_EQ(std::memcmp(last.data(), backward_of(L - 1, full).data(), last.size() * sizeof(float)), 0)
        << "a block re-run into the shared activations (recompute_all)";
#endif
}

INSTANTIATE_TEST_SUITE_P(OddShapesFirst, TrainStepBlockEmu,
                         ::testing::Values(shape(1, 1, 1, 2, 1, 1, 1, 0),      // one token, one block
                                           shape(2, 7, 7, 8, 2, 1, 7, 0),      // MQA
                                           shape(2, 66, 33, 16, 4, 2, 33, 0),  // GQA, two sequences
                                           shape(1, 129, 129, 16, 2, 2, 24, 0)),  // MHA; T past a 128-thread row
                         mw::test::shape_test_name);

}  // namespace
