// paged_attn: one decode step's attention read through a block table, the
// KV-cache lever's paged layout on its own (the exercise of level 06).
//
// For each sequence s and query head h (kv head g = h / (heads / kv_heads)):
//     position p of s lives in block block_table[s][p / 16], row p % 16,
//     k_p = K[block][row][g],  v_p = V[block][row][g]   (hd values each),
//     o[s][h] = sum_{p < lens[s]} softmax_p(q[s][h] . k_p / sqrt(hd)) v_p.
// Inputs: q [b][heads][hd] f32, block_table [b][max_blocks] i32, lens [b]
// i32, the pools K and V [n_blocks][16][kv_heads][hd] (f32, or with the
// `int8` flag int8 codes plus K_scale and V_scale [n_blocks][16][kv_heads]
// f32, value = scale * code: one scale per position and kv head, the layout
// of kernels/kv_cache/kv_store.hpp's int8 cache). Output o [b][heads][hd].
//
// The problem maker makes the usual bugs observable: every sequence has its
// own odd length (never a whole number of blocks), the pool's blocks are
// handed out in a shuffled order, the rows past a sequence's length and the
// blocks no sequence owns hold large stale values (what an earlier request
// left there), block-table entries past a sequence's last block name stale
// blocks, and one position per sequence has values far larger than the rest
// (so one scale for a whole int8 pool rounds every other row badly).
#pragma once

#include <cstdint>
#include <vector>

#include "harness/registry.hpp"

namespace mw::kv_cache {

// A paged_attn problem's geometry, from its shape alone (FLOPs and bytes are
// exact): lens[s] = the odd lengths spread evenly from ctx (or ctx - 1) down
// towards 1; b + 1 stale blocks beside the live ones.
struct PagedLayout {
    std::vector<int> lens;
    int max_blocks = 0;   // block table width: blocks of 16 for ctx positions
    int live_blocks = 0;  // blocks the sequences own
    int n_blocks = 0;     // the pool: live + stale
    std::int64_t positions = 0;  // sum of lens
};
PagedLayout paged_layout(const Shape& s);

// The buffers of one call, for the rungs and the exercise's reference
// solution. With int8 the pools are kq/vq with their scales, else kf/vf.
struct PagedArgs {
    const float* q = nullptr;
    const std::int32_t* table = nullptr;
    const std::int32_t* lens = nullptr;
    const float *kf = nullptr, *vf = nullptr;
    const std::int8_t *kq = nullptr, *vq = nullptr;
    const float *ks = nullptr, *vs = nullptr;
    float* o = nullptr;
    int b = 0, heads = 0, kv_heads = 0, hd = 0, max_blocks = 0;
    bool int8 = false;
};
PagedArgs paged_args(Problem& p);

// The blocks rung's work (optimized/kv_cache/paged_attn_blocks.cpp).
void paged_attn_blocks(const PagedArgs& a);

}  // namespace mw::kv_cache
