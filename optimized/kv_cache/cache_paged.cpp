// decode_step and generate, KV-cache lever, rung 3: a paged cache.
//
// Change from rung 1: no slot is reserved per sequence. Keys and values live
// in blocks of 16 positions taken from one shared pool as a sequence grows
// (kernels/kv_cache/kv_store.hpp's PagedStore over
// kernels/kv_cache/block_allocator.hpp), found through the sequence's block
// table; the prefill interleaves the sequences, so each one's blocks are
// scattered through the pool. Attention reads a block as one chunk of the
// same step a contiguous cache uses, so the logits are bit-identical to
// rung 1's (checked: identical_to "cache").
// Expected: the same time as rung 1 — a block of 16 x 512 bytes per kv head
// is long enough that the indirection costs nothing measurable — and the
// saving is memory, not time: a sequence holds at most one partly filled
// block beyond what it has written, where a contiguous slot holds its whole
// maximum length from the start (the serve op measures what that buys).
#include "reference/kv_cache/generate.hpp"

MW_REGISTER_VARIANT(decode_step_paged_cpu, {
    .name = "paged", .op = "decode_step", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 3,
    .rationale = "blocks of 16 positions from a shared pool through a block table: memory taken as a sequence "
                 "grows, the same arithmetic as the contiguous cache",
    .needs = {"avx2"},
    .prepare = [](mw::Problem& p) {
        return mw::kv_cache::prepare_decode_step(p, [](const mw::kv_cache::KvGeometry& g, int seqs, int len) {
            return std::make_unique<mw::kv_cache::PagedStore>(g, seqs, seqs * mw::kv_cache::blocks_for(len, 16));
        });
    },
    .identical_to = "cache" });

MW_REGISTER_VARIANT(generate_paged_cpu, {
    .name = "paged", .op = "generate", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 3,
    .rationale = "blocks of 16 positions taken as the sequence grows: the same tokens as the contiguous cache, "
                 "bit for bit",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::kv_cache::generate_bytes(s, mw::kv_cache::Elem::f32); },
    .prepare = [](mw::Problem& p) {
        return mw::kv_cache::prepare_generate(p, [](const mw::kv_cache::KvGeometry& g, int seqs, int len) {
            return std::make_unique<mw::kv_cache::PagedStore>(g, seqs, seqs * mw::kv_cache::blocks_for(len, 16));
        });
    },
    .identical_to = "cache" });
