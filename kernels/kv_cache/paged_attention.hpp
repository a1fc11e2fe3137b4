// A paged KV cache on the GPU and the two kernels that use it (vLLM's
// PagedAttention; the kernels are in kernels/kv_cache/paged_attention.cuh):
//
//   kv_append     writes new rows of K and V — one per sequence at decode
//                 time, a prompt's worth at prefill — at each sequence's next
//                 positions, through its block table;
//   paged_decode  one query per sequence and head against the sequence's
//                 cache, read through the block table, the work split over
//                 the cache (flash-decoding) and merged with online softmax.
//
// The layout (all fp32 and int32, row-major):
//   K, V   a pool of pages, [n_pages][kPageSize][kv_heads][hd]: page n holds
//          kPageSize consecutive positions of one sequence, every kv head;
//   table  [b][max_pages]: table[s][i] is the page holding positions
//          i kPageSize .. (i + 1) kPageSize - 1 of sequence s;
//   lens   [b]: how many positions sequence s holds (its queries attend to
//          positions 0 .. lens[s] - 1).
// Position p of sequence s, kv head g, element e is at
//   K[((table[s][p / kPageSize] * kPageSize + p % kPageSize) * kv_heads + g) * hd + e].
// Pages need not be in order or contiguous: that is the point — a sequence
// grows a page at a time from a free list, and no cache is ever copied to
// make room (the allocator is the caller's; the kernels only read tables).
//
// paged_decode's math is attn_decode's (reference/kv_cache/attn_decode.cpp):
// for query head h of sequence s, kv head g = h / (heads / kv_heads),
//   o[s][h] = softmax_j(q[s][h] . K_j / sqrt(hd)) V_j over j < lens[s].
//
// Like kernels/model/elementwise.hpp, this header is what plain C++ sees: the
// layout, and each CUDA backend's launchers as a table of function pointers,
// so the tests can run the kernels on a GPU ("cuda") or on the CPU through
// the emulator ("cuda-emu"). All pointers are device pointers of the
// backend; launches are asynchronous on the default stream.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "harness/registry.hpp"  // mw::Backend

namespace mw::kv_cache {

inline constexpr int kPageSize = 16;  // positions per page
// paged_decode's limits: hd (one to four elements per lane of a warp).
inline constexpr int kPagedMaxHd = 128;

struct PagedKv {
    float* K = nullptr;  // [n_pages][kPageSize][kv_heads][hd]
    float* V = nullptr;
    const std::int32_t* table = nullptr;  // [b][max_pages]
    const std::int32_t* lens = nullptr;   // [b]
    int max_pages = 0, kv_heads = 0, hd = 0;
};

// The same pages holding int8 codes, one fp32 scale per (position, kv head)
// for K and for V ([n_pages][kPageSize][kv_heads]): a row of hd values is
// stored as round(x / s) with s = max|x| / 127 (1 for an all-zero row),
// kv_cache::quantize_row_int8's rule (kernels/kv_cache/attend.hpp), and
// read back as s times the code. (The GPU decoder's int8 cache,
// kernels/model/decode_cuda.cuh; the launchers are in paged_attention.cuh.)
struct PagedKv8 {
    std::int8_t* K = nullptr;  // [n_pages][kPageSize][kv_heads][hd]
    std::int8_t* V = nullptr;
    float* k_scale = nullptr;  // [n_pages][kPageSize][kv_heads]
    float* v_scale = nullptr;
    const std::int32_t* table = nullptr;
    const std::int32_t* lens = nullptr;
    int max_pages = 0, kv_heads = 0, hd = 0;
};

// A block table [b][max_pages] dealing a pool of b x max_pages pages in a
// seeded random order (a free list after churn): no sequence's pages are
// in order or adjacent, so a kernel that ignored the table would read other
// sequences' rows.
inline std::vector<std::int32_t> shuffled_page_table(int b, int max_pages, std::uint64_t seed) {
    std::vector<std::int32_t> t(std::size_t(b) * std::size_t(max_pages));
    std::iota(t.begin(), t.end(), 0);
    std::shuffle(t.begin(), t.end(), std::mt19937_64(seed));
    return t;
}

// Pages per split of paged_decode: each block of the split kernel reads this
// many pages (256 positions) of one sequence and kv head.
inline constexpr int kPagesPerSplit = 16;
inline int paged_splits(int max_pages) { return (max_pages + kPagesPerSplit - 1) / kPagesPerSplit; }
// Floats of paged_decode's workspace: per (sequence, head, split) a max, a
// sum and an unnormalized output row.
inline std::size_t paged_workspace_floats(int b, int heads, int hd, int max_pages) {
    return std::size_t(b) * heads * paged_splits(max_pages) * (2 + std::size_t(hd));
}

struct PagedKernels {
    // Device memory of this backend.
    void* (*alloc)(std::size_t bytes);
    void (*free)(void* p);
    void (*copy_to_device)(void* dst, const void* src, std::size_t bytes);
    void (*copy_to_host)(void* dst, const void* src, std::size_t bytes);
    void (*synchronize)();
    // Rows k_new, v_new [b][count][kv_heads][hd] written at positions
    // start[s] .. start[s] + count - 1 of each sequence s (start: device, [b]);
    // the pages they fall in must already be in the table.
    void (*kv_append)(const PagedKv& kv, const std::int32_t* start, const float* k_new, const float* v_new, int b,
                      int count);
    // q, o [b][heads][hd]; workspace: paged_workspace_floats(...) floats.
    // Throws std::invalid_argument for hd > kPagedMaxHd or heads not a
    // multiple of kv_heads.
    void (*paged_decode)(const PagedKv& kv, const float* q, float* o, int b, int heads, float* workspace);
};

// The launchers of `backend` (cuda or cuda_emu), or nullptr when this binary
// was built without it.
const PagedKernels* paged_kernels(Backend backend);

namespace detail {
// Called once per backend by kernels/kv_cache/paged_attention.cu.
bool register_paged_kernels(Backend backend, const PagedKernels* table);
}  // namespace detail

}  // namespace mw::kv_cache
