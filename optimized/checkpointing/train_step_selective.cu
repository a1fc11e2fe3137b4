// train_step on the GPU, rung 2: selective — the CPU's rung 2
// (train_step_selective.cpp) on the GPU block (kernels/model/block_cuda.cuh).
//
// Change from rung 0 (reference/checkpointing/train_step.cu): per block,
// device memory keeps only what the matrix products wrote (q, k, v after
// RoPE, o, x_mid, a, b) and the block's input; the norms, SwiGLU's h and the
// attention probabilities p (heads x T x T per sequence, the largest single
// activation) live in one block's worth of buffers and are rebuilt by
// gpu::Block::recompute_cheap just before each block's backward (the last
// block's are still there from the forward pass).
// Expected: most of every_k's saving for a few percent of the time: the
// rebuild is two RMSNorms, one SwiGLU, the causal softmax and the score
// product S = Q K^T (over the full square on the GPU, as every batched
// product here), where every_k re-runs whole blocks. On a GPU, where device
// memory caps the batch first, p is exactly what grows with T^2.
// Bit-identical to store_all (identical_to): recompute_cheap makes the same
// calls as the forward pass on the same inputs, on buffers of the same
// alignment (each its own cudaMalloc).
// Real GPU only (cuBLAS).
#include "harness/cuda/launch.hpp"

#if !MEMWALL_EMU
#include <memory>
#include <vector>

#include "harness/cuda/device_problem.hpp"
#include "kernels/model/block_cuda.cuh"
#include "reference/checkpointing/train_step.hpp"

namespace mw::checkpointing {
namespace {

Instance prepare_selective_cuda(Problem& p) {
    struct State {
        model::gpu::DeviceMemory mem;  // destroyed last: everything below points into it
        std::unique_ptr<model::gpu::Block> block;
        std::vector<float*> x;                    // x[l]: the input of block l (x[0]: the problem's x); x[L] = y
        std::vector<model::cpu::BlockActs> kept;  // per block: its GEMM outputs
        model::cpu::BlockActs cheap;              // one block's recomputable activations
    };
    const model::Config c = config_of(p.shape);
    const int B = batch_of(p.shape), T = int(p.shape["seq"]), L = c.layers;
    auto st = std::make_shared<State>();
    st->block = std::make_unique<model::gpu::Block>(c, B, T, st->mem);
    const model::cpu::BlockSizes sz(c, B, T);
    const std::size_t X = std::size_t(p.shape["tokens"]) * std::size_t(c.d_model);
    st->x.push_back(nullptr);
    for (int l = 0; l < L; ++l) st->x.push_back(st->mem.take<float>(X)), st->kept.push_back(st->mem.acts(sz, true, false));
    st->cheap = st->mem.acts(sz, false, true);
    return cuda::device_instance(
        p,
        [st, c, L, X](cuda::DeviceProblem& d) {
            const std::size_t P = model::layer_param_count(c);
            const float* params = d.in<const float>("params");
            const float* dy = d.in<const float>("dy");
            float* dparams = d.out<float>("dparams");
            float* dx = d.out<float>("dx");
            model::gpu::Block& block = *st->block;
            block.bind(d.stream);
            st->x[0] = d.in<float>("x");
            auto acts = [&](int l) { return model::cpu::combine(st->kept[std::size_t(l)], st->cheap); };
            for (int l = 0; l < L; ++l)
                block.forward(model::bind_layer(c, params + l * P), st->x[std::size_t(l)], acts(l),
                              st->x[std::size_t(l) + 1]);
            model::gpu::begin_backward(st->x.back(), dy, X, d.out<float>("loss"), dparams, std::size_t(L) * P, dx,
                                       d.stream);
            for (int l = L - 1; l >= 0; --l) {
                const auto W = model::bind_layer(c, params + l * P);
                if (l != L - 1) block.recompute_cheap(W, st->x[std::size_t(l)], acts(l));
                block.backward(W, model::bind_layer(c, dparams + l * P), st->x[std::size_t(l)], acts(l), dx);
            }
        },
        st->mem.bytes());
}

}  // namespace
}  // namespace mw::checkpointing

MW_REGISTER_VARIANT(train_step_selective_cuda, {
    .name = "selective", .op = "train_step", .lever = "checkpointing",
    .role = mw::Role::optimized, .backend = mw::Backend::cuda, .rung = 2,
    .rationale = "GEMM outputs kept in device memory, norms, SwiGLU and attention probabilities recomputed per "
                 "block: most of a segment rebuild's saving for the score product and a few elementwise kernels",
    .needs = {"gpu"},
    .executed_flops = [](const mw::Shape& s) {
        return mw::checkpointing::executed_flops_cuda(s, mw::checkpointing::Rung::selective);
    },
    .prepare = mw::checkpointing::prepare_selective_cuda,
    .identical_to = "store_all",
    .memory_model = [](const mw::Shape& s) {
        return mw::checkpointing::memory_model_cuda(s, mw::checkpointing::Rung::selective);
    },
});

#endif  // !MEMWALL_EMU
