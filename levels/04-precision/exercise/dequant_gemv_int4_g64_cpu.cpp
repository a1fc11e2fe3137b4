// Exercise int4-gemv-cpu (level 04, precision): the decode GEMV with INT4
// block-quantized weights, dequantized on the fly.
//
//   y[bb][i] = sum_j w[i][j] * x[bb][j],   bb < b, i < n_out, j < n_in
//   w[i][j]  = s[i][j / 64] * (q[i][j] - 8)
//
// The weights arrive in the project's int4 format (kernels/precision/
// quant.hpp, "int4 sym G" with G = 64), exactly as the project's int4_g64_sym
// rung stores them:
//   - rows are padded to ld = (n_in + 63) / 64 * 64 weights (whole groups);
//     row i starts at Wq + i * ld / 2 (two weights per byte);
//   - each chunk of 32 weights is 16 bytes: byte k of chunk c holds weight
//     32c + k in its low nibble and weight 32c + k + 16 in its high nibble
//     (so one 16-byte load and two mask/shift steps give two 16-lane vectors);
//   - a nibble stores q + 8, q in [-7, 7] (padding nibbles are 8, i.e. zero);
//   - scales: one fp16 (IEEE binary16 bits) per group of 64 weights,
//     scales[i * (ld / 64) + j / 64].
// x is [b][n_in] fp32 (not padded), y is [b][n_out] fp32, overwritten.
// Wq, scales and x are const: the grader checks that they are unchanged.
//
// Correctness is judged against the contract, y = dequant(Q(W)) x computed
// in fp64 — the quantization error is the format's price, not yours; a decode
// bug is yours. Never build an fp32 copy of W: that reads 8x the bytes the
// format was made to save (it is correct, and graded slow).
//
// Keep the signature exactly as it is. The grader compiles this file alone
// (plus its own driver) with
//     g++ -std=c++20 -O3 -march=native -fopenmp
// Grading: correctness on odd shapes (n_in = 1, 7, 33, 129, 1000, 4097 ...,
// b = 1..5) with fresh weights on every call, then speed at n_out = 8192,
// n_in = 8192, b = 1 (32 MiB of INT4 weights: more than a 32 MiB L3 holds
// with everything else) on 1 thread relative to the project's int4_g64_sym
// rung (optimized/precision/gemv_q_int4.cpp). Only the call is timed; packing
// the weights is the grader's business. Check yourself with:
//     memwall grade 04 --submission levels/04-precision/exercise/dequant_gemv_int4_g64_cpu.cpp --seed 1
#include <immintrin.h>

#include <cstdint>

extern "C" void student_gemv_int4_g64(const std::uint8_t* Wq, const std::uint16_t* scales, const float* x, float* y,
                                      int n_out, int n_in, int b) {
    const long ld = (n_in + 63) / 64 * 64, groups = ld / 64;
    // TODO: replace this scalar loop (correct, but one weight at a time on one core).
    for (long bb = 0; bb < b; ++bb)
        for (long i = 0; i < n_out; ++i) {
            const std::uint8_t* row = Wq + i * ld / 2;
            float acc = 0;
            for (long j = 0; j < n_in; ++j) {
                const std::uint8_t byte = row[(j / 32) * 16 + (j % 32) % 16];
                const int q = (j % 32 < 16 ? byte & 0x0F : byte >> 4) - 8;
                const float s = _cvtsh_ss(scales[i * groups + j / 64]);
                acc += s * float(q) * x[bb * n_in + j];
            }
            y[bb * n_out + i] = acc;
        }
}
