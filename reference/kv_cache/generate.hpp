// The KV-cache lever: decoding with and without a cache of past keys and
// values. So far two ops:
//
//   generate: greedy continuation of a prompt by `tokens` tokens with the
//   trained model stack (reference/model/); axes prompt, tokens; unit:
//   generated tokens; checked token by token against the fp64 oracle with
//   the token-sequence rule (near-ties counted).
//   attn_decode: one new query per sequence and head against a long cache
//   (axes b, heads, kv_heads, ctx, hd): the step that reads the cache, and
//   what MHA / GQA / MQA change (kv_heads = heads / fewer / 1).
//
// The ladders (CPU), each rung one idea:
//   reference/kv_cache/generate.cpp            rung 0  recompute: each new token runs the whole prefix again
//   optimized/kv_cache/generate_cache.cpp         1  cache: past keys and values kept, one position per step
//   reference/kv_cache/attn_decode.cpp         rung 0  naive: per query head, three sweeps over its cache
//   optimized/kv_cache/attn_decode_split.cpp      1  split: KV blocks over threads, one read per group, online-softmax merge
//
// Run:   memwall run generate            (prompt 64, tokens 192: the model's whole context)
//        memwall run attn_decode --cold  (a 512 MiB cache: GQA 32 query heads on 8 key/value heads)
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

// attn_decode: bytes of the K and V cache, read once (8 b ctx kv_heads hd).
double attn_decode_cache_bytes(const Shape& s);

// FLOPs of one forward pass of the default model over `len` positions.
double forward_flops(std::int64_t len);

}  // namespace mw::kv_cache
