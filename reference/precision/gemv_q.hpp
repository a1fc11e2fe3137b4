// The gemv_q op: y[b, n_out] = x[b, n_in] * W[n_out, n_in]^T, W given in fp32
// and stored by each variant in its own precision (a decode step: every
// weight is streamed once per step, so bytes per weight set the speed).
//
// The precision lever's ladder (CPU), each rung one idea:
//   reference/precision/gemv_q.cpp           rung 0  naive: scalar fp32 loop, one thread
//   optimized/precision/gemv_q_fp32.cpp         1  fp32, AVX-512 FMAs, all cores, streaming rows
//   optimized/precision/gemv_q_half.cpp         2  bf16 / fp16 weights: half the bytes
//   optimized/precision/gemv_q_int8.cpp         3  int8 per-channel weights: a quarter
//   optimized/precision/gemv_q_int4.cpp         4  int4 block-wise (G = 32/64/128, sym/asym): ~1/7
//   optimized/precision/gemv_q_dot.cpp          5  x rounded once per call (bf16, int8 per block): vdpbf16ps /
//                                                  vpdpbusd on the stored weights, one scale per block sum
//   optimized/precision/gemv_q_repacked.cpp     6  16-row panels (one register lane per row), done at load:
//                                                  x broadcast, no horizontal sums, each load reused by 8 items;
//                                                  bf16 by vdpbf16ps or widened + FMAs, whichever is faster here
// CUDA: reference/precision/gemv_q.cu (naive) and optimized/precision/gemv_q_*.cu.
//
// Roof:  read-dominated (W is only read): judged by the calibrated read-only
//        DRAM bandwidth (`memwall calibrate`'s dram_read_gbps), not the triad.
// Run:   memwall run gemv_q --cold                (n_out = n_in = 18432, b = 1)
//        scripts/batch-sweep.sh                   (b = 1..256 vs the decode-intensity formula)
// Check: lossy. The op's check is the envelope of its loosest variant (see
//        gemv_q.cpp); tests/precision checks each variant against its own
//        contract, y = dequant(W) x, and the bound derived from its step.
#pragma once

#include <functional>

#include "harness/registry.hpp"
#include "kernels/precision/quant.hpp"

namespace mw::precision {

// Bytes a GEMV with weights stored as `q` streams from memory: the stored
// weights (payload + scales + zero-points) once, x once, y once. x is re-read
// once per row, but from L1/L2 (a row of x is at most n_in*4 bytes per batch
// item), so it is not counted against DRAM.
double gemv_bytes(const QuantSpec& q, const Shape& s);

// The fp64 contract oracle of a quantized variant: y = dequant(W) x, or, for
// the dot-product rungs that round x too, y = dequant(W) dequant(Q(x)) with
// Q(x) the reference activation quantizer of quant.hpp.
std::vector<double> dequant_oracle(const QMatrix& m, const float* x, std::int64_t b, ActSpec a = {});

// The same, as a Variant::contract_oracle: quantizes the problem's W as `q`
// (deterministic, the same bits the variant's prepare() produces) and x as
// `a`, and returns the product in fp64 for every batch item.
std::function<std::vector<std::vector<double>>(const Problem&)> contract_oracle(QuantSpec q, ActSpec a = {});

}  // namespace mw::precision
