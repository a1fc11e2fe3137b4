// attn_decode, KV-cache lever, rung 1: split the cache into blocks, read each
// block once for a whole group of query heads, merge with online softmax
// (flash-decoding's idea on a CPU). (The ladder is listed in
// reference/kv_cache/generate.hpp; the loop is in attn_decode_cpu.hpp, shared
// with rungs 2 and 3.)
//
// Change from rung 0: the work is cut along the cache, not along the heads.
// A task is (sequence, block of 256 positions): for each kv head it loads
// each K row of its block once and dots it with all G = heads / kv_heads
// queries of the group, takes the block's softmax per head (its max m and
// sum s), then loads each V row once for the G weighted sums o. The tasks'
// partial results are merged per head with the online-softmax rescaling
//     M = max_c m_c,  o = sum_c o_c e^(m_c - M) / sum_c s_c e^(m_c - M).
// Expected: the cache crosses the memory bus once instead of G times, so the
// bytes fall by G (4x at the default GQA shape) and the time with them as
// long as the step stays memory-bound (intensity heads / (2 kv_heads) = 2
// FLOP/B, far under this machine's ~7 FLOP/B ridge); and there are b x
// ctx/256 tasks (256 at the default shape) to share however few sequences
// there are — the point of flash-decoding, whose GPU version splits the cache
// to fill the SMs when b x heads is small.
//
// Staying memory-bound takes three things a first version lacked (it reached
// 4-10 GB/s of cache on the machine below, compute- and latency-bound):
//   - scores without a horizontal sum per dot product: a tile of rows x
//     heads accumulates W vectors at once and folds them into one vector of
//     W scores (attn_decode_cpu.hpp);
//   - the G outputs in registers across the whole block, stored once, instead
//     of G rows of o loaded and stored for every V row;
//   - software prefetch one phase ahead into L2: a kv head's rows are
//     kv_heads x hd x 4 bytes apart (4 KiB for GQA 32/8, 16 KiB for MHA), a
//     page each, and the hardware prefetchers stop at pages.
// AVX-512 (16 lanes) or AVX2 (8 lanes), chosen at run time (MEMWALL_ISA=avx2
// forces the fallback); the result's `path` names it.
#include <memory>

#include "optimized/kv_cache/attn_decode_cpu.hpp"
#include "reference/kv_cache/generate.hpp"

namespace mw::kv_cache::cpu {
void decode_f32(const Cache<float>& kv, const float* q, long heads, float* o, Workspace& ws) {
    decode<float>(isa::pick_kernel<detail::task<simd::f16, F32Format>, detail::task<simd::f8, F32Format>>(), kv, q, heads,
                  o, ws);
}

}  // namespace mw::kv_cache::cpu

namespace mw::kv_cache {
namespace {

Instance prepare_split(Problem& p) {
    return cpu::decode_instance<float>(p, {.K = p.in("K").as<float>(), .V = p.in("V").as<float>(), .b = p.shape["b"],
                                           .ctx = p.shape["ctx"], .kv_heads = p.shape["kv_heads"], .hd = p.shape["hd"]});
}

}  // namespace
}  // namespace mw::kv_cache

MW_REGISTER_VARIANT(attn_decode_split_cpu, {
    .name = "split", .op = "attn_decode", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "cache cut into 256-position blocks, each read once for the whole query group (scores as a "
                 "register-tiled product, outputs in registers, rows prefetched a phase ahead), partial "
                 "softmaxes merged: G times fewer bytes, and tasks to spare at batch 1",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::kv_cache::attn_decode_cache_bytes(s); },
    .prepare = mw::kv_cache::prepare_split });
