// The bias_gelu_ln CPU kernels, callable on their own: ln_gelu (GEMM + the
// same epilogue) reuses them so that its two rungs differ only in *when* the
// epilogue runs. Each is defined in the rung whose idea it is
// (optimized/fusion/bias_gelu_ln_simd_passes.cpp, bias_gelu_ln_fused.cpp).
#pragma once

namespace mw::fusion {

// Rung 1 of bias_gelu_ln: five OpenMP-parallel passes through the caller's
// full-size temporaries t1, t2 (R*H floats each) and stats (2*R floats).
void bias_gelu_ln_passes(const float* x, const float* bias, const float* gamma, const float* beta, float* t1,
                         float* t2, float* stats, float* y, long R, long H);

// Whether rung 2's AVX-512 GELU divides (true) or multiplies by the
// reciprocal estimate and a Newton step (false): MEMWALL_GELU=divide or
// estimate chooses (another value throws, naming the choices); unset, both
// are timed once per process on rows in L2 and the faster is kept.
bool gelu_divides();

// Rung 2's row kernel (the reciprocal-estimate GELU on AVX-512) on rows [0, R) of x into y (row stride H; y may be x:
// a row is consumed before it is written). `buf` holds one row (H floats,
// 64-byte aligned). Sequential: call it from inside a parallel region.
void bias_gelu_ln_rows(const float* x, const float* bias, const float* gamma, const float* beta, float* y, long R,
                       long H, float* buf);

}  // namespace mw::fusion
