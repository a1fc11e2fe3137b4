// The checks of the tensor-core wrappers (kernels/cuda/tensor_core.cuh), one
// home for both runs of the test kernels of tests/emu/tensor_core.cu: under
// the emulator (tests/emu/test_emu.cpp, EmuTensorCore.*) and compiled by nvcc
// on a GPU (tests/tensor_core/test_tensor_core_cuda.cpp, TensorCoreCuda.*).
// Each check calls the kernels' host wrappers (tests/emu/emu_kernels.hpp) and
// reports through GoogleTest; what it expects is computed on the host, in
// fp64, from the layouts the PTX ISA documents.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

// The bf16 and f16 types and their host conversions: the emulator's, or the
// CUDA toolkit's (a host compiler's translation unit, beside nvcc's kernels).
#ifdef MEMWALL_EMU
#include "harness/emu/cuda_emu.hpp"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif
#include "tests/emu/emu_kernels.hpp"

namespace mw::test::tensor_core {

// Random 16-bit values (bf16 or f16 bits) drawn from [-2, 2], and their values as doubles.
inline std::vector<std::uint16_t> halves(std::size_t n, unsigned seed, bool f16, std::vector<double>& value) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    std::vector<std::uint16_t> bits(n);
    value.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        const float x = dist(gen);
        bits[i] = f16 ? __half_as_ushort(__float2half(x)) : __bfloat16_as_ushort(__float2bfloat16(x));
        value[i] = f16 ? __half2float(__ushort_as_half(bits[i])) : __bfloat162float(__ushort_as_bfloat16(bits[i]));
    }
    return bits;
}

// C of D = A B + C: n floats from [-1, 1].
inline std::vector<float> accumulator(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> c(n);
    for (float& x : c) x = dist(gen);
    return c;
}

// How far a 16 x 8 tile is from A B + C (computed in fp64): the worst
// |got - want|, and the worst of |got - want| over the bound of f32
// accumulation of that element's 17 terms, 16 * 2^-23 * (|c| + sum |a b|)
// (the products of 16-bit inputs are exact; each of the 16 additions costs
// at most 2^-23 of the magnitudes so far, truncated as tensor cores do, or
// half that rounded). The emulator rounds once (well inside it); a GPU's
// order and rounding of the sum are its own, so it is held to the bound.
struct MmaError {
    double worst = 0;           // max |got - want|
    double worst_vs_bound = 0;  // max |got - want| / bound: at most 1 when right
};
inline MmaError mma_error(const std::vector<float>& got, const std::vector<double>& A, const std::vector<double>& B,
                          const std::vector<float>& C) {
    MmaError e;
    for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) {
            double want = C[m * 8 + n], magnitude = std::abs(want);
            for (int k = 0; k < 16; ++k) {
                want += A[m * 16 + k] * B[k * 8 + n];
                magnitude += std::abs(A[m * 16 + k] * B[k * 8 + n]);
            }
            const double off = std::abs(double(got[m * 8 + n]) - want);  // NaN compares false: caught below
            const double bound = 16 * std::ldexp(magnitude, -23);
            e.worst = std::isnan(off) ? INFINITY : std::max(e.worst, off);
            e.worst_vs_bound = std::isnan(off) ? INFINITY : std::max(e.worst_vs_bound, bound > 0 ? off / bound : off);
        }
    return e;
}

// mma_m16n8k16 on the documented fragment layouts, bf16 and f16: the
// product A B + C within f32 accumulation's bound; a lane that holds the
// wrong fragment (a[1] and a[2] swapped) computes a wrong product.
inline void check_mma_follows_the_ptx_layouts() {
    for (const bool f16 : {false, true}) {
        std::vector<double> a, b;
        const auto A = halves(256, 41, f16, a), B = halves(128, 43, f16, b);
        const auto C = accumulator(128, 47);
        const MmaError right = mma_error(emu_test::mma_tile(A, B, C, f16, false), a, b, C);
        EXPECT_LE(right.worst_vs_bound, 1.0) << (f16 ? "f16" : "bf16") << ": worst error " << right.worst;
        EXPECT_GT(mma_error(emu_test::mma_tile(A, B, C, f16, true), a, b, C).worst, 0.1) << (f16 ? "f16" : "bf16");
    }
}

// ldmatrix .x1/.x2/.x4, with and without .trans, of four 8 x 8 matrices
// M[m][row][col] = 1000 + 64 m + 8 row + col: lane l's register i holds
// matrix i's row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 (low half
// first); with .trans, column l / 4 of rows 2 (l % 4) and 2 (l % 4) + 1.
inline void check_ldmatrix_follows_the_ptx_layouts() {
    std::vector<std::uint16_t> M(4 * 64);
    for (int i = 0; i < 4 * 64; ++i) M[std::size_t(i)] = std::uint16_t(1000 + i);
    auto at = [&](int m, int row, int col) { return unsigned(M[std::size_t(m * 64 + row * 8 + col)]); };
    for (const int n : {1, 2, 4})
        for (const bool trans : {false, true}) {
            const auto got = emu_test::ldmatrix_lanes(M, n, trans);
            for (int lane = 0; lane < 32; ++lane)
                for (int i = 0; i < n; ++i) {
                    const int r = lane / 4, c = 2 * (lane % 4);
                    const unsigned want =
                        trans ? at(i, c, r) | at(i, c + 1, r) << 16 : at(i, r, c) | at(i, r, c + 1) << 16;
                    ASSERT_EQ(got[std::size_t(lane * n + i)], want)
                        << "x" << n << (trans ? ".trans" : "") << ", lane " << lane << ", register " << i;
                }
        }
}

// A's fragment by ldmatrix.x4 and B's by ldmatrix.x2.trans, from row-major
// tiles in shared memory, fed to mma_m16n8k16 (bf16): D = A B.
inline void check_mma_from_ldmatrix_fragments_is_the_product() {
    std::vector<double> a, b;
    const auto A = halves(256, 53, false, a), B = halves(128, 59, false, b);
    const MmaError e = mma_error(emu_test::mma_via_ldmatrix(A, B), a, b, std::vector<float>(128, 0.0f));
    EXPECT_LE(e.worst_vs_bound, 1.0) << "worst error " << e.worst;
}

// cp.async in two groups: after wait_group 1 the older group has landed;
// after wait_group 0 both have, and the bytes past `src_bytes` of a partial
// copy are zero (4, 8 and 0 of 16 bytes read).
inline void check_cp_async_groups_land_in_order() {
    std::vector<float> in(256);
    for (int i = 0; i < 256; ++i) in[std::size_t(i)] = 0.5f + float(i);
    for (const int tail : {16, 4, 8, 0}) {
        const auto out = emu_test::cp_async_stages(in, tail);
        for (int i = 0; i < 128; ++i) EXPECT_EQ(out[std::size_t(i)], in[std::size_t(i)]) << "stage 0 after wait_group 1, float " << i;
        for (int i = 0; i < 256; ++i) {
            const float want = i >= 252 && (i - 252) * 4 >= tail ? 0.0f : in[std::size_t(i)];
            EXPECT_EQ(out[256 + std::size_t(i)], want) << "after wait_group 0, float " << i << ", tail " << tail;
        }
    }
}

// The warp matrix API (wmma, 16x16x16, bf16 in, f32 accumulate): D = A B + C
// within f32 accumulation's bound, element by element.
inline void check_wmma_is_the_product() {
    std::vector<double> a, b;
    const auto A = halves(256, 61, false, a), B = halves(256, 67, false, b);
    const auto C = accumulator(256, 71);
    const auto D = emu_test::wmma_tile(A, B, C);
    for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 16; ++n) {
            double want = C[std::size_t(m * 16 + n)], magnitude = std::abs(want);
            for (int k = 0; k < 16; ++k) {
                want += a[std::size_t(m * 16 + k)] * b[std::size_t(k * 16 + n)];
                magnitude += std::abs(a[std::size_t(m * 16 + k)] * b[std::size_t(k * 16 + n)]);
            }
            EXPECT_LE(std::abs(double(D[std::size_t(m * 16 + n)]) - want), 16 * std::ldexp(magnitude, -23))
                << "D[" << m << "][" << n << "] = " << D[std::size_t(m * 16 + n)] << ", want " << want;
        }
}

}  // namespace mw::test::tensor_core
