// Weight formats of the precision lever and their scalar quantizers: the
// single source of truth for what a stored weight means. The GEMV kernels
// (reference/precision/gemv_q.cpp, optimized/precision/gemv_q_*.cpp, *.cu)
// read these layouts directly and dequantize inside the dot product; nothing
// here ever builds an fp32 copy of W for them.
//
// Formats and what one weight costs in memory (effective bits = payload +
// per-group metadata / group size; partial last groups and row padding are
// not counted, activations never are):
//   f32            32 bits
//   bf16, f16      16 bits (round to nearest even from fp32)
//   int8_channel   8 + 32/n_in bits: q in [-127,127], one fp32 scale per row,
//                  w ~ s * q, s = max|w_row| / 127
//   int4 sym  G    4 + 16/G bits: q in [-7,7] stored as q+8 in a nibble, one
//                  fp16 scale per group of G weights, s = max|w_g| / 7
//                  (G=64: 4.25 bits)
//   int4 asym G    4 + 32/G bits: q in [0,15], fp16 scale and fp16 zero-point
//                  per group, w ~ s * (q - z), s = (max-min)/15, z = -min/s
//                  (G=64: 4.5 bits)
//   int8_tensor    8 bits + one scale for the whole tensor (outlier experiment only)
//
// The error bound every lossy format obeys, element by element:
//   |w - dequant(w)| <= s_g / 2 * (1 + 2^-6)
// (s_g the group's stored scale: round-to-nearest puts q within half a step;
// the fp16 rounding of s and z can push a value at the clamp edge by at most
// qmax * 2^-11 * s, well inside the 2^-6 slack). A GEMV output then obeys
//   |y_i - (W x)_i| <= sum_j |x_j| * s_g(i,j) / 2 * (1 + 2^-6) + fp32 rounding.
//
// Group sizes that do not divide n_in are HANDLED, not refused: a row is cut
// into groups from its start, the last group is partial (its scale covers
// only its real weights), and storage pads each row to a whole number of
// 32-weight chunks (and, for int4, of groups) with zero payload. Kernels that
// read padded rows also read zero-padded activations, so padding adds nothing.
// Group sizes must be positive multiples of 32 (the SIMD chunk); others are
// refused with a std::invalid_argument naming the value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/registry.hpp"

namespace mw::precision {

enum class Format { f32, bf16, f16, int8_channel, int8_tensor, int4 };

struct QuantSpec {
    Format format = Format::f32;
    int group = 0;      // int4: weights per scale; 0 otherwise
    bool asym = false;  // int4: fp16 zero-point per group
};

std::string describe(const QuantSpec& q);  // "int4 g64 asym (s,z fp16)"
// Bits per weight including metadata, for a row of n_in weights (see above).
double effective_bits(const QuantSpec& q, std::int64_t n_in);

// Rows padded to this many weights in prepared storage.
std::int64_t padded_cols(const QuantSpec& q, std::int64_t n_in);

// An [n_out x n_in] matrix in one format, row-major over padded rows.
//   payload: f32 / bf16 / f16 (uint16) / int8 / int4 (uint8, two per byte)
//   scales:  int8_channel: fp32 per row; int4: fp16 (uint16) per [row][group]
//   zeros:   int4 asym: fp16 per [row][group]
// int4 nibble order: each 32-weight chunk is 16 bytes; byte k holds weight k
// of the chunk in its low nibble and weight k+16 in its high nibble, so one
// 16-byte load and two mask/shift steps give two 16-lane vectors.
struct QMatrix {
    QuantSpec spec;
    std::int64_t n_out = 0, n_in = 0, ld = 0;  // ld: padded row length, in weights
    std::int64_t groups_per_row = 0;           // int4 only
    Buffer payload, scales, zeros;
    float tensor_scale = 0;                    // int8_tensor only
    double bytes() const;                      // everything a GEMV must stream
};

// Quantizes row-major fp32 W (not modified). Throws std::invalid_argument for
// an int4 group that is not a positive multiple of 32.
QMatrix quantize(const QuantSpec& q, const float* W, std::int64_t n_out, std::int64_t n_in);

// Scalar dequantization of one weight / one row (n_in values): the reference
// every kernel's in-register decode must agree with.
float dequant_at(const QMatrix& m, std::int64_t row, std::int64_t col);
void dequantize_row(const QMatrix& m, std::int64_t row, float* out);

// Half the quantization step of the weight at (row, col), times (1 + 2^-6):
// the per-weight error bound stated above. 0 for f32; u(dtype)*|w| for bf16/f16.
double error_bound_at(const QMatrix& m, std::int64_t row, std::int64_t col, float w);

// --- activations of the dot-product rungs (optimized/precision/gemv_q_dot.cpp,
// gemv_q_repacked.cpp) -------------------------------------------------------
// Those rungs round x too, once per call, so that the inner product runs on
// an integer or bf16 dot-product instruction:
//   bf16  x_j -> bf16(x_j), round to nearest even (|error| <= 2^-9 |x_j|);
//   int8  symmetric per block of `block` consecutive inputs (the last block
//         may be partial): d = max|x_blk| / 127, q_j = round(x_j / d) computed
//         as nearbyint(x_j * (1/d)) in fp32, |q_j| <= 127, x_j ~ d * q_j
//         (|error| <= d / 2; an all-zero block has d = 0 and q = 0).
// The variant's contract is then y = dequant(Q(W)) . dequant(Q(x)).
enum class ActRound { none, bf16, int8 };
struct ActSpec {
    ActRound round = ActRound::none;
    int block = 0;  // int8 only
};
std::string describe(const ActSpec& a);  // "x int8 per block of 32"

// The scalar reference quantizer of one row of n activations: q[n], and per
// block its scale d and the integer sum of its q (the kernels' zero-point
// correction). Every SIMD quantizer must give the same bits.
void quantize_acts_int8(const float* x, std::int64_t n, int block, std::int8_t* q, float* d, std::int32_t* qsum);
// x rounded as `a` rounds it, widened back (exactly) to double, b rows of n.
std::vector<double> rounded_acts(const ActSpec& a, const float* x, std::int64_t b, std::int64_t n);
// Bound on |x_j - rounded(x_j)| for every j of one row (same rules as above).
std::vector<double> act_error_bounds(const ActSpec& a, const float* x, std::int64_t n);

// int4 helpers shared with the kernels.
inline std::uint8_t nibble_at(const std::uint8_t* row, std::int64_t col) {
    const std::int64_t chunk = col / 32, k = col % 32;
    const std::uint8_t byte = row[chunk * 16 + (k % 16)];
    return k < 16 ? byte & 0x0F : byte >> 4;
}

}  // namespace mw::precision
