// The KV-cache lever: decoding with and without a cache of past keys and
// values. So far one op, on the trained model stack (reference/model/):
//
//   generate: greedy continuation of a prompt by `tokens` tokens
//   (axes prompt, tokens; unit: generated tokens), checked token by token
//   against the fp64 oracle with the token-sequence rule (near-ties counted).
//
// The ladder (CPU), each rung one idea:
//   reference/kv_cache/generate.cpp          rung 0  recompute: each new token runs the whole prefix again
//   optimized/kv_cache/generate_cache.cpp       1  cache: past keys and values kept, one position per step
//
// Run:   memwall run generate            (prompt 64, tokens 192: the model's whole context)
#pragma once

#include <memory>
#include <string>

#include "harness/registry.hpp"
#include "reference/model/checkpoint.hpp"

namespace mw::kv_cache {

// The trained default model (results/model/default.safetensors under the
// source root, or $MEMWALL_MODEL), loaded once. Throws mw::UsageError naming
// the file and the command that makes it when it is missing.
const model::ModelFile& default_model();

// The fixed English text prompts are cut from (its first `prompt` bytes).
extern const char* const kPromptText;

// Counters every rung of generate reports for its last call: time to first
// token, inter-token latency p50/p99 (ms), and the key/value bytes it held.
struct DecodeTimes {
    double ttft_s = 0;
    std::vector<double> itl_s;
    double kv_bytes = 0;
    std::map<std::string, double> counters() const;
};

// FLOPs of one forward pass of the default model over `len` positions.
double forward_flops(std::int64_t len);

}  // namespace mw::kv_cache
