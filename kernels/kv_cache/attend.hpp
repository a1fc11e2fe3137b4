// Decode attention's inner step, one home for every cache layout of the
// KV-cache lever (contiguous fp32, contiguous int8, paged): the G query heads
// that share one kv head read a chunk of at most kAttnChunk cached positions
// (keys and values) and fold it into a running online softmax,
//     s_j = q . k_j,   M' = max(M, max_j s_j),   L' = L e^(M - M') + sum_j e^(s_j - M'),
//     acc' = acc e^(M - M') + sum_j e^(s_j - M') v_j,      o = acc / L at the end.
// q arrives pre-scaled by 1/sqrt(hd). Each key row is dotted with all G
// queries while it is in L1, so a group of G heads reads its cache once
// (grouped-query attention's saving), and a paged cache's block of 16
// positions is exactly one chunk. Every layout calls the same function on
// the same chunks (positions 16c .. 16c+15), so a paged cache reproduces a
// contiguous one bit for bit.
//
// AVX-512 (16 lanes) or AVX2 (8 lanes) when hd is a multiple of the width,
// chosen at run time (MEMWALL_ISA=avx2 forces the fallback); plain loops
// otherwise.
#pragma once

#include <cstdint>
#include <functional>

namespace mw::kv_cache {

constexpr int kAttnChunk = 16;  // positions per chunk: a paged block
constexpr int kMaxGroup = 64;   // query heads per kv head this kernel takes

// Rows of fp32 keys and values: row j at k + j * stride (hd values each).
struct F32Rows {
    const float* k;
    const float* v;
    std::int64_t stride;
};
// Rows of int8 with one fp32 scale per row (value = scale * q): row j at
// k + j * stride, its scale at ks[j * sstride].
struct I8Rows {
    const std::int8_t* k;
    const std::int8_t* v;
    const float* ks;
    const float* vs;
    std::int64_t stride, sstride;
};

// o[G][hd]: the G queries q[G][hd] (pre-scaled) attending over `len`
// positions, read as chunks c = 0, 1, ... of positions [16c, 16c + 16):
// chunk(c) returns where that chunk's rows are (a contiguous cache's rows
// 16c.., a paged cache's block table entry c). Throws std::invalid_argument
// for G outside 1..kMaxGroup or len < 1.
using F32Chunks = std::function<F32Rows(int c)>;
using I8Chunks = std::function<I8Rows(int c)>;
void attend_group(const float* q, int G, int hd, int len, const F32Chunks& chunk, float* o);
void attend_group(const float* q, int G, int hd, int len, const I8Chunks& chunk, float* o);

// Symmetric int8 of one row of n values: scale = max|x| / 127 (1 for an
// all-zero row), q = round(x / scale) — the per-token, per-head scale of an
// INT8 KV cache. Returns the scale.
float quantize_row_int8(const float* x, int n, std::int8_t* q);

}  // namespace mw::kv_cache
