// The GEMM op, C[M,N] = A[M,K] * B[K,N], all row-major fp32.
//
// The vectorization lever's ladder (CPU), each rung one idea:
//   reference/vectorization/gemm.cpp          rung 0  naive i-j-k scalar loop
//   optimized/vectorization/gemm_loop_order.cpp  1  i-k-j order: unit-stride B and C
//   optimized/vectorization/gemm_blocked.cpp     2  cache blocking: reuse tiles from L1/L2
//   optimized/vectorization/gemm_simd.cpp        3  SIMD micro-kernel with register blocking
//   optimized/vectorization/gemm_threads.cpp     4  SIMD tiles on all cores (OpenMP), A read in place
//   optimized/vectorization/gemm_openblas.cpp    vendor  OpenBLAS cblas_sgemm
//   optimized/vectorization/gemm_onednn.cpp      vendor  oneDNN matmul primitive (JIT kernel for this CPU)
// CUDA: reference/vectorization/gemm.cu (naive) and optimized/vectorization/gemm_*.cu.
//
// Run: memwall run vectorization --backend cpu
#pragma once

#include "harness/registry.hpp"

namespace mw::gemm {

// Every CPU GEMM rung has this signature; C is overwritten (beta = 0).
using CpuFn = void (*)(const float* A, const float* B, float* C, int M, int N, int K);

// Wraps a plain CPU GEMM function into the harness's prepare() hook.
std::function<Instance(Problem&)> cpu_adapter(CpuFn fn);

// Bytes moved by a GEMM whose A is re-read once per column block of width nb
// and whose B is re-read once per row block of height mb, C written once.
// Naive loops correspond to mb = 1 (B streamed once per row of C), nb = N.
double bytes_blocked(const Shape& s, double mb, double nb);

// The contract of the bf16 tensor-core rungs: A B in fp64 of A and B each
// rounded to bf16 (nearest even), as the rungs round them on their way into
// shared memory; their accumulation is fp32.
std::vector<std::vector<double>> oracle_bf16_inputs(const Problem& p);

}  // namespace mw::gemm
