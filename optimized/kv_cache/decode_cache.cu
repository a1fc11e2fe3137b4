// decode_step and generate on the GPU, KV-cache lever, CUDA rungs 1 and 3:
// a cache of past keys and values, contiguous (rung 1) or paged (rung 3).
//
// Change from rung 0 (reference/kv_cache/decode_recompute.cu): the
// prefix's keys and values stay in the cache, so a step feeds only the new
// token through the model (kernels/model/decode_cuda.cuh): per weight matrix
// one GEMV for the whole batch, and attention reads the cache once per
// query group (flash-decoding's split and merge, kernels/kv_cache/
// paged_attention.cuh).
// Rung 1's contiguous slot is a block table that is the identity (sequence
// s owns pages s x max_pages onwards, in order); rung 3 deals the same
// pool's pages in a shuffled order, as a serving engine's free list would
// after churn. The kernels and the order of every sum are the same, so the
// logits are bit-identical (checked: identical_to "cache"), and a page
// lookup per 16 positions costs nothing measurable: on the GPU, paging
// changes how memory is handed out, not the step's time.
// Expected: a step costs one pass of the chain whatever ctx is, except for
// attention's read of the cache (4 KiB per position for the default model);
// at batch 1 the chain's 51 launches, not its bytes, set the time — the
// whole model is 12 MB, microseconds of a GPU's bandwidth — which is what
// the graph rung (optimized/kv_cache/decode_graph.cu) goes after.
#include "reference/kv_cache/decode_cuda.cuh"

namespace {

mw::Instance decode_step(mw::Problem& p, mw::kv_cache::cuda_decode::Layout layout) {
    return mw::kv_cache::cuda_decode::prepare_decode_step(p, layout, mw::kv_cache::cuda_decode::Drive::eager);
}
mw::Instance generate(mw::Problem& p, mw::kv_cache::cuda_decode::Layout layout) {
    return mw::kv_cache::cuda_decode::prepare_generate(p, layout, mw::kv_cache::cuda_decode::Drive::eager);
}

}  // namespace

MW_REGISTER_VARIANT(decode_step_cache_cuda, {
    .name = "cache", .op = "decode_step", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 1,
    .rationale = "past keys and values kept in a slot per sequence: a step feeds the new token alone through the "
                 "model (a GEMV per matrix) and reads the cache once",
    .needs = {"gpu"},
    .prepare = [](mw::Problem& p) { return decode_step(p, mw::kv_cache::cuda_decode::Layout::contiguous); } });

MW_REGISTER_VARIANT(decode_step_paged_cuda, {
    .name = "paged", .op = "decode_step", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 3,
    .rationale = "the cache in 16-position pages of a shared pool, dealt in a shuffled order, read through a "
                 "block table: the same kernels and sums as the contiguous slot",
    .needs = {"gpu"},
    .prepare = [](mw::Problem& p) { return decode_step(p, mw::kv_cache::cuda_decode::Layout::paged); },
    .identical_to = "cache" });

MW_REGISTER_VARIANT(generate_cache_cuda, {
    .name = "cache", .op = "generate", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 1,
    .rationale = "past keys and values kept: each position fed alone through the model, the next token picked "
                 "on the device, no host round trip between steps",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::kv_cache::cuda_decode::cached_generate_bytes(s); },
    .prepare = [](mw::Problem& p) { return generate(p, mw::kv_cache::cuda_decode::Layout::contiguous); } });

MW_REGISTER_VARIANT(generate_paged_cuda, {
    .name = "paged", .op = "generate", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 3,
    .rationale = "the cache in shuffled 16-position pages through a block table: the same tokens as the "
                 "contiguous slot, bit for bit",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::kv_cache::cuda_decode::cached_generate_bytes(s); },
    .prepare = [](mw::Problem& p) { return generate(p, mw::kv_cache::cuda_decode::Layout::paged); },
    .identical_to = "cache" });
