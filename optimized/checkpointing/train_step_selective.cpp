// train_step, checkpointing lever, rung 2: selective — keep what the matrix
// multiplications produced, recompute what is cheap.
//
// Change from rung 0: per block, only the GEMM outputs and the residual sum
// are kept (q, k, v after RoPE, o, x_mid, a, b: BlockSizes::gemm_outputs());
// the norms (xn1, xn2 and their 1/rms), SwiGLU's h and the attention
// probabilities p — the largest single activation, heads x T x T per
// sequence — share one block's worth of buffers and are rebuilt just before
// each block's backward by Block::recompute_cheap: the same calls as the
// forward pass, so the same bits. The last block's are still there from the
// forward pass and are not rebuilt.
// Expected: activation memory falls by the cheap part of every block but one
// (for the default model at T = 256, p is ~1/3 of a block's activations and
// the rest of the cheap part ~1/6) while the extra work is two norms, one
// SwiGLU and the q k^T scores per block — a few percent of a step, not the
// third that every_k's full forward costs.
#include <memory>

#include "kernels/model/block_cpu.hpp"
#include "reference/checkpointing/train_step.hpp"

namespace mw::checkpointing {
namespace {

using model::cpu::Block;
using model::cpu::BlockStore;

Instance prepare_selective(Problem& p) {
    struct State {
        Block block;
        std::vector<std::vector<float>> x;  // x[l]: the input of block l (x[0] unused: the problem's x); x[L] = y
        std::vector<BlockStore> kept;       // per block: its GEMM outputs
        BlockStore cheap;                   // one block's recomputable activations
        State(const model::Config& c, int B, int T) : block(c, B, T) {}
    };
    const model::Config c = config_of(p.shape);
    const int B = batch_of(p.shape), T = int(p.shape["seq"]), L = c.layers;
    auto st = std::make_shared<State>(c, B, T);
    const model::cpu::BlockSizes sz(c, B, T);
    const std::size_t X = std::size_t(p.shape["tokens"]) * std::size_t(c.d_model);
    for (int l = 0; l < L; ++l) st->x.emplace_back(l == 0 ? 0 : X), st->kept.emplace_back(sz, true, false);
    st->x.emplace_back(X);
    st->cheap = BlockStore(sz, false, true);
    const StepIO io = io_of(p);
    Instance inst;
    inst.run = [st, io, c, L] {
        const std::size_t P = model::layer_param_count(c);
        auto in = [&](int l) { return l == 0 ? io.x : st->x[std::size_t(l)].data(); };
        auto acts = [&](int l) { return model::cpu::combine(st->kept[std::size_t(l)].acts, st->cheap.acts); };
        for (int l = 0; l < L; ++l)
            st->block.forward(model::bind_layer(c, io.params + l * P), in(l), acts(l), st->x[std::size_t(l) + 1].data());
        begin_backward(c, st->block.rows(), st->x.back().data(), io);
        for (int l = L - 1; l >= 0; --l) {
            const auto W = model::bind_layer(c, io.params + l * P);
            if (l != L - 1) st->block.recompute_cheap(W, in(l), acts(l));
            st->block.backward(W, model::bind_layer(c, io.dparams + l * P), in(l), acts(l), io.dx);
        }
    };
    return inst;
}

}  // namespace
}  // namespace mw::checkpointing

MW_REGISTER_VARIANT(train_step_selective_cpu, {
    .name = "selective", .op = "train_step", .lever = "checkpointing",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 2,
    .rationale = "GEMM outputs kept, norms, SwiGLU and attention probabilities recomputed per block: most of the "
                 "memory saving of a segment rebuild for a few percent of the time",
    .needs = {"avx2"},
    .executed_flops = [](const mw::Shape& s) {
        return mw::checkpointing::executed_flops(s, mw::checkpointing::Rung::selective);
    },
    .prepare = mw::checkpointing::prepare_selective,
    .identical_to = "store_all",
    .memory_model = [](const mw::Shape& s) {
        return mw::checkpointing::memory_model(s, mw::checkpointing::Rung::selective);
    },
});
