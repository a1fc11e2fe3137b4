// The precision lever's CPU GEMV rungs as functions, for code that decodes
// through them (the model stack's decoder, the KV-cache and speculative
// levers): y[b][n_out] = x[b][n_in] . dequant(W)^T for a matrix stored in
// any format of kernels/precision/quant.hpp, by the rung that reads that
// format (optimized/precision/gemv_q_*.cpp, rungs 1-4; each defines its
// function below). Multi-threaded over row tiles; b items share each row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// --- rung 5: dot-product instructions (optimized/precision/gemv_q_dot.cpp) ----
// x rounded once per call (quant.hpp's ActSpec), then bf16 x bf16 or
// int8/int4 x int8 dot products. The activation rounding below is defined in
// that rung and shared with rung 6.
namespace cpu {
// Per-call scratch: x rounded for the dot-product kernels, rows padded to ld.
struct DotActs {
    std::int64_t b = 0, ld = 0, blocks = 0;
    std::vector<std::int8_t> q;       // int8: [b][ld]
    std::vector<float> d;             // int8: [b][blocks], the block scales
    std::vector<std::int32_t> qsum;   // int8: [b][blocks], sum of q per block
    std::vector<std::uint16_t> h;     // bf16: [b][ld]
};
// The same bits as quant.hpp's scalar quantize_acts_int8 / f32_to_bf16
// (tests/precision check), SIMD, zero past n_in. ld: a multiple of block.
void quantize_acts_int8(const float* x, std::int64_t b, std::int64_t n_in, std::int64_t ld, int block, DotActs& out);
void round_acts_bf16(const float* x, std::int64_t b, std::int64_t n_in, std::int64_t ld, DotActs& out);
// The activation rounding each weight format's dot rung uses: bf16 for
// bf16, int8 per block of 32 for int8_channel, per block of G for int4 G.
ActSpec dot_acts(const QuantSpec& w);
// Which instruction the dot rungs use here ("avx512_vnni", "avx2 (vpmaddubsw)",
// "avx512_bf16", "avx2 (widen + FMA)"): recorded in the results as `path`.
std::string dot_path(const QuantSpec& w);
// The arithmetic the dot rungs compute in here, i.e. the
// calibrated peak their MFU and compute roof are judged by: "int8" for the
// integer formats (vpdpbusd, or vpmaddubsw on AVX2), "bf16" for bf16 where
// vdpbf16ps runs, "f32" for bf16 widened to fp32 FMAs, "" for fp32 (the
// run's dtype).
std::string dot_compute(const QuantSpec& w);
void gemv_dot(const QMatrix& m, const float* x, std::int64_t b, float* y, DotActs& scratch);
}  // namespace cpu

// --- rung 6: repacked weights (optimized/precision/gemv_q_repacked.cpp) -----
// 16 rows interleaved so that each 32-bit lane of a 512-bit register is one
// row: one broadcast of x feeds 16 rows, and every batch item reuses each
// loaded weight register. Built once from a QMatrix (at load time, untimed).
// fp32 reads x as is; bf16, int8_channel and int4 round it like rung 5.
struct PackedMatrix {
    QuantSpec spec;
    ActSpec acts;
    std::int64_t n_out = 0, n_in = 0, kp = 0, panels = 0;  // kp: padded n_in
    Buffer w;       // [panel][k step][16 rows][bytes per lane]
    Buffer scales;  // int8_channel: fp32 [panel][16]; int4: fp16 [panel][group][16]
    Buffer zeros;   // int4 asym: fp16 [panel][group][16]
    double bytes() const;
};
PackedMatrix repack(const QMatrix& m);
namespace cpu {
// How rung 6 rounds x: as dot_acts, except int8 and int4, whose x is int8 per
// block of 256 (a whole number of int4 groups), so the block's scale is
// applied once per 256 inputs rather than once per 32 or per group. None for
// fp32.
ActSpec repacked_acts(const QuantSpec& w);
}  // namespace cpu
// y[b][n_out] = dequant(W) . rounded(x); multi-threaded over panels.
void gemv(const PackedMatrix& m, const float* x, std::int64_t b, float* y);

}  // namespace mw::precision
