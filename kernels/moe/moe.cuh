// The MoE lever's CUDA kernels (reference/moe/moe_route.cu, moe_ffn.cu), one
// home for the routing top-k and the permute / unpermute pair that a sparse
// dispatch is made of. All fp32 / int32, row-major, device pointers; launches
// on the given stream. Under cuda-emu the same code runs on the CPU.
//
//   route_topk        one thread per token: its E logits (x W_r + bias, E <=
//                     kMaxExpertsCuda, kept in registers), then route_token
//                     (kernels/moe/route.hpp: the host's rule, the same code)
//   dispatch_sort     the counting sort by expert, slot-major, deterministic
//                     (no atomics): a thread per expert counts, one thread
//                     scans the counts, a thread per expert places its rows.
//                     O(E T k) reads: the plain version; a parallel scan
//                     would replace the per-expert sweeps at large E
//   permute_rows      xs[r] = x[token[r]]: a block per row, threads over d
//   grouped_gemm      C_e = A_e B_e for every expert's block of rows in ONE
//                     launch (grid.z = expert): 16 x 16 shared-memory tiles;
//                     tiles past an expert's rows return at once
//   unpermute_combine y[t] = x[t] + sum_j w_j ys[row of (t, j)], slots in
//                     ascending expert order, one fmaf each (the CPU's order)
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "harness/cuda/launch.hpp"
#include "kernels/moe/route.hpp"

namespace mw::moe::cuda {
namespace {

constexpr int kMaxExpertsCuda = 64;  // route_topk keeps a token's logits in registers
constexpr int kTile = 16;

__global__ void route_topk_kernel(const float* __restrict__ x, const float* __restrict__ W,
                                  const float* __restrict__ bias, std::int32_t* __restrict__ experts,
                                  float* __restrict__ weights, int T, int d, int E, int k) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T) return;
    float l[kMaxExpertsCuda];
    for (int e = 0; e < E; ++e) {
        float acc = bias[e];
        for (int i = 0; i < d; ++i) acc += x[std::int64_t(t) * d + i] * W[std::int64_t(i) * E + e];
        l[e] = acc;
    }
    route_token(l, E, k, experts + std::int64_t(t) * k, weights + std::int64_t(t) * k);
}

inline void route_topk(const float* x, const float* W, const float* bias, std::int32_t* experts, float* weights,
                       int T, int d, int E, int k, cudaStream_t stream) {
    if (E > kMaxExpertsCuda || k > kMaxTopK)
        throw std::invalid_argument("route_topk: experts = " + std::to_string(E) + ", top_k = " + std::to_string(k) +
                                    "; the CUDA kernel takes experts <= " + std::to_string(kMaxExpertsCuda) +
                                    ", top_k <= " + std::to_string(kMaxTopK));
    if (T == 0) return;
    mw::launch(route_topk_kernel, dim3((T + 127) / 128), dim3(128), 0, stream, x, W, bias, experts, weights, T, d, E, k);
}

// offsets [E + 1], token [T k] (row -> token), row_of [T k] (assignment -> row).
__global__ void count_kernel(const std::int32_t* __restrict__ experts, std::int64_t* __restrict__ offsets, int n,
                             int E) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    std::int64_t c = 0;
    for (int a = 0; a < n; ++a) c += experts[a] == e;
    offsets[e + 1] = c;
}
__global__ void scan_kernel(std::int64_t* offsets, int E) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    offsets[0] = 0;
    for (int e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
}
__global__ void place_kernel(const std::int32_t* __restrict__ experts, const std::int64_t* __restrict__ offsets,
                             std::int32_t* __restrict__ token, std::int64_t* __restrict__ row_of, int T, int k, int E) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    std::int64_t r = offsets[e];
    for (int j = 0; j < k; ++j)  // slot-major, as the CPU's sort
        for (int t = 0; t < T; ++t)
            if (experts[std::int64_t(t) * k + j] == e) {
                token[r] = t;
                row_of[std::int64_t(t) * k + j] = r++;
            }
}

inline void dispatch_sort(const std::int32_t* experts, std::int64_t* offsets, std::int32_t* token,
                          std::int64_t* row_of, int T, int k, int E, cudaStream_t stream) {
    const dim3 grid((E + 63) / 64), block(64);
    mw::launch(count_kernel, grid, block, 0, stream, experts, offsets, T * k, E);
    mw::launch(scan_kernel, dim3(1), dim3(1), 0, stream, offsets, E);
    mw::launch(place_kernel, grid, block, 0, stream, experts, static_cast<const std::int64_t*>(offsets), token,
               row_of, T, k, E);
}

__global__ void permute_kernel(const float* __restrict__ x, const std::int32_t* __restrict__ token,
                               float* __restrict__ xs, int d) {
    const std::int64_t r = blockIdx.x, src = token[r];
    for (int c = threadIdx.x; c < d; c += blockDim.x) xs[r * d + c] = x[src * d + c];
}

inline void permute_rows(const float* x, const std::int32_t* token, float* xs, int rows, int d, cudaStream_t stream) {
    if (rows == 0) return;
    mw::launch(permute_kernel, dim3(rows), dim3(128), 0, stream, x, token, xs, d);
}

// C[off[e] + i][0:N] = sum_p A[off[e] + i][p] B[e][p][0:N] for i < rows of e.
__global__ void grouped_gemm_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                    float* __restrict__ C, const std::int64_t* __restrict__ offsets, int N, int K) {
    __shared__ float As[kTile][kTile], Bs[kTile][kTile];
    const int e = blockIdx.z;
    const std::int64_t first = offsets[e], rows = offsets[e + 1] - first;
    const int i0 = blockIdx.y * kTile, j0 = blockIdx.x * kTile;
    if (i0 >= rows) return;  // the whole block: this expert has fewer rows
    const int ty = threadIdx.y, tx = threadIdx.x;
    const std::int64_t i = i0 + ty;
    const int j = j0 + tx;
    const float* Be = B + std::int64_t(e) * K * N;
    float acc = 0.0f;
    for (int p0 = 0; p0 < K; p0 += kTile) {
        As[ty][tx] = i < rows && p0 + tx < K ? A[(first + i) * K + p0 + tx] : 0.0f;
        Bs[ty][tx] = p0 + ty < K && j < N ? Be[std::int64_t(p0 + ty) * N + j] : 0.0f;
        __syncthreads();
        for (int p = 0; p < kTile; ++p) acc += As[ty][p] * Bs[p][tx];
        __syncthreads();
    }
    if (i < rows && j < N) C[(first + i) * N + j] = acc;
}

// max_rows: an upper bound on any expert's rows (T k), known on the host.
inline void grouped_gemm(const float* A, const float* B, float* C, const std::int64_t* offsets, int E, int max_rows,
                         int N, int K, cudaStream_t stream) {
    if (max_rows == 0 || N == 0) return;
    const dim3 grid((N + kTile - 1) / kTile, (max_rows + kTile - 1) / kTile, E), block(kTile, kTile);
    mw::launch(grouped_gemm_kernel, grid, block, 0, stream, A, B, C, offsets, N, K);
}

__global__ void combine_kernel(const float* __restrict__ x, const float* __restrict__ ys,
                               const std::int64_t* __restrict__ row_of, const std::int32_t* __restrict__ experts,
                               const float* __restrict__ weights, float* __restrict__ y, int k, int d) {
    const std::int64_t t = blockIdx.x;
    int order[kMaxTopK];
    for (int j = 0; j < k; ++j) {  // the token's slots in ascending expert order
        int i = j;
        while (i > 0 && experts[t * k + order[i - 1]] > experts[t * k + j]) order[i] = order[i - 1], --i;
        order[i] = j;
    }
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float v = x[t * d + c];
        for (int i = 0; i < k; ++i) {
            const std::int64_t r = row_of[t * k + order[i]];
            if (r >= 0) v = fmaf(weights[t * k + order[i]], ys[r * d + c], v);
        }
        y[t * d + c] = v;
    }
}

inline void unpermute_combine(const float* x, const float* ys, const std::int64_t* row_of, const std::int32_t* experts,
                              const float* weights, float* y, int T, int k, int d, cudaStream_t stream) {
    if (T == 0) return;
    mw::launch(combine_kernel, dim3(T), dim3(128), 0, stream, x, ys, row_of, experts, weights, y, k, d);
}

}  // namespace
}  // namespace mw::moe::cuda
