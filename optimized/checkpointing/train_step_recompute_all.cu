// train_step on the GPU, rung 3: recompute_all — the CPU's rung 3
// (train_step_recompute_all.cpp) on the GPU block
// (kernels/model/block_cuda.cuh): keep nothing but the stack's input.
//
// Change from rung 0 (reference/checkpointing/train_step.cu): no activation
// and no block input survives the forward pass. Before block l's backward,
// blocks 0..l-1 run again from x to rebuild l's input, then block l once more
// into the one set of activation buffers its backward reads (the last
// block's are still there from the forward pass).
// Expected: one block's activations in device memory whatever the depth, for
// L (L - 1) / 2 extra block forwards (at L = 16, 120 on top of a step's 48
// forward-sized passes): the far end of the trade, where a GPU's memory buys
// depth at several times the step's time.
// Bit-identical to store_all (identical_to): the same calls on the same
// inputs, on buffers of the same alignment.
// Real GPU only (cuBLAS).
#include "harness/cuda/launch.hpp"

#if !MEMWALL_EMU
#include <memory>

#include "harness/cuda/device_problem.hpp"
#include "kernels/model/block_cuda.cuh"
#include "reference/checkpointing/train_step.hpp"

namespace mw::checkpointing {
namespace {

Instance prepare_recompute_all_cuda(Problem& p) {
    struct State {
        model::gpu::DeviceMemory mem;  // destroyed last: everything below points into it
        std::unique_ptr<model::gpu::Block> block;
        model::cpu::BlockActs acts;      // one block's activations
        float *a = nullptr, *b = nullptr;  // the streamed forward's ping-pong
        float* y = nullptr;                // the stack's output, then scratch
    };
    const model::Config c = config_of(p.shape);
    const int B = batch_of(p.shape), T = int(p.shape["seq"]), L = c.layers;
    auto st = std::make_shared<State>();
    st->block = std::make_unique<model::gpu::Block>(c, B, T, st->mem);
    const std::size_t X = std::size_t(p.shape["tokens"]) * std::size_t(c.d_model);
    st->acts = st->mem.acts(model::cpu::BlockSizes(c, B, T));
    st->a = st->mem.take<float>(X), st->b = st->mem.take<float>(X), st->y = st->mem.take<float>(X);
    return cuda::device_instance(
        p,
        [st, c, L, X](cuda::DeviceProblem& d) {
            const std::size_t P = model::layer_param_count(c);
            const float* params = d.in<const float>("params");
            const float* x = d.in<const float>("x");
            const float* dy = d.in<const float>("dy");
            float* dparams = d.out<float>("dparams");
            float* dx = d.out<float>("dx");
            model::gpu::Block& block = *st->block;
            block.bind(d.stream);
            auto W = [&](int l) { return model::bind_layer(c, params + l * P); };
            // The input of block l, rebuilt from x through blocks 0..l-1.
            auto input_of = [&](int l) {
                const float* cur = x;
                for (int j = 0; j < l; ++j) {
                    float* out = cur == st->a ? st->b : st->a;
                    block.forward(W(j), cur, st->acts, out);
                    cur = out;
                }
                return cur;
            };
            const float* last_in = input_of(L - 1);
            block.forward(W(L - 1), last_in, st->acts, st->y);
            model::gpu::begin_backward(st->y, dy, X, d.out<float>("loss"), dparams, std::size_t(L) * P, dx,
                                       d.stream);
            for (int l = L - 1; l >= 0; --l) {
                const float* in = l == L - 1 ? last_in : input_of(l);
                if (l != L - 1) block.forward(W(l), in, st->acts, st->y);
                block.backward(W(l), model::bind_layer(c, dparams + l * P), in, st->acts, dx);
            }
        },
        st->mem.bytes());
}

}  // namespace
}  // namespace mw::checkpointing

MW_REGISTER_VARIANT(train_step_recompute_all_cuda, {
    .name = "recompute_all", .op = "train_step", .lever = "checkpointing",
    .role = mw::Role::optimized, .backend = mw::Backend::cuda, .rung = 3,
    .rationale = "only the stack's input kept in device memory: each block's input rebuilt from it before its "
                 "backward, one block's activations whatever the depth, for L(L-1)/2 extra block forwards",
    .needs = {"gpu"},
    .executed_flops = [](const mw::Shape& s) {
        return mw::checkpointing::executed_flops_cuda(s, mw::checkpointing::Rung::recompute_all);
    },
    .prepare = mw::checkpointing::prepare_recompute_all_cuda,
    .identical_to = "store_all",
    .memory_model = [](const mw::Shape& s) {
        return mw::checkpointing::memory_model_cuda(s, mw::checkpointing::Rung::recompute_all);
    },
});

#endif  // !MEMWALL_EMU
