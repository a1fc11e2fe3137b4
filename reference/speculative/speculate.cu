// speculate on the GPU, speculative lever, CUDA rung 0: target_only.
//
// The CPU's rung 0 (reference/speculative/speculate.cpp) on the GPU decoder:
// the target decodes alone, one step per token through its cache, in the
// same loop as the speculative rung (reference/speculative/
// speculate_cuda.cuh, K = 0: a round verifies one position), so the two
// differ only in what speculation adds. One sequence.
// Expected: a step reads every weight once (12 MB for model 0, in a big
// GPU's L2 after the first step; model 1 streams from HBM), but at batch 1
// its 51 launches and the round's copy and sync of one int back to the
// host set its time, not the bytes: speculation pays here by cutting the
// number of rounds, each of them this expensive.
#include "reference/speculative/speculate_cuda.cuh"

MW_REGISTER_VARIANT(speculate_target_only_cuda, {
    .name = "target_only", .op = "speculate", .lever = "speculative",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "the target alone through its cache on the GPU decoder: one step, and one host round trip, per "
                 "generated token",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * double(mw::model::param_count(mw::speculative::target_model(s).config)) * double(s["tokens"]);
    },
    .prepare = [](mw::Problem& p) { return mw::speculative::cuda::prepare(p, false); },
    .accepts = mw::speculative::cuda::accepts });
