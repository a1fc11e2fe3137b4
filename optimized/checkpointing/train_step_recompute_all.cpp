// train_step, checkpointing lever, rung 3: recompute_all — keep nothing but
// the stack's input (the limit of the memory-time curve).
//
// Change from rung 0: no activation and no block input survives the forward
// pass. Before block l's backward, blocks 0..l-1 run again from the input to
// rebuild l's input, then block l runs once more into the one set of
// activation buffers its backward reads (the last block's are still there
// from the forward pass). Same calls on the same inputs: the same bits.
// Expected: activation memory of one block whatever L, for L (L - 1) / 2
// extra block forwards — at L = 16, 120 where a step does 48 forward-sized
// passes: the step takes several times longer. It marks the far end of the
// trade every_k and selective sit between.
#include <memory>

#include "kernels/model/block_cpu.hpp"
#include "reference/checkpointing/train_step.hpp"

namespace mw::checkpointing {
namespace {

using model::cpu::Block;
using model::cpu::BlockStore;

Instance prepare_recompute_all(Problem& p) {
    struct State {
        Block block;
        BlockStore acts;        // one block's activations
        std::vector<float> a, b, y;  // the streamed forward's ping-pong; y: the stack's output, then scratch
        State(const model::Config& c, int B, int T) : block(c, B, T) {}
    };
    const model::Config c = config_of(p.shape);
    const int B = batch_of(p.shape), T = int(p.shape["seq"]), L = c.layers;
    auto st = std::make_shared<State>(c, B, T);
    const std::size_t X = std::size_t(p.shape["tokens"]) * std::size_t(c.d_model);
    st->acts = BlockStore(model::cpu::BlockSizes(c, B, T), true, true);
    st->a.resize(X), st->b.resize(X), st->y.resize(X);
    const StepIO io = io_of(p);
    Instance inst;
    inst.run = [st, io, c, L] {
        const std::size_t P = model::layer_param_count(c);
        auto W = [&](int l) { return model::bind_layer(c, io.params + l * P); };
        // The input of block l, rebuilt from x through blocks 0..l-1.
        auto input_of = [&](int l) {
            const float* cur = io.x;
            for (int j = 0; j < l; ++j) {
                float* out = cur == st->a.data() ? st->b.data() : st->a.data();
                st->block.forward(W(j), cur, st->acts.acts, out);
                cur = out;
            }
            return cur;
        };
        const float* last_in = input_of(L - 1);
        st->block.forward(W(L - 1), last_in, st->acts.acts, st->y.data());
        begin_backward(c, st->block.rows(), st->y.data(), io);
        for (int l = L - 1; l >= 0; --l) {
            const float* in = l == L - 1 ? last_in : input_of(l);
            if (l != L - 1) st->block.forward(W(l), in, st->acts.acts, st->y.data());
            st->block.backward(W(l), model::bind_layer(c, io.dparams + l * P), in, st->acts.acts, io.dx);
        }
    };
    return inst;
}

}  // namespace
}  // namespace mw::checkpointing

MW_REGISTER_VARIANT(train_step_recompute_all_cpu, {
    .name = "recompute_all", .op = "train_step", .lever = "checkpointing",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 3,
    .rationale = "only the stack's input kept: each block's input rebuilt from it before its backward, one block's "
                 "activations whatever the depth, for L(L-1)/2 extra block forwards",
    .needs = {"avx2"},
    .executed_flops = [](const mw::Shape& s) {
        return mw::checkpointing::executed_flops(s, mw::checkpointing::Rung::recompute_all);
    },
    .prepare = mw::checkpointing::prepare_recompute_all,
    .identical_to = "store_all",
    .memory_model = [](const mw::Shape& s) {
        return mw::checkpointing::memory_model(s, mw::checkpointing::Rung::recompute_all);
    },
});
