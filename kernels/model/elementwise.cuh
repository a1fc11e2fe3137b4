// CUDA kernels of the model's element-wise layers, forward and backward
// (the math is defined in kernels/model/elementwise.hpp). Compiled by nvcc
// (backend "cuda") and by the host compiler through the emulator ("cuda-emu")
// from the same source; kernels/model/elementwise.cu publishes the launchers
// below as each backend's table. A .cu file may also include this header and
// call mw::model::kernels::* directly (each translation unit gets its own
// copy: everything here sits in an unnamed namespace, as in
// harness/cuda/device_problem.hpp).
//
// All of these are memory-bound: a few FLOPs per 4-byte element, against a
// ridge point of tens of FLOPs per byte on a current GPU. Traffic per element
// of the [rows, d] (or [tokens, heads, hd]) tensors, fp32; per-row and
// per-column vectors (rstd, g, positions, inv_freq) are amortized away:
//
//   kernel                 reads      writes   bytes/elt  notes
//   rmsnorm_forward        x          y        8          + rstd, 4 B per row
//   rmsnorm_backward (dx)  x, dy      dx       12
//   rmsnorm_backward (dg)  x, dy      -        8          + dg, 8 B per column
//   rope (fwd and bwd)     x          y        8          one sincosf per pair
//   swiglu_forward         a, b       h        12         one expf per element
//   swiglu_backward        a, b, dh   da, db   20         one expf per element
//   softmax_causal_fwd     s          s        8          in place; 2 expf per element below the diagonal
//   softmax_causal_bwd     p, ds      ds       12         in place
//   add                    a, b       y        12         the residual stream
//   dot                    a, b       -        8          + one float; one block, double sums
//
// RMSNorm: one block of 128 threads per row (a tiny model's rows are a few
// hundred floats: 4 warps keep the row in flight without idling most of a
// bigger block); each thread strides over the row, then a warp-shuffle and
// shared-memory reduction gives the whole block the row's sum. The row is
// read a second time to scale it; that read comes from L1/L2, not DRAM.
//
// dg (a sum over rows, per column) is a second kernel, not atomics. Atomics
// would add the rows' contributions in whatever order blocks happen to
// finish, so dg's rounding, and a training run with it, would change from run
// to run (and no emulator could show it: cuda-emu runs blocks in a fixed
// order); they also pile rows-many updates onto each of d addresses. The
// second kernel gives a fixed summation order (rows strided over 16 lanes,
// then the 16 partial sums in order) for the price of reading x and dy once
// more (8 of the backward's 20 bytes per element) and of parallelism: one
// block per 32 columns.
//
// Causal softmax rows (attention scores, [.., n, n]): one block per row,
// like RMSNorm, the masked tail written as zeros so that the P V and P^T dO
// products may read whole rows. The fusion lever's softmax kernels
// (reference/fusion/softmax.cu, optimized/fusion/softmax_online.cu) do not
// fit: they take whole rows without a scale or a causal mask, and live in
// their .cu files' unnamed namespaces.
//
// RoPE and SwiGLU: one thread per element (RoPE: per pair), grid-stride
// loops, plain 4-byte loads (a warp's loads still cover whole 32-byte
// sectors). RoPE may run in place (y == x): each thread reads its pair
// before writing it, so its pointers are not __restrict__.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "harness/cuda/launch.hpp"
#include "kernels/cuda/warp.hpp"
#include "kernels/model/elementwise.hpp"

namespace mw::model::kernels {
namespace {

constexpr int kNormThreads = 128, kNormWarps = kNormThreads / 32;
constexpr int kDgCols = 32, kDgRowLanes = 16;  // dg: a block of 32 columns x 16 row lanes
constexpr int kPointwiseThreads = 256;
constexpr std::int64_t kMaxPointwiseBlocks = 1 << 16;  // grid-stride beyond this

// The sum (or, kMax, the maximum) of v over a block of kNormThreads; every
// thread gets it. `scratch` is kNormWarps+1 floats of the calling kernel's
// shared memory (declared there, so the emulator poisons it before each
// block). Two calls in a row may share it: every thread has read the first
// result before any passes the second call's first barrier.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
    v = kMax ? mw::warp::warp_max(v) : mw::warp::warp_sum(v);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < kNormWarps ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
        t = kMax ? mw::warp::warp_max(t) : mw::warp::warp_sum(t);
        if (lane == 0) scratch[kNormWarps] = t;
    }
    __syncthreads();
    return scratch[kNormWarps];
}
__device__ __forceinline__ float block_sum(float v, float* scratch) { return block_reduce<false>(v, scratch); }

__global__ void __launch_bounds__(kNormThreads)
rmsnorm_forward_kernel(const float* __restrict__ x, const float* __restrict__ g, float* __restrict__ y,
                       float* __restrict__ rstd, int d, float eps) {
    __shared__ float scratch[kNormWarps + 1];
    const std::int64_t base = std::int64_t(blockIdx.x) * d;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < d; i += kNormThreads) {
        const float v = x[base + i];
        ss += v * v;
    }
    ss = block_sum(ss, scratch);
    const float r = rsqrtf(ss / float(d) + eps);
    for (int i = threadIdx.x; i < d; i += kNormThreads) y[base + i] = x[base + i] * r * g[i];
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
}

// dx[i] = r*g[i]*dy[i] - x[i] * (r^3/d) * sum_j dy[j]*g[j]*x[j], one block per row.
__global__ void __launch_bounds__(kNormThreads)
rmsnorm_backward_dx_kernel(const float* __restrict__ x, const float* __restrict__ g, const float* __restrict__ rstd,
                           const float* __restrict__ dy, float* __restrict__ dx, int d) {
    __shared__ float scratch[kNormWarps + 1];
    const std::int64_t base = std::int64_t(blockIdx.x) * d;
    float dot = 0.0f;
    for (int i = threadIdx.x; i < d; i += kNormThreads) dot += dy[base + i] * g[i] * x[base + i];
    dot = block_sum(dot, scratch);
    const float r = rstd[blockIdx.x];
    const float c = r * r * r / float(d) * dot;
    for (int i = threadIdx.x; i < d; i += kNormThreads) dx[base + i] = r * g[i] * dy[base + i] - x[base + i] * c;
}

// dg[col] += sum over rows of dy*x*r, in a fixed order: lane ty sums rows
// ty, ty+16, ..., then lane 0 adds the 16 partial sums in lane order.
__global__ void __launch_bounds__(kDgCols * kDgRowLanes)
rmsnorm_backward_dg_kernel(const float* __restrict__ x, const float* __restrict__ rstd, const float* __restrict__ dy,
                           float* __restrict__ dg, int rows, int d) {
    __shared__ float partial[kDgRowLanes][kDgCols];
    const int col = blockIdx.x * kDgCols + threadIdx.x;
    float s = 0.0f;
    if (col < d)
        for (int r = threadIdx.y; r < rows; r += kDgRowLanes) {
            const std::int64_t k = std::int64_t(r) * d + col;
            s += dy[k] * x[k] * rstd[r];
        }
    partial[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < d) {
        float t = 0.0f;
        for (int lane = 0; lane < kDgRowLanes; ++lane) t += partial[lane][threadIdx.x];
        dg[col] += t;
    }
}

// Turns each pair by +theta (sign = 1, forward) or -theta (sign = -1, backward).
__global__ void __launch_bounds__(kPointwiseThreads)
rope_kernel(const float* x, float* y, const std::int32_t* __restrict__ positions, const float* __restrict__ inv_freq,
            std::int64_t pairs, int heads, int half, float sign) {
    const std::int64_t per_token = std::int64_t(heads) * half;
    for (std::int64_t q = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < pairs;
         q += std::int64_t(gridDim.x) * blockDim.x) {
        const int j = int(q % half);
        const float theta = float(positions[q / per_token]) * inv_freq[j];
        float s, c;
        sincosf(theta, &s, &c);  // the accurate one: angles reach thousands of radians
        s *= sign;
        const float x0 = x[2 * q], x1 = x[2 * q + 1];
        y[2 * q] = x0 * c - x1 * s;
        y[2 * q + 1] = x0 * s + x1 * c;
    }
}

__global__ void __launch_bounds__(kPointwiseThreads)
swiglu_forward_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ h, std::int64_t n) {
    for (std::int64_t q = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < n;
         q += std::int64_t(gridDim.x) * blockDim.x) {
        const float av = a[q];
        h[q] = av / (1.0f + expf(-av)) * b[q];  // a -> -inf: a / inf = -0, no NaN
    }
}

__global__ void __launch_bounds__(kPointwiseThreads)
swiglu_backward_kernel(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ dh,
                       float* __restrict__ da, float* __restrict__ db, std::int64_t n) {
    for (std::int64_t q = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < n;
         q += std::int64_t(gridDim.x) * blockDim.x) {
        const float av = a[q], bv = b[q], g = dh[q];
        // 1 - s as sigmoid(-a), not as 1.0f - s: for a >> 1, s is within an
        // ulp of 1 and 1 - s would keep no correct digits (times a: an error
        // of ~a ulps in da). A second expf is free in a memory-bound kernel.
        const float s = 1.0f / (1.0f + expf(-av)), one_minus_s = 1.0f / (1.0f + expf(av));
        da[q] = g * bv * s * (1.0f + av * one_minus_s);
        db[q] = g * (av * s);
    }
}

// --- the attention's score rows, the residual stream, the loss ------------------------------

// Causal softmax of one [n, n] score matrix row per block, in place: row r is
// position i = r % n of its matrix; s[0..i] becomes softmax(scale * s[0..i])
// and s[i+1..n) becomes 0. The CPU's order (kernels/model/layers_cpu.cpp):
// scale, max, sum of exp(v - max), times 1/sum.
__global__ void __launch_bounds__(kNormThreads)
softmax_causal_forward_kernel(float* __restrict__ s, int n, float scale) {
    __shared__ float scratch[kNormWarps + 1];
    float* row = s + std::int64_t(blockIdx.x) * n;
    const int valid = int(blockIdx.x % unsigned(n)) + 1;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < valid; j += kNormThreads) m = fmaxf(m, row[j] * scale);
    m = block_reduce<true>(m, scratch);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < valid; j += kNormThreads) sum += expf(row[j] * scale - m);
    const float inv = 1.0f / block_sum(sum, scratch);
    for (int j = threadIdx.x; j < n; j += kNormThreads) row[j] = j < valid ? expf(row[j] * scale - m) * inv : 0.0f;
}

// ds holds dP on entry and dS = P (dP - rowsum(dP P)) scale on return, 0
// above the diagonal (where P is 0 and no gradient flows).
__global__ void __launch_bounds__(kNormThreads)
softmax_causal_backward_kernel(const float* __restrict__ p, float* __restrict__ ds, int n, float scale) {
    __shared__ float scratch[kNormWarps + 1];
    const std::int64_t base = std::int64_t(blockIdx.x) * n;
    const int valid = int(blockIdx.x % unsigned(n)) + 1;
    float dot = 0.0f;
    for (int j = threadIdx.x; j < valid; j += kNormThreads) dot += p[base + j] * ds[base + j];
    dot = block_sum(dot, scratch);
    for (int j = threadIdx.x; j < n; j += kNormThreads)
        ds[base + j] = j < valid ? p[base + j] * (ds[base + j] - dot) * scale : 0.0f;
}

// y = a + b: the residual stream's sums, forward (x_mid = x + o Wo) and
// backward (dx = d x_out + the norm's input gradient). y may be a or b:
// each element is read before it is written, by the same thread.
__global__ void __launch_bounds__(kPointwiseThreads)
add_kernel(const float* a, const float* b, float* y, std::int64_t n) {
    for (std::int64_t q = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; q < n;
         q += std::int64_t(gridDim.x) * blockDim.x)
        y[q] = a[q] + b[q];
}

// out[0] = sum(a * b), the loss: one block, each thread summing a strided
// share in double, then a tree over shared memory — a fixed order, so the
// same bits every run (no atomics), and double so that a sum of ~10^5
// products of mixed sign keeps fp32's digits. A loss is a few hundred KiB
// read once per step: one block is plenty.
constexpr int kDotThreads = 256;
__global__ void __launch_bounds__(kDotThreads)
dot_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out, std::int64_t n) {
    __shared__ double partial[kDotThreads];
    double s = 0.0;
    for (std::int64_t q = threadIdx.x; q < n; q += kDotThreads) s += double(a[q]) * double(b[q]);
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int half = kDotThreads / 2; half > 0; half /= 2) {
        if (int(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = float(partial[0]);
}

// --- host launchers (device pointers) ----------------------------------------------------

inline void require(bool ok, const char* what) {
    if (!ok) throw std::invalid_argument(std::string("mw::model element-wise kernels: ") + what);
}

inline dim3 pointwise_grid(std::int64_t n) {
    return dim3(unsigned(std::min((n + kPointwiseThreads - 1) / kPointwiseThreads, kMaxPointwiseBlocks)));
}

inline void rmsnorm_forward(const float* x, const float* g, float* y, float* rstd, int rows, int d, float eps,
                            Stream stream) {
    require(rows >= 0 && d >= 1, "rmsnorm_forward needs rows >= 0 and d >= 1");
    if (rows == 0) return;
    mw::launch(rmsnorm_forward_kernel, dim3(rows), dim3(kNormThreads), 0, stream, x, g, y, rstd, d, eps);
}

inline void rmsnorm_backward(const float* x, const float* g, const float* rstd, const float* dy, float* dx, float* dg,
                             int rows, int d, Stream stream) {
    require(rows >= 0 && d >= 1, "rmsnorm_backward needs rows >= 0 and d >= 1");
    if (rows == 0) return;
    mw::launch(rmsnorm_backward_dx_kernel, dim3(rows), dim3(kNormThreads), 0, stream, x, g, rstd, dy, dx, d);
    mw::launch(rmsnorm_backward_dg_kernel, dim3((d + kDgCols - 1) / kDgCols), dim3(kDgCols, kDgRowLanes), 0, stream,
               x, rstd, dy, dg, rows, d);
}

inline void rope(const float* x, float* y, const std::int32_t* positions, const float* inv_freq, int tokens,
                 int heads, int hd, float sign, Stream stream) {
    require(tokens >= 0 && heads >= 1 && hd >= 2 && hd % 2 == 0, "rope needs tokens >= 0, heads >= 1 and an even hd >= 2");
    const std::int64_t pairs = std::int64_t(tokens) * heads * (hd / 2);
    if (pairs == 0) return;
    mw::launch(rope_kernel, pointwise_grid(pairs), dim3(kPointwiseThreads), 0, stream, x, y, positions, inv_freq,
               pairs, heads, hd / 2, sign);
}

inline void rope_forward(const float* x, float* y, const std::int32_t* positions, const float* inv_freq, int tokens,
                         int heads, int hd, Stream stream) {
    rope(x, y, positions, inv_freq, tokens, heads, hd, 1.0f, stream);
}

inline void rope_backward(const float* dy, float* dx, const std::int32_t* positions, const float* inv_freq,
                          int tokens, int heads, int hd, Stream stream) {
    rope(dy, dx, positions, inv_freq, tokens, heads, hd, -1.0f, stream);
}

inline void swiglu_forward(const float* a, const float* b, float* h, std::int64_t n, Stream stream) {
    require(n >= 0, "swiglu_forward needs n >= 0");
    if (n == 0) return;
    mw::launch(swiglu_forward_kernel, pointwise_grid(n), dim3(kPointwiseThreads), 0, stream, a, b, h, n);
}

inline void swiglu_backward(const float* a, const float* b, const float* dh, float* da, float* db, std::int64_t n,
                            Stream stream) {
    require(n >= 0, "swiglu_backward needs n >= 0");
    if (n == 0) return;
    mw::launch(swiglu_backward_kernel, pointwise_grid(n), dim3(kPointwiseThreads), 0, stream, a, b, dh, da, db, n);
}

inline void softmax_causal_forward(float* s, int rows, int n, float scale, Stream stream) {
    require(rows >= 0 && n >= 1 && rows % n == 0, "softmax_causal_forward needs n >= 1 and rows a multiple of n");
    if (rows == 0) return;
    mw::launch(softmax_causal_forward_kernel, dim3(rows), dim3(kNormThreads), 0, stream, s, n, scale);
}

inline void softmax_causal_backward(const float* p, float* ds, int rows, int n, float scale, Stream stream) {
    require(rows >= 0 && n >= 1 && rows % n == 0, "softmax_causal_backward needs n >= 1 and rows a multiple of n");
    if (rows == 0) return;
    mw::launch(softmax_causal_backward_kernel, dim3(rows), dim3(kNormThreads), 0, stream, p, ds, n, scale);
}

inline void add(const float* a, const float* b, float* y, std::int64_t n, Stream stream) {
    require(n >= 0, "add needs n >= 0");
    if (n == 0) return;
    mw::launch(add_kernel, pointwise_grid(n), dim3(kPointwiseThreads), 0, stream, a, b, y, n);
}

inline void dot(const float* a, const float* b, float* out, std::int64_t n, Stream stream) {
    require(n >= 0, "dot needs n >= 0");
    mw::launch(dot_kernel, dim3(1), dim3(kDotThreads), 0, stream, a, b, out, n);  // n = 0: out = 0
}

}  // namespace
}  // namespace mw::model::kernels
