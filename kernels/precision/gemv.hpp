// The precision lever's CPU GEMV rungs as functions, for code that decodes
// through them (the model stack's decoder, the KV-cache and speculative
// levers): y[b][n_out] = x[b][n_in] . dequant(W)^T for a matrix stored in
// any format of kernels/precision/quant.hpp, by the rung that reads that
// format (optimized/precision/gemv_q_*.cpp, rungs 1-4; each defines its
// function below). Multi-threaded over row tiles; b items share each row.
#pragma once

#include <cstdint>

#include "kernels/precision/quant.hpp"

namespace mw::precision {

// Dispatches on m.spec.format. int8_tensor (the outlier experiment's format)
// has no fast kernel and is refused with std::invalid_argument.
void gemv(const QMatrix& m, const float* x, std::int64_t b, float* y);

namespace cpu {
void gemv_f32(const QMatrix& m, const float* x, std::int64_t b, float* y);   // gemv_q_fp32.cpp, rung 1
void gemv_half(const QMatrix& m, const float* x, std::int64_t b, float* y);  // gemv_q_half.cpp, rung 2 (bf16, f16)
void gemv_int8(const QMatrix& m, const float* x, std::int64_t b, float* y);  // gemv_q_int8.cpp, rung 3
void gemv_int4(const QMatrix& m, const float* x, std::int64_t b, float* y);  // gemv_q_int4.cpp, rung 4
}  // namespace cpu

}  // namespace mw::precision
