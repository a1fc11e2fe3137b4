// speculate, rung 1: an INT4 copy of the target drafts.
//
// Change from rung 0: the draft is the target itself with every matrix in
// INT4 (blocks of 32 weights, an fp16 scale each: 4.5 bits per weight; the
// precision lever's quantizer and repacked GEMV, kernels/precision/), so it
// agrees with the target on most greedy tokens (a high acceptance alpha).
// A round drafts K tokens (K passes over the INT4 weights, ~1/7 of the fp32
// bytes) and verifies K + 1 positions in one target pass (one read of the
// fp32 weights for K + 1 rows); rejected positions are rolled back
// (KvStore::truncate).
// Expected: where a decode step is the time to stream the weights (model 1:
// 363 MB from DRAM), a round costs about one target step plus K draft
// steps of c ~ 0.15 target steps each and yields E = (1 - alpha^(K+1)) /
// (1 - alpha) tokens: at alpha 0.9, K 4, E 4.1 for 1.6 steps, ~2.5x. Where
// the weights sit in L3 (model 0) a step is compute, the draft's int8 dot
// products are not 7x cheaper than fp32 FMAs, and verifying K + 1 rows costs
// more than one: the gain shrinks or turns into a loss. Greedy tokens are
// the target's, bit for bit.
#include "reference/speculative/speculate.hpp"

#include "kernels/precision/quant.hpp"

namespace {

const mw::precision::QuantSpec& kInt4 = mw::speculative::kInt4Draft;

double int4_weight_bytes(const mw::Shape& s) {
    const auto& c = mw::speculative::target_model(s).config;
    return double(mw::model::param_count(c)) * mw::precision::effective_bits(kInt4, c.d_model) / 8;
}

}  // namespace

MW_REGISTER_VARIANT(speculate_int4_cpu, {
    .name = "int4", .op = "speculate", .lever = "speculative",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "the target's INT4 copy drafts k tokens, the fp32 target verifies k + 1 positions in one pass over its weights",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::speculative::speculate_bytes_floor(s, int4_weight_bytes(s)); },
    .prepare = [](mw::Problem& p) { return mw::speculative::prepare_speculate(p, {.format = kInt4}); },
    .identical_to = "target_only" });
