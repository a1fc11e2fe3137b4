// The fusion lever: separate passes vs one pass, materialized vs tiled
// attention, launch overhead. Ops and their ladders (CPU | CUDA):
//
//   bias_gelu_ln  y = LayerNorm(GELU(x + bias))           rows x hidden, fp32
//     reference/fusion/bias_gelu_ln.cpp      0 naive     five passes, two full-size temporaries
//     optimized/fusion/bias_gelu_ln_simd_passes.cpp  1  the same passes, SIMD math
//     optimized/fusion/bias_gelu_ln_fused.cpp        2  one pass per row, row kept in L1
//     optimized/fusion/bias_gelu_ln_onednn.cpp       vendor  oneDNN: add + GELU post-op, then its layer norm
//     reference/fusion/bias_gelu_ln.cu       0 three kernels, intermediates in global memory
//     optimized/fusion/bias_gelu_ln_fused.cu 1 one block per row, warp-shuffle reductions
//   ln_gelu       Y = LayerNorm(GELU(X W + b))            m x n (x k)
//     reference/fusion/ln_gelu.cpp           0 GEMM, then bias / GELU / LN passes over Y
//     optimized/fusion/ln_gelu_fused_epilogue.cpp  1  epilogue applied to each row strip while hot
//   softmax       y = softmax(x) along rows               rows x cols
//     reference/fusion/softmax.cpp           0 three sweeps: max, sum of exp, normalize
//     optimized/fusion/softmax_online.cpp    1 online max+sum: two sweeps
//     optimized/fusion/softmax_row_fused.cpp 2 both sweeps on a row while it is in L1
//     optimized/fusion/softmax_onednn.cpp    vendor  oneDNN's softmax primitive
//     reference/fusion/softmax.cu            0 three kernels: max, sum of exp, normalize
//     optimized/fusion/softmax_online.cu     1 one kernel: online max+sum merged across the block
//   softmax_v     O = softmax(X) V  (softmax fused into its consumer)
//     reference/fusion/softmax_v.cpp         0 softmax to P, then P V
//     optimized/fusion/softmax_v_fused.cpp   1 online softmax streamed into the P V accumulation
//   attention     O = softmax(Q K^T / sqrt(d) [+ causal mask]) V, GQA
//     reference/fusion/attention.cpp         0 S x S scores and probabilities materialized
//     optimized/fusion/attention_tiled.cpp   1 FlashAttention-style tiles, online softmax
//     reference/fusion/attention.cu          0 scores in global memory
//     optimized/fusion/attention_smem_tiles.cu  1 K/V tiles in shared memory, online softmax
//     optimized/fusion/attention_flash2.cu   2 FlashAttention-2: one warp per query row block
//     optimized/fusion/attention_flash2_mma.cu 3 FlashAttention-2 on bf16 tensor cores (mma.sync)
//   launch_chain  y = f16(...f2(f1(x)))  16 tiny element-wise ops
//     reference/fusion/launch_chain.cpp      0 per-op dispatch through std::function, fresh temporaries
//     optimized/fusion/launch_chain_fused.cpp 1 one fused loop
//     reference/fusion/launch_chain.cu       0 one kernel launch per op
//     optimized/fusion/launch_chain_graph.cu 1 the same launches captured once in a CUDA Graph
//     optimized/fusion/launch_chain_fused.cu 2 one fused kernel
//
// Run: memwall run fusion --backend cpu   (cuda, or cuda-emu without a GPU)
#pragma once

#include <cmath>
#include <cstdint>

#include "harness/registry.hpp"

// chain_op is called from CUDA kernels too.
#if defined(__CUDACC__)
#define MW_FUSION_HD __host__ __device__
#else
#define MW_FUSION_HD
#endif

namespace mw::fusion {

constexpr float kLnEps = 1e-5f;

// tanh-GELU in double for the oracles.
inline double gelu_ref(double x) {
    const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + std::tanh(u));
}

// Bytes of the five-pass (unfused) bias_gelu_ln: 8 sweeps of the activation.
double bias_gelu_ln_bytes_unfused(const Shape& s, DType);

// The GEMM part of ln_gelu's traffic (the threaded SIMD GEMM's blocking).
double ln_gelu_gemm_bytes(const Shape& s);

// LayerNorm of one row of doubles in place (two-pass mean/variance).
void layernorm_ref(double* row, std::int64_t n, const float* gamma, const float* beta);

// The launch_chain's op k (0-based) applied to one value; shared by every
// variant and the oracle so the chain is defined once.
template <class T> MW_FUSION_HD inline T chain_op(int k, T v) {
    switch (k % 4) {
        case 0: return v * T(0.75) + T(0.25);
        case 1: return v * v * T(0.5) - T(0.125);
        case 2: return v < T(0) ? v * T(0.5) : v;
        default: return v * T(-1.25) + T(0.0625);
    }
}
inline constexpr int kChainFlopsPerOp = 2;

}  // namespace mw::fusion
