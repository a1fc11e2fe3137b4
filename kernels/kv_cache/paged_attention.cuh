// CUDA kernels of the paged KV cache (layout and math: kernels/kv_cache/
// paged_attention.hpp). Compiled by nvcc (backend "cuda") and by the host
// compiler through the emulator ("cuda-emu") from this one source:
// optimized/kv_cache/attn_decode_paged.cu runs them as attn_decode's CUDA
// rung, kernels/kv_cache/paged_attention.cu publishes them for the tests.
// Everything sits in an unnamed namespace (as in harness/cuda/
// device_problem.hpp): each translation unit gets its own copy.
//
// kv_append: one block per (new row, sequence), threads over the row's
// kv_heads x hd floats: the page is looked up once per row, and the row is
// one contiguous run inside its page. The int8 pages (PagedKv8): a warp per
// kv head, which needs its row's max|x| before it can write a code.
//
// paged_decode, flash-decoding's two kernels:
//   split  grid (splits, kv_heads x head chunks, b): a block reads
//          kPagesPerSplit pages of one sequence and kv head once for up to
//          kHeadsPerBlock query heads of its group. Its 4 warps take the
//          positions in turn; a warp loads a K row (one to four floats per
//          lane, 512 contiguous bytes at hd 128), dots it with each head's
//          query (a warp-shuffle sum), and updates that head's running max
//          m, sum l and output row (online softmax, in registers), then
//          merges with the other warps through shared memory and writes one
//          partial (m, l, o) per head and split;
//   merge  one block per (sequence, head): o = sum_c o_c e^(m_c - M) /
//          sum_c l_c e^(m_c - M), M = max_c m_c.
// Splitting along the cache is what fills the GPU at decode: b x heads query
// rows are far too few blocks for a hundred SMs (4 x 32 = 128 at the default
// shape), b x kv_heads x ctx / 256 blocks are not (2048).
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>

#include "harness/cuda/device_problem.hpp"  // mw::launch, MW_LAUNCH_BOUNDS
#include "kernels/cuda/warp.hpp"
#include "kernels/kv_cache/paged_attention.hpp"

namespace mw::kv_cache::paged {
namespace {

constexpr int kWarps = 4;          // warps per block of the split kernel
constexpr int kHeadsPerBlock = 8;  // query heads one split block serves
constexpr int kPerLane = kPagedMaxHd / 32;

__global__ void kv_append_kernel(PagedKv kv, const int* start, const float* k_new, const float* v_new, int count) {
    const int s = blockIdx.y, t = blockIdx.x, pos = start[s] + t, row = kv.kv_heads * kv.hd;
    const long dst = (long(kv.table[long(s) * kv.max_pages + pos / kPageSize]) * kPageSize + pos % kPageSize) * row;
    const long src = (long(s) * count + t) * row;
    for (int e = threadIdx.x; e < row; e += blockDim.x) {
        kv.K[dst + e] = k_new[src + e];
        kv.V[dst + e] = v_new[src + e];
    }
}

// The int8 pages' append: a warp per kv head (warps take heads in turn), its
// row's max|x| by a warp reduction, then each lane's codes and lane 0's scale.
__device__ __forceinline__ void quantize_head_row(const float* x, int hd, std::int8_t* q, float* scale, int lane) {
    float amax = 0.0f;
    for (int e = lane; e < hd; e += 32) amax = fmaxf(amax, fabsf(x[e]));
    amax = mw::warp::warp_max(amax);
    const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
    for (int e = lane; e < hd; e += 32) q[e] = std::int8_t(__float2int_rn(fminf(fmaxf(x[e] / s, -127.0f), 127.0f)));
    if (lane == 0) *scale = s;
}

__global__ void kv_append8_kernel(PagedKv8 kv, const int* start, const float* k_new, const float* v_new, int count) {
    const int s = blockIdx.y, t = blockIdx.x, pos = start[s] + t, row = kv.kv_heads * kv.hd;
    const long slot = long(kv.table[long(s) * kv.max_pages + pos / kPageSize]) * kPageSize + pos % kPageSize;
    const long src = (long(s) * count + t) * row;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int g = warp; g < kv.kv_heads; g += warps) {
        const long head_row = slot * kv.kv_heads + g;
        quantize_head_row(k_new + src + long(g) * kv.hd, kv.hd, kv.K + head_row * kv.hd, kv.k_scale + head_row, lane);
        quantize_head_row(v_new + src + long(g) * kv.hd, kv.hd, kv.V + head_row * kv.hd, kv.v_scale + head_row, lane);
    }
}

// Element e of a head's row (head_row = (page slot) x kv_heads + kv head)
// of each layout, as fp32.
__device__ __forceinline__ float key_at(const PagedKv& kv, long, long i) { return kv.K[i]; }
__device__ __forceinline__ float value_at(const PagedKv& kv, long, long i) { return kv.V[i]; }
__device__ __forceinline__ float key_at(const PagedKv8& kv, long head_row, long i) {
    return kv.k_scale[head_row] * float(kv.K[i]);
}
__device__ __forceinline__ float value_at(const PagedKv8& kv, long head_row, long i) {
    return kv.v_scale[head_row] * float(kv.V[i]);
}

// Partials: m, l [b][heads][splits], o [b][heads][splits][hd]. KV: PagedKv
// or PagedKv8 (key_at, value_at).
template <class KV>
__global__ void MW_LAUNCH_BOUNDS(kWarps * 32)
    paged_split_kernel(KV kv, const float* q, int heads, int splits, float* part_m, float* part_l, float* part_o) {
    __shared__ float sm[kWarps][kHeadsPerBlock], sl[kWarps][kHeadsPerBlock];
    __shared__ float so[kWarps][kHeadsPerBlock][kPagedMaxHd];
    const int c = blockIdx.x, s = blockIdx.z, hd = kv.hd;
    const int G = heads / kv.kv_heads, chunks = (G + kHeadsPerBlock - 1) / kHeadsPerBlock;
    const int g = blockIdx.y / chunks, h0 = g * G + (blockIdx.y % chunks) * kHeadsPerBlock;
    const int nh = min(kHeadsPerBlock, (g + 1) * G - h0);  // the block's heads: h0 .. h0 + nh - 1
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const float scale = 1.0f / sqrtf(float(hd));

    float qr[kHeadsPerBlock][kPerLane], acc[kHeadsPerBlock][kPerLane], m[kHeadsPerBlock], l[kHeadsPerBlock];
#pragma unroll
    for (int i = 0; i < kHeadsPerBlock; ++i) {
        m[i] = -INFINITY, l[i] = 0;
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) {
            const int e = lane + 32 * k;
            qr[i][k] = i < nh && e < hd ? q[(long(s) * heads + h0 + i) * hd + e] * scale : 0.0f;
            acc[i][k] = 0;
        }
    }
    const int first = c * kPagesPerSplit * kPageSize, end = min(kv.lens[s], first + kPagesPerSplit * kPageSize);
    for (int p = first + warp; p < end; p += kWarps) {
        const long page = kv.table[long(s) * kv.max_pages + p / kPageSize];
        const long head_row = (page * kPageSize + p % kPageSize) * kv.kv_heads + g, row = head_row * hd;
        float kx[kPerLane], vx[kPerLane];
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) {
            const int e = lane + 32 * k;
            kx[k] = e < hd ? key_at(kv, head_row, row + e) : 0.0f;
            vx[k] = e < hd ? value_at(kv, head_row, row + e) : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < kHeadsPerBlock; ++i) {
            if (i >= nh) break;  // the same for every lane: no divergence around the shuffles
            float d = 0;
#pragma unroll
            for (int k = 0; k < kPerLane; ++k) d += qr[i][k] * kx[k];
            d = mw::warp::warp_sum(d);
            const float m_new = fmaxf(m[i], d), corr = expf(m[i] - m_new), pj = expf(d - m_new);
            l[i] = l[i] * corr + pj;
#pragma unroll
            for (int k = 0; k < kPerLane; ++k) acc[i][k] = acc[i][k] * corr + pj * vx[k];
            m[i] = m_new;
        }
    }
    // Every slot written (unused heads as empty: m = -inf, l = 0, o = 0).
#pragma unroll
    for (int i = 0; i < kHeadsPerBlock; ++i) {
        if (lane == 0) sm[warp][i] = m[i], sl[warp][i] = l[i];
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) so[warp][i][lane + 32 * k] = acc[i][k];
    }
    __syncthreads();
    for (int x = threadIdx.x; x < nh * hd; x += blockDim.x) {
        const int i = x / hd, e = x % hd;
        float M = -INFINITY;
        for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm[w][i]);
        float L = 0, O = 0;
        for (int w = 0; w < kWarps; ++w) {
            const float f = M == -INFINITY ? 0.0f : expf(sm[w][i] - M);  // a split past the sequence's end: empty
            L += sl[w][i] * f;
            O += so[w][i][e] * f;
        }
        const long at = (long(s) * heads + h0 + i) * splits + c;
        part_o[at * hd + e] = O;
        if (e == 0) part_m[at] = M, part_l[at] = L;
    }
}

__global__ void paged_merge_kernel(const float* part_m, const float* part_l, const float* part_o, int splits, int hd,
                                   float* o) {
    const long sh = blockIdx.x;
    const float *pm = part_m + sh * splits, *pl = part_l + sh * splits;
    float M = -INFINITY;
    for (int c = 0; c < splits; ++c) M = fmaxf(M, pm[c]);
    float L = 0;
    for (int c = 0; c < splits; ++c) L += pm[c] == -INFINITY ? 0.0f : pl[c] * expf(pm[c] - M);
    for (int e = threadIdx.x; e < hd; e += blockDim.x) {
        float O = 0;
        for (int c = 0; c < splits; ++c)
            if (pm[c] != -INFINITY) O += part_o[(sh * splits + c) * hd + e] * expf(pm[c] - M);
        o[sh * hd + e] = O / L;
    }
}

// --- host launchers (asynchronous on `stream`) -----------------------------------------------

inline void kv_append(const PagedKv& kv, const int* start, const float* k_new, const float* v_new, int b, int count,
                      cudaStream_t stream = nullptr) {
    if (b <= 0 || count <= 0) return;
    mw::launch(kv_append_kernel, dim3(unsigned(count), unsigned(b)), dim3(128), 0, stream, kv, start, k_new, v_new,
               count);
}

inline void kv_append(const PagedKv8& kv, const int* start, const float* k_new, const float* v_new, int b, int count,
                      cudaStream_t stream = nullptr) {
    if (b <= 0 || count <= 0) return;
    mw::launch(kv_append8_kernel, dim3(unsigned(count), unsigned(b)), dim3(128), 0, stream, kv, start, k_new, v_new,
               count);
}

// Either layout (PagedKv, PagedKv8): the split and merge kernels.
template <class KV>
inline void paged_decode(const KV& kv, const float* q, float* o, int b, int heads, float* workspace,
                         cudaStream_t stream = nullptr) {
    if (kv.hd < 1 || kv.hd > kPagedMaxHd)
        throw std::invalid_argument("paged_decode: hd = " + std::to_string(kv.hd) + " outside 1.." +
                                    std::to_string(kPagedMaxHd));
    if (kv.kv_heads < 1 || heads % kv.kv_heads)
        throw std::invalid_argument("paged_decode: kv_heads = " + std::to_string(kv.kv_heads) +
                                    " must divide heads = " + std::to_string(heads));
    if (b <= 0) return;
    const int splits = paged_splits(kv.max_pages), G = heads / kv.kv_heads;
    const int chunks = (G + kHeadsPerBlock - 1) / kHeadsPerBlock;
    float* part_m = workspace;
    float* part_l = part_m + long(b) * heads * splits;
    float* part_o = part_l + long(b) * heads * splits;
    mw::launch(paged_split_kernel<KV>, dim3(unsigned(splits), unsigned(kv.kv_heads * chunks), unsigned(b)),
               dim3(kWarps * 32), 0, stream, kv, q, heads, splits, part_m, part_l, part_o);
    mw::launch(paged_merge_kernel, dim3(unsigned(b * heads)), dim3(128), 0, stream, (const float*)part_m,
               (const float*)part_l, (const float*)part_o, splits, kv.hd, o);
}

}  // namespace
}  // namespace mw::kv_cache::paged
