// The element-wise layers of the Llama-style model (model/), on the
// GPU: RMSNorm, RoPE and SwiGLU, forward and backward, fp32 in and out with
// fp32 accumulation. The kernels are in kernels/model/elementwise.cuh; this
// header is what plain C++ sees (no CUDA headers needed): the definitions,
// and each backend's launchers as a table of function pointers, so that code
// compiled without nvcc (the tests, the CPU side of the model) can run them
// on the real GPU ("cuda") or on the CPU through the emulator ("cuda-emu"),
// and a binary built without the CUDA backend still links.
//
// Exact math (rows of length d, row-major [rows, d]):
//   RMSNorm   y[i] = x[i] * r * g[i],  r = 1/sqrt(mean_i(x[i]^2) + eps), eps = 1e-5;
//             rstd[row] = r is saved for the backward.
//             backward, given dy: dx[i] = r*g[i]*dy[i] - x[i] * r^3/d * sum_j dy[j]*g[j]*x[j]
//                                 dg[i] += sum over rows of dy[i]*x[i]*r   (accumulates)
//   RoPE      interleaved pairs, layout [tokens, heads, hd], hd even, positions[tokens] (int32):
//             pair j of a head at position p turns by theta_j = (float)p * inv_freq[j] (an fp32
//             product), inv_freq[j] = (float)pow(10000.0, -2j/hd) computed in double then rounded
//             to float (rope_inv_freq below: CPU and GPU code use the same table, so they turn by
//             the same fp32 angles):
//                (x[2j], x[2j+1]) -> (x[2j] cos - x[2j+1] sin, x[2j] sin + x[2j+1] cos)
//             backward: the same turn by -theta applied to dy.
//   SwiGLU    h = silu(a) * b, silu(a) = a / (1 + exp(-a)) = a * s, s = sigmoid(a)
//             backward, given dh: da = dh * b * s * (1 + a*(1 - s)),  db = dh * silu(a)
//   causal softmax  of the rows of [.., n, n] score matrices, in place: row r is position
//             i = r % n of its matrix; s[0..i] -> softmax(scale * s[0..i]), s[i+1..n) -> 0.
//             backward, given dP in ds: ds[j] = p[j] * (dP[j] - sum_k dP[k] p[k]) * scale for
//             j <= i, 0 above the diagonal
//   add       y = a + b (the residual stream)
//   dot       out[0] = sum a[i] b[i] (the loss sum(y * dy)), summed in double in a fixed order
//
// All pointers passed to the launchers are device pointers of that backend
// (table.alloc / copy_to_device). Launchers are asynchronous on `stream`
// (nullptr: the default stream) like any CUDA launch; they throw
// std::invalid_argument for a bad size and std::runtime_error for a CUDA error.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "harness/registry.hpp"  // mw::Backend

// cudaStream_t is `CUstream_st*` in the CUDA runtime and in the emulator alike.
struct CUstream_st;

namespace mw::model {

using Stream = CUstream_st*;

inline constexpr float kRmsNormEps = 1e-5f;
inline constexpr double kRopeBase = 10000.0;

// inv_freq[j] = base^(-2j/hd) for j in [0, hd/2): computed in double, rounded
// to float once. The RoPE launchers take this table (on the device).
inline std::vector<float> rope_inv_freq(int hd, double base = kRopeBase) {
    std::vector<float> f(hd / 2);
    for (int j = 0; j < hd / 2; ++j) f[j] = static_cast<float>(std::pow(base, -2.0 * j / hd));
    return f;
}

struct ElementwiseKernels {
    // Device memory of this backend, for callers compiled without CUDA headers.
    void* (*alloc)(std::size_t bytes);
    void (*free)(void* p);
    void (*copy_to_device)(void* dst, const void* src, std::size_t bytes);
    void (*copy_to_host)(void* dst, const void* src, std::size_t bytes);
    void (*synchronize)();

    // x, y [rows, d]; g [d]; rstd [rows] (written). y may not alias x.
    void (*rmsnorm_forward)(const float* x, const float* g, float* y, float* rstd, int rows, int d, float eps,
                            Stream stream);
    // x, dy, dx [rows, d]; g, dg [d]; rstd [rows] from the forward. dx is
    // written, dg accumulated into (zero it for a plain gradient).
    void (*rmsnorm_backward)(const float* x, const float* g, const float* rstd, const float* dy, float* dx,
                             float* dg, int rows, int d, Stream stream);
    // x, y [tokens, heads, hd]; positions [tokens]; inv_freq [hd/2] (rope_inv_freq). y may be x (in place).
    void (*rope_forward)(const float* x, float* y, const std::int32_t* positions, const float* inv_freq,
                         int tokens, int heads, int hd, Stream stream);
    // dy, dx [tokens, heads, hd]; dx may be dy (in place).
    void (*rope_backward)(const float* dy, float* dx, const std::int32_t* positions, const float* inv_freq,
                          int tokens, int heads, int hd, Stream stream);
    // a, b, h: n = rows * f elements each (the op is element-wise, so only n matters).
    void (*swiglu_forward)(const float* a, const float* b, float* h, std::int64_t n, Stream stream);
    // a, b, dh, da, db: n elements each; da and db are written (not accumulated).
    void (*swiglu_backward)(const float* a, const float* b, const float* dh, float* da, float* db, std::int64_t n,
                            Stream stream);
    // s [rows, n], rows a multiple of n (whole [n, n] matrices), in place.
    void (*softmax_causal_forward)(float* s, int rows, int n, float scale, Stream stream);
    // p, ds [rows, n]: ds holds dP on entry, dS on return.
    void (*softmax_causal_backward)(const float* p, float* ds, int rows, int n, float scale, Stream stream);
    // a, b, y: n elements; y may be a or b.
    void (*add)(const float* a, const float* b, float* y, std::int64_t n, Stream stream);
    // a, b: n elements; out: one float (written; 0 for n = 0).
    void (*dot)(const float* a, const float* b, float* out, std::int64_t n, Stream stream);
};

// The launchers of `backend` (cuda or cuda_emu), or nullptr when this binary
// was built without that backend. (A "cuda" table exists whenever nvcc built
// the kernels; whether a GPU is present is mw::gpu_count()'s business.)
const ElementwiseKernels* elementwise_kernels(Backend backend);

namespace detail {
// Called once per backend by kernels/model/elementwise.cu at static initialization.
bool register_elementwise_kernels(Backend backend, const ElementwiseKernels* table);
}  // namespace detail

}  // namespace mw::model
