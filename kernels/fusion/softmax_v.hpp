// Shared by the softmax_v rungs (reference/fusion/softmax_v.cpp,
// optimized/fusion/softmax_v_fused.cpp): both multiply by V with the same
// packed GEMM pieces (kernels/vectorization/gemm_cpu.hpp) and the
// same softmax row kernels, so they differ only in where P lives. Defined in
// kernels/fusion/softmax_v.cpp.
#pragma once

#include "harness/registry.hpp"
#include "kernels/vectorization/gemm_cpu.hpp"

namespace mw::fusion::softmax_v {

// V [C, d] packed once per call as NR-column panels in KC-deep slices
// (d <= NC: one column block), `Vp` sized packed_b_floats(C, d, nr).
void pack_v(const gemm::cpu::Kernel& k, const float* V, int C, int d, float* Vp);

// Row statistics of X[r0 : r0+mb] (online max and 1/sum), one row at a time.
void row_stats(const float* X, long C, int mb, float* m, float* inv);

// P[i][0:kc] = exp(X[i][0:kc] - m[i]) * inv[i] for mb rows with row strides
// ldx and ldp (plain stores when `stream` is false, non-temporal otherwise).
void probs(const float* X, long ldx, int mb, int kc, const float* m, const float* inv, float* P, long ldp,
           bool stream);

// Throws unless d fits one GEMM column block (both rungs multiply by V as a
// single NC block of packed panels).
void check_d(std::int64_t d, const gemm::cpu::Kernel& k);

// Floats of one thread's packed-A panel buffer.
long a_floats(const gemm::cpu::Kernel& k);

}  // namespace mw::fusion::softmax_v
