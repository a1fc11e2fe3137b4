// train_step on the GPU, rung 1: every_k — the CPU's rung 1
// (train_step_every_k.cpp) on the GPU block (kernels/model/block_cuda.cuh).
//
// Change from rung 0 (reference/checkpointing/train_step.cu): device memory
// keeps only the inputs of blocks 0, k, 2k, ... and one segment's k blocks of
// activations; the forward pass streams through the early segments with one
// block's buffers, and each segment but the last is rebuilt from its
// checkpoint just before its backward pass.
// Expected: activation memory falls from L (X + R) to (ceil(L/k) - 1) X +
// k (X + R) (k = round(sqrt(L)) by default; R >> X, dominated by the
// [B, heads, T, T] probabilities, puts the optimum nearer k = 1); the price is
// one more forward over every block outside the last segment, at most ~1/3
// of the step's FLOPs — on a GPU, memory is what bounds the batch, so the
// trade buys a larger batch or a deeper model on the same card.
// Bit-identical to store_all on a GPU (identical_to): the same cuBLAS calls
// with the same shapes on the same handle, stream and fixed workspace, and
// the same fixed-order kernels, on buffers of the same alignment.
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

Instance prepare_every_k_cuda(Problem& p) {
    struct State {
        model::gpu::DeviceMemory mem;  // destroyed last: everything below points into it
        std::unique_ptr<model::gpu::Block> block;
        std::vector<float*> ckpt;                // ckpt[s - 1]: the input of segment s's first block
        std::vector<float*> seg_x;               // seg_x[j - 1]: the input of the segment's j-th block
        std::vector<model::cpu::BlockActs> seg;  // the segment's activations, one set per block
        float *y = nullptr, *tmp = nullptr;      // the streamed forward's ping-pong, y = the stack's output
    };
    const model::Config c = config_of(p.shape);
    const int B = batch_of(p.shape), T = int(p.shape["seq"]), L = c.layers, k = every_of(p.shape);
    const int segments = (L + k - 1) / k;
    auto st = std::make_shared<State>();
    st->block = std::make_unique<model::gpu::Block>(c, B, T, st->mem);
    const model::cpu::BlockSizes sz(c, B, T);
    const std::size_t X = std::size_t(p.shape["tokens"]) * std::size_t(c.d_model);
    for (int s = 1; s < segments; ++s) st->ckpt.push_back(st->mem.take<float>(X));
    for (int j = 1; j < k; ++j) st->seg_x.push_back(st->mem.take<float>(X));
    for (int j = 0; j < k; ++j) st->seg.push_back(st->mem.acts(sz));
    st->y = st->mem.take<float>(X), st->tmp = st->mem.take<float>(X);
    return cuda::device_instance(
        p,
        [st, c, L, k, segments, X](cuda::DeviceProblem& d) {
            const std::size_t P = model::layer_param_count(c);
            const float* params = d.in<const float>("params");
            const float* x = d.in<const float>("x");
            const float* dy = d.in<const float>("dy");
            float* dparams = d.out<float>("dparams");
            float* dx = d.out<float>("dx");
            model::gpu::Block& block = *st->block;
            block.bind(d.stream);
            auto W = [&](int l) { return model::bind_layer(c, params + l * P); };
            auto start = [&](int s) { return s == 0 ? x : st->ckpt[std::size_t(s - 1)]; };
            auto input = [&](int s, int l) { return l == s * k ? start(s) : st->seg_x[std::size_t(l - s * k - 1)]; };
            // Segment s's blocks [s k, min(L, (s+1) k)), activations in seg[],
            // block inputs in seg_x[]; the last block's output goes to `out`.
            auto build_segment = [&](int s, float* out) {
                const int a = s * k, b = std::min(L, a + k);
                for (int l = a; l < b; ++l)
                    block.forward(W(l), input(s, l), st->seg[std::size_t(l - a)],
                                  l + 1 == b ? out : st->seg_x[std::size_t(l - a)]);
            };
            auto backward_segment = [&](int s) {
                const int a = s * k, b = std::min(L, a + k);
                for (int l = b - 1; l >= a; --l)
                    block.backward(W(l), model::bind_layer(c, dparams + l * P), input(s, l), st->seg[std::size_t(l - a)],
                                   dx);
            };
            // Forward: stream through the early segments, each segment's
            // first input written to its checkpoint; the last segment kept whole.
            const float* cur = x;
            for (int l = 0; l < (segments - 1) * k; ++l) {
                float* out = (l + 1) % k == 0 ? st->ckpt[std::size_t((l + 1) / k - 1)]
                                              : (cur == st->y ? st->tmp : st->y);
                block.forward(W(l), cur, st->seg[0], out);
                cur = out;
            }
            build_segment(segments - 1, st->y);
            model::gpu::begin_backward(st->y, dy, X, d.out<float>("loss"), dparams, std::size_t(L) * P, dx,
                                       d.stream);
            backward_segment(segments - 1);
            for (int s = segments - 2; s >= 0; --s) {
                build_segment(s, st->tmp);  // its output is the next checkpoint, already kept
                backward_segment(s);
            }
        },
        st->mem.bytes());
}

}  // namespace
}  // namespace mw::checkpointing

MW_REGISTER_VARIANT(train_step_every_k_cuda, {
    .name = "every_k", .op = "train_step", .lever = "checkpointing",
    .role = mw::Role::optimized, .backend = mw::Backend::cuda, .rung = 1,
    .rationale = "one block input per k-block segment kept in device memory; each segment rebuilt before its "
                 "backward: about one extra forward for ~sqrt(L)x less activation memory",
    .needs = {"gpu"},
    .executed_flops = [](const mw::Shape& s) {
        return mw::checkpointing::executed_flops_cuda(s, mw::checkpointing::Rung::every_k);
    },
    .prepare = mw::checkpointing::prepare_every_k_cuda,
    .identical_to = "store_all",
    .memory_model = [](const mw::Shape& s) {
        return mw::checkpointing::memory_model_cuda(s, mw::checkpointing::Rung::every_k);
    },
});

#endif  // !MEMWALL_EMU
