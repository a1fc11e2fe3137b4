// decode_step and generate, KV-cache lever, rung 2: the cache stored in INT8.
//
// Change from rung 1: each position's key and value rows are stored as int8
// with one fp32 scale per (position, kv head) — max|x| / 127, so one large
// token does not coarsen the others — and widened back inside attention's
// chunk step (kernels/kv_cache/attend.hpp). The cache shrinks from 8 to
// 2 + 8 / head_dim bytes per value pair (2.25 at head_dim 32): 3.6x fewer
// bytes for attention to read, and 3.6x more context in the same memory.
// Expected: the step gets faster only where reading the cache from memory is
// a large part of it — a cache larger than the L3, long contexts, large
// batches — and the logits move by the rounding of the cache (the contract
// oracle is the fp64 model with its cache rows rounded the same way; the
// error against the exact model is reported beside it).
// Measured (2-core EPYC, results/epyc-kvm-2c/kv_cache-decode_step.md):
// slower than rung 1 — 1.54 against 0.71 ms at ctx 2048 — because the
// default model's cache (8 MiB at ctx 2048) sits in the L3, where bytes are
// cheap and this rung's widening of every int8 value to fp32 is not. The
// byte saving pays where the cache streams from DRAM: attn_decode's int8
// rung at a 512 MiB cache. generate's 256 tokens through this cache are the
// exact model's tokens.
#include "reference/kv_cache/generate.hpp"

MW_REGISTER_VARIANT(decode_step_cache_int8_cpu, {
    .name = "cache_int8", .op = "decode_step", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 2,
    .rationale = "the cache stored int8 with a scale per position and kv head: 3.6x fewer bytes for attention "
                 "to read",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        const auto& dm = mw::kv_cache::decode_model(int(s["kv_heads"]), int(s["ctx"] + 1));
        const auto& c = dm.config;
        const mw::kv_cache::KvGeometry g{c.layers, c.kv_heads, c.head_dim()};
        return 4.0 * double(dm.params.size()) +
               double(s["batch"]) * double(s["ctx"]) * mw::kv_cache::bytes_per_position(g, mw::kv_cache::Elem::i8);
    },
    .prepare = [](mw::Problem& p) {
        return mw::kv_cache::prepare_decode_step(p, [](const mw::kv_cache::KvGeometry& g, int seqs, int len) {
            return std::make_unique<mw::kv_cache::ContiguousStore>(g, seqs, len, mw::kv_cache::Elem::i8);
        });
    },
    .contract_oracle = mw::kv_cache::decode_step_int8_oracle,
    .tolerance_scale = mw::kv_cache::kInt8CodeFlipSlack });

MW_REGISTER_VARIANT(generate_cache_int8_cpu, {
    .name = "cache_int8", .op = "generate", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 2,
    .rationale = "the cache stored int8 with a scale per position and kv head; tokens checked against the fp64 "
                 "model with its cache rounded the same way",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::kv_cache::generate_bytes(s, mw::kv_cache::Elem::i8); },
    .prepare = [](mw::Problem& p) {
        return mw::kv_cache::prepare_generate(p, [](const mw::kv_cache::KvGeometry& g, int seqs, int len) {
            return std::make_unique<mw::kv_cache::ContiguousStore>(g, seqs, len, mw::kv_cache::Elem::i8);
        });
    },
    .contract_oracle = mw::kv_cache::generate_int8_oracle,
    .tolerance_scale = mw::kv_cache::kInt8CodeFlipSlack });
