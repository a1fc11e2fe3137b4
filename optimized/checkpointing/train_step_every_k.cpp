// train_step, checkpointing lever, rung 1: every_k — keep one block input
// per segment of k blocks and rebuild a segment's activations just before
// its backward pass.
//
// Change from rung 0: the forward pass keeps only the inputs of blocks 0, k,
// 2k, ... (the checkpoints; block 0's is the problem's x) and streams
// through the other blocks with one block's activation buffers. The last
// segment is kept whole as it is computed, since its backward comes first;
// every earlier segment is recomputed from its checkpoint — the same
// Block::forward calls on the same inputs, so the same bits — into the k
// activation buffers its backward then reads.
// Expected: activation memory falls from L (X + R) to (ceil(L/k) - 1) X +
// k (X + R), smallest near k = sqrt(L) (R >> X: nearer k = 1 — the sweep
// shows where); the price is one more forward pass over every block outside
// the last segment, about 1/3 of a step's FLOPs at most.
#include <memory>

#include "kernels/model/block_cpu.hpp"
#include "reference/checkpointing/train_step.hpp"

namespace mw::checkpointing {

using model::cpu::Block;
using model::cpu::BlockStore;

// This rung's prepare (reference/checkpointing/train_step.hpp).
Instance prepare_every_k(Problem& p) {
    struct State {
        Block block;
        std::vector<std::vector<float>> ckpt;     // ckpt[s - 1]: the input of segment s's first block
        std::vector<std::vector<float>> seg_x;    // seg_x[j - 1]: the input of the segment's j-th block
        std::vector<BlockStore> seg;              // the segment's activations, one store per block
        std::vector<float> y, tmp;                // the streamed forward's ping-pong, y = the stack's output
        State(const model::Config& c, int B, int T) : block(c, B, T) {}
    };
    const model::Config c = config_of(p.shape);
    const int B = batch_of(p.shape), T = int(p.shape["seq"]), L = c.layers, k = every_of(p.shape);
    const int segments = (L + k - 1) / k;
    auto st = std::make_shared<State>(c, B, T);
    const model::cpu::BlockSizes sz(c, B, T);
    const std::size_t X = std::size_t(p.shape["tokens"]) * std::size_t(c.d_model);
    st->ckpt.assign(std::size_t(segments - 1), std::vector<float>(X));
    st->seg_x.assign(std::size_t(k - 1), std::vector<float>(X));
    for (int j = 0; j < k; ++j) st->seg.emplace_back(sz, true, true);
    st->y.resize(X), st->tmp.resize(X);
    const StepIO io = io_of(p);
    Instance inst;
    inst.run = [st, io, c, L, k, segments] {
        const std::size_t P = model::layer_param_count(c);
        auto W = [&](int l) { return model::bind_layer(c, io.params + l * P); };
        auto start = [&](int s) { return s == 0 ? io.x : st->ckpt[std::size_t(s - 1)].data(); };
        // Segment s's blocks [s k, min(L, (s+1) k)) with their activations in
        // seg[], block inputs in seg_x[]; the last block's output goes to `out`.
        auto build_segment = [&](int s, float* out) {
            const int a = s * k, b = std::min(L, a + k);
            for (int l = a; l < b; ++l) {
                const float* in = l == a ? start(s) : st->seg_x[std::size_t(l - a - 1)].data();
                float* o = l + 1 == b ? out : st->seg_x[std::size_t(l - a)].data();
                st->block.forward(W(l), in, st->seg[std::size_t(l - a)].acts, o);
            }
        };
        auto backward_segment = [&](int s) {
            const int a = s * k, b = std::min(L, a + k);
            for (int l = b - 1; l >= a; --l) {
                const float* in = l == a ? start(s) : st->seg_x[std::size_t(l - a - 1)].data();
                st->block.backward(W(l), model::bind_layer(c, io.dparams + l * P), in, st->seg[std::size_t(l - a)].acts,
                                   io.dx);
            }
        };
        // Forward: stream through the early segments, writing each segment's
        // first input into its checkpoint; the last segment is kept whole.
        const float* cur = io.x;
        for (int l = 0; l < (segments - 1) * k; ++l) {
            float* out = (l + 1) % k == 0 ? st->ckpt[std::size_t((l + 1) / k - 1)].data()
                                          : (cur == st->y.data() ? st->tmp.data() : st->y.data());
            st->block.forward(W(l), cur, st->seg[0].acts, out);
            cur = out;
        }
        build_segment(segments - 1, st->y.data());
        begin_backward(c, st->block.rows(), st->y.data(), io);
        backward_segment(segments - 1);
        for (int s = segments - 2; s >= 0; --s) {
            build_segment(s, st->tmp.data());  // its output is the next checkpoint, already kept
            backward_segment(s);
        }
    };
    return inst;
}

}  // namespace mw::checkpointing

MW_REGISTER_VARIANT(train_step_every_k_cpu, {
    .name = "every_k", .op = "train_step", .lever = "checkpointing",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "one block input per k-block segment kept; each segment rebuilt from it before its backward: "
                 "about one extra forward for ~sqrt(L)x less activation memory",
    .needs = {"avx2"},
    .executed_flops = [](const mw::Shape& s) {
        return mw::checkpointing::executed_flops(s, mw::checkpointing::Rung::every_k);
    },
    .prepare = mw::checkpointing::prepare_every_k,
    .identical_to = "store_all",
    .memory_model = [](const mw::Shape& s) {
        return mw::checkpointing::memory_model(s, mw::checkpointing::Rung::every_k);
    },
});
