// What the tensor-core GEMM rungs share: the block tile, its bf16 shared
// layout, and a warp's work on one staged tile (fragments by ldmatrix,
// products by mma.sync) and its store. The rungs: gemm_mma.cu (rung 5, the
// tiles staged by plain loads) and gemm_mma_pipelined.cu (rung 6, by
// cp.async in a three-stage pipeline); the instruction wrappers and the
// fragment layouts they follow: kernels/cuda/tensor_core.cuh.
//
// A block of 4 warps computes a 64x64 block of C, each warp a 32x32
// quarter as 2 x 4 tiles of 16x8 (one mma.sync m16n8k16 each per 16 of K),
// from a 64x32 tile of A and a 32x64 tile of B in shared memory, bf16.
#pragma once

#include <cmath>
#include <cstddef>

#include "harness/cuda/launch.hpp"
#include "harness/registry.hpp"
#include "kernels/cuda/tensor_core.cuh"

namespace {

constexpr int MMA_BM = 64, MMA_BN = 64, MMA_BK = 32;  // block tile of C, and K step
constexpr int MMA_THREADS = 128;                      // 4 warps, 2 x 2 over the block tile
constexpr int MMA_PAD = 8;  // bf16 elements after each shared row: rows stay 16-byte aligned for ldmatrix

// One stage of staged operands (bf16 bits).
struct MmaTiles {
    unsigned short a[MMA_BM][MMA_BK + MMA_PAD];
    unsigned short b[MMA_BK][MMA_BN + MMA_PAD];
};

struct MmaAcc {
    float v[2][4][4];  // [16-row tile][8-column tile][fragment element]
};

// The warp's 32x32 of the block tile: rows wm.., columns wn.. .
__device__ inline int mma_warp_row() { return int(threadIdx.x / 32) / 2 * 32; }
__device__ inline int mma_warp_col() { return int(threadIdx.x / 32) % 2 * 32; }

// acc += the warp's part of A_tile B_tile. A's fragment of a 16x16 tile:
// lanes 8j..8j+7 give the rows of matrix j (a[0]: rows 0-7 cols 0-7, a[1]:
// rows 8-15, a[2]: cols 8-15, a[3]: both); B's: rows k 0-15 of an 8-wide
// column strip, transposed into the "col" fragment.
__device__ inline void mma_warp_step(const MmaTiles& t, MmaAcc& acc) {
    const int lane = int(threadIdx.x % 32), j = lane / 8, wm = mma_warp_row(), wn = mma_warp_col();
    for (int kk = 0; kk < MMA_BK; kk += 16) {
        unsigned a[2][4], b[4][2];
        for (int mi = 0; mi < 2; ++mi)
            mw::tc::ldmatrix<4>(a[mi], &t.a[wm + mi * 16 + (j % 2) * 8 + lane % 8][kk + (j / 2) * 8]);
        for (int ni = 0; ni < 4; ++ni) mw::tc::ldmatrix<2, true>(b[ni], &t.b[kk + lane % 16][wn + ni * 8]);
        for (int mi = 0; mi < 2; ++mi)
            for (int ni = 0; ni < 4; ++ni)
                mw::tc::mma_m16n8k16<__nv_bfloat16>(acc.v[mi][ni], a[mi], b[ni], acc.v[mi][ni]);
    }
}

// The warp's accumulators into C (M x N, row-major) for the block tile at
// (bm, bn). D's fragment: lane (g, t) holds rows g and g + 8, columns 2t
// and 2t + 1.
__device__ inline void mma_store(const MmaAcc& acc, float* C, int M, int N, int bm, int bn) {
    const int lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
    for (int mi = 0; mi < 2; ++mi)
        for (int ni = 0; ni < 4; ++ni)
            for (int h = 0; h < 2; ++h) {
                const int r = bm + mma_warp_row() + mi * 16 + g + 8 * h, c = bn + mma_warp_col() + ni * 8 + 2 * t;
                if (r >= M) continue;
                if (c < N) C[std::size_t(r) * N + c] = acc.v[mi][ni][2 * h];
                if (c + 1 < N) C[std::size_t(r) * N + c + 1] = acc.v[mi][ni][2 * h + 1];
            }
}

// The multiply-adds the block tiles really do, as FLOPs: every dimension
// padded to the tile (zeros multiplied at the edges).
inline double mma_padded_flops(const mw::Shape& s) {
    const auto up = [](double x, double to) { return std::ceil(x / to) * to; };
    return 2.0 * up(double(s["m"]), MMA_BM) * up(double(s["n"]), MMA_BN) * up(double(s["k"]), MMA_BK);
}

__device__ inline unsigned short mma_to_bf16(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }

}  // namespace
