// Speculative decoding's loop over the model stack's decoder (Speculator),
// used by the speculative lever's rungs (reference/speculative/,
// optimized/speculative/) and its tests. The acceptance rule it applies is
// kernels/speculative/rule.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/model/model_cpu.hpp"
#include "kernels/speculative/rule.hpp"

namespace mw::speculative {

// What a generation did, summed over its sequences and rounds.
struct Counts {
    std::int64_t rounds = 0;         // sequence-rounds (one sequence, one verify)
    std::int64_t target_passes = 0;  // target decoder steps (each covers the batch)
    std::int64_t draft_passes = 0;   // draft decoder steps
    std::int64_t drafted = 0, accepted = 0, rejected = 0;  // draft tokens proposed / kept / refused
    std::int64_t emitted = 0;        // tokens produced by rounds (prefill excluded)
    double draft_s = 0, verify_s = 0, total_s = 0, prefill_s = 0;
};

// The decoding loop: `target` (and `draft`, or none: plain decoding, one
// target pass per token) each decode B sequences through their own
// contiguous KV stores. A round, for every unfinished sequence at once:
//   draft:  K steps of the draft, each one row per sequence (the first also
//           feeds what the draft has not seen yet: after a round where all
//           K were accepted, the last draft and the bonus token);
//   verify: one step of the target over the K + 1 positions of every
//           sequence (B (K + 1) rows: one read of the target's weights);
//   decide: accept_round per sequence; both caches rolled back
//           (KvStore::truncate) to the positions whose tokens were kept.
// temperature 0 is greedy (one-hot distributions, the first maximum, as
// the target alone decodes); otherwise softmax(z / temperature) over the
// top_k logits (all when 0), as kernels/model/sampling.hpp.
struct SpecOptions {
    int K = 4;
    double temperature = 0;
    int top_k = 0;
    std::uint64_t seed = 1;
};

class Speculator {
public:
    // The decoders' configs must share the vocabulary; the parameters must
    // outlive the Speculator (the decoders point into them); max_len bounds
    // prompt + tokens + K + 1 positions (their RoPE tables must reach it).
    Speculator(const model::Config& target_cfg, const float* target_params, precision::QuantSpec target_fmt,
               const model::Config* draft_cfg, const float* draft_params, precision::QuantSpec draft_fmt, int batch,
               int max_len);
    ~Speculator();
    // prompts [B][P]; out [B][n_new]. Counts of this call in *counts.
    void generate(const int* prompts, int P, int n_new, int* out, const SpecOptions& o, Counts* counts);
    // The decision step, replaceable (level 07's exercise plugs a
    // student's function in here).
    void set_round(RoundFn f) { round_ = f; }
    // One target step of one row per sequence, timed best of `reps` (the
    // plain decoder's cost per token at this batch), and the same for the
    // draft: the measured costs `memwall calc speculative` takes.
    double time_target_step(int reps);
    double time_draft_step(int reps);
    double target_weight_bytes() const;
    double draft_weight_bytes() const;
    bool has_draft() const { return bool(draft_); }
    // The decoders, for what their steps record (Decoder::free_cores); the draft may be null.
    const model::cpu::Decoder& target() const { return *target_; }
    const model::cpu::Decoder* draft() const { return draft_.get(); }

private:
    int B_, max_len_;
    model::Config tc_, dc_;
    std::unique_ptr<kv_cache::KvStore> tstore_, dstore_;
    std::unique_ptr<model::cpu::Decoder> target_, draft_;
    RoundFn round_ = speculative_round;
};

// The self-speculative draft: the first `layers` blocks of (c, params) with
// the same final norm and tied head (a config and a parameter copy).
model::Config first_layers_config(const model::Config& c, int layers);
std::vector<float> first_layers_params(const model::Config& c, const float* params, int layers);
// How many: half the target's blocks (at least one), the early_exit rung's.
inline int early_exit_layers(const model::Config& c) { return c.layers / 2 > 0 ? c.layers / 2 : 1; }

// The int4 rung's draft: the target's own weights in INT4, groups of 32.
inline const precision::QuantSpec kInt4Draft{precision::Format::int4, 32, false};

// A draft for the target (c, params), by the name of its rung: "int4" (the
// target in INT4), "early_exit" (its first half of layers, a copy), or
// "small" (a model of its own: small_cfg and small_params, which must
// outlive the draft). std::invalid_argument for another name.
inline const std::vector<std::string> kDraftKinds = {"small", "int4", "early_exit"};
struct Draft {
    model::Config config;
    const float* params = nullptr;
    std::vector<float> own;  // early_exit's copy (params points into it)
    precision::QuantSpec format;
};
Draft make_draft(const std::string& kind, const model::Config& c, const float* params,
                 const model::Config* small_cfg = nullptr, const float* small_params = nullptr);

}  // namespace mw::speculative
