// speculate, rung 2: early_exit (self-speculative) — the target's first layers draft.
//
// Change from rung 1: no second model. The draft is the target's first half
// of its blocks (2 of 4 for model 0, 1 of 2 for model 1) followed by the
// target's own final norm and tied head, fp32 (an early exit). It costs
// about half a target step per drafted token and needs no extra weights
// (this implementation copies them into the draft's decoder, and keeps the
// draft's keys and values in a cache of its own).
// Expected: the head was trained on the last block's output, not on the
// middle one's, so the early exit agrees with the target less often than
// the INT4 copy (lower alpha) while each draft step costs more (c ~ 0.5):
// E tokens per round for 1 + K/2 target steps; at alpha 0.5, K 2, E 1.75
// for 2 steps, a loss. What it shows: a cheap draft must also be a good
// guesser, and the break-even alpha for a draft of cost c.
#include "reference/speculative/speculate.hpp"

namespace {

int draft_layers(const mw::Shape& s) { return mw::speculative::early_exit_layers(mw::speculative::target_model(s).config); }

}  // namespace

MW_REGISTER_VARIANT(speculate_early_exit_cpu, {
    .name = "early_exit", .op = "speculate", .lever = "speculative",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 2,
    .rationale = "the target's first half of layers with its head drafts (an early exit): no second model, a weaker guesser",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        const auto& c = mw::speculative::target_model(s).config;
        return mw::speculative::speculate_bytes_floor(
            s, 4.0 * double(mw::model::param_count(mw::speculative::first_layers_config(c, draft_layers(s)))));
    },
    .prepare = [](mw::Problem& p) { return mw::speculative::prepare_speculate(p, {.layers = draft_layers(p.shape)}); },
    .identical_to = "target_only" });
