// GEMM on the GPU, rung 3 of 9: 2-D register tiling.
// (The whole ladder is listed in reference/vectorization/gemm.cu.)
//
// Change from rung 2 (smem_tiles): a block of 256 threads computes a 128x128
// block of C, each thread an 8x8 sub-block held in 64 registers. K is walked
// in steps of 8: the block stages a 128x8 tile of A and an 8x128 tile of B in
// shared memory, then every thread, for each of the 8 k, reads 8 values of A
// and 8 of B from shared memory into registers and does their 8x8 = 64 outer
// product FMAs.
// Effect:
//   - global: each element of A now feeds 128 columns and each element of B
//     128 rows, bytes_blocked(s, 128, 128) = 0.0625 bytes per FMA, 4x fewer
//     than rung 2;
//   - shared memory: 16 loads per 64 FMAs (0.25 per FMA) instead of 2 per
//     FMA, 8x fewer. Shared-memory bandwidth, not global memory, was rung 2's
//     limit, so this is the larger win; each thread also has 64 independent
//     accumulators to hide FMA latency.
//
// The kernel lives here, in a header of its own, so that level 01's
// reference solution can launch the very kernel this rung registers
// (the rung's prepare and registration are in gemm_register_tiles.cu).
#pragma once

#include "harness/cuda/device_problem.hpp"  // MW_LAUNCH_BOUNDS
#include "harness/cuda/launch.hpp"

namespace {

constexpr int BM = 128, BN = 128, BK = 8;  // block tile of C, and K step
constexpr int TM = 8, TN = 8;              // per-thread tile of C
constexpr int THREADS = (BM / TM) * (BN / TN);  // 256
static_assert(BM * BK % THREADS == 0 && BK * BN % THREADS == 0, "tiles must split evenly over threads");

// At most 128 registers a thread, so two 256-thread blocks (16 warps) share
// an SM; uncapped, nvcc spends ~136-166 and only one block fits.
__global__ void MW_LAUNCH_BOUNDS(THREADS, 2)
    gemm_register_tiles_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                               int M, int N, int K) {
    __shared__ float As[BM][BK];  // A tile as laid out in A: row-major, BK wide
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int trow = tid / (BN / TN);  // which 8 rows of the block tile this thread owns
    const int tcol = tid % (BN / TN);  // which 8 columns
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;

    float acc[TM][TN] = {};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        // Cooperative loads, zero-filled outside the matrices so the FMA loop
        // needs no guards. Consecutive threads take consecutive elements of a
        // row: 8 floats (one sector) per row of A, 128 contiguous floats of B.
#pragma unroll
        for (int l = 0; l < BM * BK / THREADS; ++l) {
            const int e = tid + l * THREADS, r = e / BK, c = e % BK;
            As[r][c] = (bm + r < M && k0 + c < K) ? A[(bm + r) * K + k0 + c] : 0.0f;
        }
#pragma unroll
        for (int l = 0; l < BK * BN / THREADS; ++l) {
            const int e = tid + l * THREADS, r = e / BN, c = e % BN;
            Bs[r][c] = (k0 + r < K && bn + c < N) ? B[(k0 + r) * N + bn + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int m = 0; m < TM; ++m) a[m] = As[trow * TM + m][k];
#pragma unroll
            for (int n = 0; n < TN; ++n) b[n] = Bs[k][tcol * TN + n];
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int n = 0; n < TN; ++n) acc[m][n] += a[m] * b[n];
        }
        __syncthreads();  // before the next iteration overwrites the tiles
    }

#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int r = bm + trow * TM + m;
        if (r >= M) break;  // rows only grow with m
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            const int c = bn + tcol * TN + n;
            if (c < N) C[r * N + c] = acc[m][n];
        }
    }
}

}  // namespace
