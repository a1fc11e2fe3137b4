// The KV-cache lever: decoding with and without a cache of past keys and
// values, and how that cache is laid out. Ops:
//
//   decode_step: one decode step of the trained model for `batch` sequences
//   at context length ctx (axes ctx, batch, kv_heads); unit: tokens; checked
//   against the fp64 model's logits.
//   generate: greedy continuation of a prompt by `tokens` tokens with the
//   trained model stack (model/); axes prompt, tokens; unit:
//   generated tokens; checked token by token against the fp64 oracle with
//   the token-sequence rule (near-ties counted).
//   attn_decode: one new query per sequence and head against a long cache
//   (axes b, heads, kv_heads, ctx, hd; window and sinks for rung 3 only):
//   the step that reads the cache, and what MHA / GQA / MQA change
//   (kv_heads = heads / fewer / 1), an int8 cache, and a window.
//   serve: a seeded trace of requests decoded by the trained model on a
//   fixed KV-memory budget (axes requests, mean_len, max_len, budget_mib,
//   shared, gap, seed; reference/kv_cache/serve.hpp states the trace);
//   unit: generated tokens; checked per request like generate; counters:
//   the admitted batch, KV bytes reserved and wasted, tokens/s, TTFT, ITL.
//   paged_attn: the same step read through a block table from a shared pool
//   of 16-position blocks, fp32 or int8 (axes b, heads, kv_heads, hd, ctx,
//   int8): level 06's exercise (reference/kv_cache/paged_attn.hpp).
//
// The ladders (CPU), each rung one idea:
//   reference/kv_cache/decode_step.cpp, generate.cpp   rung 0  recompute: each step reruns the whole prefix
//   optimized/kv_cache/cache_contiguous.cpp               1  cache: keys and values kept in a slot per sequence
//   optimized/kv_cache/cache_int8.cpp                     2  cache_int8: the cache in int8, a scale per position and head
//   optimized/kv_cache/cache_paged.cpp                    3  paged: blocks of 16 positions from a shared pool
//   reference/kv_cache/attn_decode.cpp                 rung 0  naive: per query head, three sweeps over its cache
//   optimized/kv_cache/attn_decode_split.cpp              1  split: KV blocks over threads, one read per group,
//                                                            online-softmax merge; register-tiled scores, outputs
//                                                            in registers, rows prefetched into L2 a phase ahead
//   optimized/kv_cache/attn_decode_int8.cpp               2  int8: rung 1 on an int8 cache, a scale per (position,
//                                                            kv head) of K and of V: 3.9x fewer bytes at hd 128
//                                                            (contract: attention over the dequantized cache)
//   optimized/kv_cache/attn_decode_sliding.cpp            3  sliding: only the last `window` positions (a ring
//                                                            buffer) and the first `sinks`: bytes bounded by
//                                                            window + sinks, not ctx (contract: attention over them)
//   reference/kv_cache/serve.cpp                       rung 0  static: slots of max_len, a new batch when the whole last one ends
//   optimized/kv_cache/serve_continuous.cpp               1  continuous_paged: admitted when its blocks are free, shared prefix
//   reference/kv_cache/paged_attn.cpp                  rung 0  naive: per query head, gather its rows through the table, three sweeps
//   optimized/kv_cache/paged_attn_blocks.cpp              1  blocks: a block is one chunk of attend's step, shared by the group
// (CUDA)
//   optimized/kv_cache/attn_decode_paged.cu          rung 0  paged: the cache in 16-position pages through a block
//                                                            table, flash-decoding split + merge; kv_append fills
//                                                            the pages (kernels/kv_cache/paged_attention.cuh)
//   decode_step and generate, on the GPU decoder (kernels/model/decode_cuda.cuh; host side
//   reference/kv_cache/decode_cuda.cuh):
//   reference/kv_cache/decode_recompute.cu           rung 0  recompute: every position fed again, a step each
//   optimized/kv_cache/decode_cache.cu                  1  cache: a slot per sequence (the identity block table)
//   optimized/kv_cache/decode_cache_int8.cu             2  cache_int8: the slot's values int8, a scale per row
//   optimized/kv_cache/decode_cache.cu                  3  paged: the same pool's pages shuffled
//   optimized/kv_cache/decode_graph.cu                  4  graph: the cached step's launches replayed from one
//                                                            CUDA graph
// The cache layouts and their attention step have one home each:
// kernels/kv_cache/kv_store.hpp (contiguous, int8, paged), attend.hpp (the
// chunk step every layout runs), block_allocator.hpp (the paged pool).
//
// Run:   memwall run decode_step --shape ctx=128 --shape ctx=2048
//        memwall run generate            (prompt 16, 256 new tokens)
//        memwall run attn_decode --cold  (a 512 MiB cache: GQA 32 query heads on 8 key/value heads)
//        memwall run attn_decode --cold --shape kv_heads=32 --shape kv_heads=8 --shape kv_heads=1   (MHA, GQA, MQA)
//        memwall run attn_decode --backend cuda        (cuda-emu: --backend cuda-emu --quick)
//        memwall run serve               (64 requests, mean/max length 500/4096, 64 MiB of KV cache)
//        memwall run paged_attn --shape int8=1
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/registry.hpp"
#include "kernels/kv_cache/kv_store.hpp"
#include "model/checkpoint.hpp"

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

// The model a decode op runs at up to `max_pos` positions: the trained
// default model's config with max_seq raised to max_pos (RoPE is computed
// for any position; past the trained 256 the model extrapolates), and its
// weights — or, when kv_heads differs from the trained model's, a seeded
// random model of the same shape with that many kv heads (decode_step's
// kv_heads axis: the cost, not the text, is what it measures). Cached.
struct DecodeModel {
    model::Config config;
    std::vector<float> params;
    bool trained = true;
};
const DecodeModel& decode_model(int kv_heads, int max_pos);

// The cache layouts of the cached rungs (kernels/kv_cache/kv_store.hpp),
// for `seqs` sequences of up to max_len positions each.
using StoreMaker = std::function<std::unique_ptr<KvStore>(const KvGeometry&, int seqs, int max_len)>;
// decode_step's cached rungs (optimized/kv_cache/cache_contiguous.cpp):
// the ctx-position prefix of every sequence written into the store in
// prepare() (untimed: a prefill), then each call decodes position ctx of
// every sequence in one step (rewriting that position: calls repeat).
Instance prepare_decode_step(Problem& p, const StoreMaker& make);
// generate's cached rungs (optimized/kv_cache/cache_contiguous.cpp), and
// the bytes they move: every weight once per step, each step's cache read.
Instance prepare_generate(Problem& p, const StoreMaker& make);
double generate_bytes(const Shape& s, Elem e);
// The int8 KV cache's contract for the fp64 oracle (RefCache::round): each
// kv head's row rounded as ContiguousStore stores it (per position and head,
// scale max|x| / 127, from the row rounded to fp32) and widened back.
void round_kv_int8(double* row, int kv_heads, int hd);
// generate's model for a shape (decode_model at prompt + tokens positions),
// and its greedy oracle with the cache rows rounded by round_kv_int8.
const DecodeModel& generate_model_for(const Shape& s);
std::vector<std::vector<double>> generate_int8_oracle(const Problem& p);
// decode_step's oracle with the cache rows rounded by round_kv_int8.
std::vector<std::vector<double>> decode_step_int8_oracle(const Problem& p);
// The int8 rungs' tolerance_scale (CPU: optimized/kv_cache/cache_int8.cpp;
// GPU: decode_cache_int8.cu). The contract oracle rounds each cached row
// from the fp64 model's keys and values, a rung from its fp32 ones: where a
// value sits within fp32 rounding of a code boundary the two round it one
// code apart (1/254 of the row's range), which moves a logit by more than
// fp32 arithmetic does. Seen on the test shapes: up to 2.4x the fp32
// tolerance; 8x allows a few such flips in one step and is still ~30x below
// the cache's rounding error against the exact model (error_vs_exact in the
// results).
inline constexpr double kInt8CodeFlipSlack = 8.0;

// attn_decode: bytes of the K and V cache, read once (8 b ctx kv_heads hd).
double attn_decode_cache_bytes(const Shape& s);
// The int8 cache (rung 2): one byte per element plus one fp32 scale per row
// (sequence, position, kv head) for K and for V: 2 b ctx kv_heads (hd + 4).
double attn_decode_int8_cache_bytes(const Shape& s);
// The sliding rung's rows per (sequence, kv head): the `sinks` first
// positions and the `window` last, min(ctx, sinks + window); its bytes
// 8 b kv_heads hd times that.
std::int64_t attn_decode_window_rows(const Shape& s);
double attn_decode_window_bytes(const Shape& s);
// Whether position j of a cache of ctx is one the sliding rung attends:
// j < sinks or j >= ctx - window.
bool in_window(std::int64_t j, std::int64_t ctx, std::int64_t window, std::int64_t sinks);

// attn_decode in fp64 over the positions j with keep(j) (all when keep is
// empty), K and V either the problem's fp32 rows or int8 rows with one scale
// each (K8/V8 non-null: dequantized here, scale * q): the op's oracle and the
// lossy rungs' contract oracles. Returns o [b][heads][hd].
struct ExactCache {
    const float *K = nullptr, *V = nullptr;
    const std::int8_t *K8 = nullptr, *V8 = nullptr;
    const float *k_scale = nullptr, *v_scale = nullptr;
};
std::vector<double> attn_decode_exact(const Shape& s, const float* q, const ExactCache& kv,
                                      const std::function<bool(std::int64_t)>& keep = {});

// FLOPs of one forward pass of the default model over `len` positions.
double forward_flops(std::int64_t len);

}  // namespace mw::kv_cache
