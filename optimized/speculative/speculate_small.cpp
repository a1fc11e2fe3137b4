// speculate, rung 3: a small model trained on the same corpus drafts.
//
// Change from rung 2: the draft is a model of its own, trained by `memwall
// train` on the same fortunes (results/model/draft-small.safetensors:
// d_model 64, 2 layers, 4 heads on 2 kv heads, d_ff 192 — 0.115 M
// parameters, 0.46 MB, 26x fewer than the trained target; 600 steps, 6 min on
// this machine: results/epyc-kvm-2c/train-draft-small.json). A draft step
// costs little (c ~ 0.1 of the trained target's, far less of the wide
// target's); it shares only the byte vocabulary with the target.
// Expected: alpha is what a 26x smaller model of the same text agrees on,
// well below the INT4 copy's, and the same for both targets (model 1 is
// model 0's function, widened); the speedup is not: in L3 a round's K
// draft steps and its verify pass cost more than the tokens it saves, from
// DRAM the draft is nearly free. Measured (2-core Xeon,
// results/xeon-kvm-2c/speculative-speculate.md, batch 1, K 4): alpha
// 0.55 against both; 0.70x the target alone in L3, 1.24x from DRAM.
// Greedy tokens stay the target's.
// The draft model's file and loading: model/checkpoint.hpp (draft_small),
// which `memwall generate --speculative small` uses too.
#include "harness/registry.hpp"
#include "model/checkpoint.hpp"
#include "reference/speculative/speculate.hpp"

MW_REGISTER_VARIANT(speculate_small_cpu, {
    .name = "small", .op = "speculate", .lever = "speculative",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 3,
    .rationale = "a 26x smaller model trained on the same corpus drafts: cheap steps, an independent guesser",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        return mw::speculative::speculate_bytes_floor(s, 4.0 * double(mw::model::draft_small().params.size()));
    },
    .prepare = [](mw::Problem& p) {
        const auto& d = mw::model::draft_small();
        return mw::speculative::prepare_speculate(p, {.model = &d.config, .params = &d.params});
    },
    .identical_to = "target_only" });
