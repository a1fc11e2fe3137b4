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
    auto upload = [&](const mw::Buffer& b) {
        float* d = mem.take<float>(b.count);
        MW_CUDA_CHECK(cudaMemcpy(d, b.data.get(), b.size_bytes(), cudaMemcpyHostToDevice));
        return d;
    };
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
    mw::model::kernels::dot(x[L], dy, loss, std::int64_t(X), nullptr);
    MW_CUDA_CHECK(cudaMemset(dparams, 0, L * P * sizeof(float)));
    MW_CUDA_CHECK(cudaMemcpy(dx, dy, X * sizeof(float), cudaMemcpyDeviceToDevice));
    for (int l = L - 1; l >= 0; --l)
        block.backward(mw::model::bind_layer(c, params + l * P), mw::model::bind_layer(c, dparams + l * P), x[l],
                       acts[l], dx);
    for (auto [name, from] : {std::pair{"loss", (const float*)loss}, {"dparams", dparams}, {"dx", dx}})
        MW_CUDA_CHECK(cudaMemcpy(p.out(name).data.get(), from, p.out(name).size_bytes(), cudaMemcpyDeviceToHost));
    const auto r = mw::check_problem(op(), p, oracle);
    EXPECT_TRUE(r.ok) << GetParam().str() << ": " << r.message;
#endif
}

INSTANTIATE_TEST_SUITE_P(OddShapesFirst, TrainStepBlockEmu,
                         ::testing::Values(shape(1, 1, 1, 2, 1, 1, 1, 0),      // one token, one block
                                           shape(2, 7, 7, 8, 2, 1, 7, 0),      // MQA
                                           shape(2, 66, 33, 16, 4, 2, 33, 0),  // GQA, two sequences
                                           shape(1, 129, 129, 16, 2, 2, 24, 0)),  // MHA; T past a 128-thread row
                         mw::test::shape_test_name);

}  // namespace
