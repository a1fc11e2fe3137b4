// The speculative-decoding lever: a cheap draft model proposes K tokens, the
// target checks them all in one pass over K + 1 positions (one read of its
// weights), and a rejection rule keeps the target's own output distribution.
// Ops:
//
//   speculate: greedy continuation of `batch` prompts by `tokens` tokens,
//   by the target alone or with a draft (axes model, batch, prompt, tokens,
//   k). model 0: the trained default model (results/model/default.safetensors,
//   12 MB of weights: fits this machine's L3, decode is compute-bound);
//   model 1: the same model widened function-preservingly
//   (model::widen_params: the same logits, w^2 the bytes) by the smallest
//   power of two w (up to 8) that puts its fp32 weights at >= 4x the L3 the
//   OS reports: 4x, 190 MB, with a 32 MiB L3; 8x, 757 MB, with a 300 MiB
//   L3 (the cap: 2.4x that L3); every decode step streams
//   them from DRAM, and every draft has a language model's acceptance rate.
//   Unit: generated tokens; checked against the fp64 model's greedy tokens
//   (token-sequence rule), and every speculative rung bit-identical to
//   target_only (greedy speculation changes the cost, never a token).
//   Counters: drafted, accepted, alpha, target passes, tokens per pass,
//   draft and verify time, and the `speculative` formula's prediction
//   (commands/claims/formulas.hpp) from the measured alpha and step costs.
//   accept: the acceptance rule alone, on seeded Markov chains of v tokens
//   (target and draft transition tables; axes v, k, samples, steps): the
//   first two tokens of `samples` generations at temperature 1, checked with
//   the distribution rule against the target chain's law, and `steps`
//   greedy tokens on position-dependent chains, checked exactly against the
//   target alone (reference/speculative/chain.hpp). Level 07's exercise.
//
// The ladders (CPU), each rung one idea:
//   reference/speculative/speculate.cpp               rung 0  target_only: one target pass per token (KV cache)
//   optimized/speculative/speculate_int4.cpp             1  int4: the target's INT4 copy (g32) drafts K tokens,
//                                                           the target verifies K + 1 in one pass
//   optimized/speculative/speculate_early_exit.cpp       2  early_exit: the target's first half of layers and its
//                                                           head draft (no second model to store)
//   optimized/speculative/speculate_small.cpp            3  small: a 26x smaller model trained on the same
//                                                           corpus drafts (results/model/draft-small.safetensors)
//   reference/speculative/accept.cpp                  rung 0  rejection: accept min(1, p/q), else resample
//                                                           from the normalized (p - q)+
// The rule and the loop have one home each: kernels/speculative/rule.hpp
// (accept_round, speculative_round), kernels/speculative/speculate.hpp
// (Speculator); caches are the KV-cache
// lever's stores, rolled back with KvStore::truncate.
//
// Run:   memwall run speculate --shape model=1,batch=1,prompt=16,tokens=64,k=4
//        memwall run speculate --shape model=0,batch=1,prompt=16,tokens=128,k=4
//        memwall run accept
#pragma once

#include <cstdint>
#include <vector>

#include "harness/registry.hpp"
#include "kernels/speculative/speculate.hpp"
#include "model/checkpoint.hpp"

namespace mw::speculative {

// The target of a speculate shape: the trained model (model 0) or its
// widening (model 1), its context raised to prompt + tokens + k + 1.
struct TargetModel {
    model::Config config;
    const std::vector<float>* params = nullptr;  // shared by every max_seq
    int widening = 1;
};
// Model 1's widening factor for the trained model `trained` on a machine
// whose L3 is `l3_bytes`: the smallest of 2, 4, 8 whose fp32 weights are
// >= 4x the L3 (8 when none is; 4 when the L3 is unknown).
int memory_bound_widening(const model::Config& trained, double l3_bytes);
const TargetModel& target_model(const Shape& s);
int max_len(const Shape& s);

// A speculate rung's instance: a Speculator with the given draft (none for
// target_only), generating every call; counters as above.
struct DraftSpec {
    bool none = false;
    precision::QuantSpec format;  // the draft's weights (int4 for rung 1)
    int layers = 0;               // > 0: the target's first `layers` blocks (rung 2)
    const model::Config* model = nullptr;      // set: a model of its own (rung 3), fp32
    const std::vector<float>* params = nullptr;
};
Instance prepare_speculate(Problem& p, const DraftSpec& d);
// Bytes when every draft is accepted (the floor): tokens / (k + 1) target
// passes and k tokens / (k + 1) draft steps, each reading its weights once.
double speculate_bytes_floor(const Shape& s, double draft_weight_bytes);

}  // namespace mw::speculative
