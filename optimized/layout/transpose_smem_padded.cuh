// transpose on the GPU, rung 2: the shared tile padded against bank
// conflicts. (The whole ladder is listed in reference/layout/transpose.cu.)
//
// Change from rung 1 (smem_tiles): one declaration. The tile becomes
// float[32][33]: each row is padded by one unused float, so element (i, j)
// sits in bank (33*i + j) mod 32 = (i + j) mod 32. A column (j fixed, i =
// 0..31) now covers all 32 banks once, and the warp's column read is one
// wavefront instead of 32. The row writes into the tile stay conflict-free
// (consecutive j, consecutive banks). Cost: 32 x 4 bytes of shared memory
// per block (4224 bytes instead of 4096).
//
// Bytes: unchanged from rung 1, 8*R*C; global traffic was already minimal.
// What changes is shared-memory time: 32 wavefronts per warp column read
// become 1, so the kernel is limited by DRAM bandwidth rather than by
// shared-memory replays.
//
// The kernel lives here, in a header of its own, so that level 03's
// reference solution can launch the very kernel this rung registers
// (the rung's prepare and registration are in transpose_smem_padded.cu).
#pragma once

#include "harness/cuda/device_problem.hpp"  // MW_LAUNCH_BOUNDS
#include "harness/cuda/launch.hpp"

namespace {

constexpr int TILE = 32, ROWS = 8;

__global__ void transpose_smem_padded_kernel(const float* __restrict__ in, float* __restrict__ out, int R, int C) {
    __shared__ float tile[TILE][TILE + 1];  // +1: column reads hit 32 different banks
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int r = 0; r < TILE; r += ROWS)
        if (y + r < R && x < C) tile[threadIdx.y + r][threadIdx.x] = in[(y + r) * C + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int r = 0; r < TILE; r += ROWS)
        if (y + r < C && x < R) out[(y + r) * R + x] = tile[threadIdx.x][threadIdx.y + r];
}

}  // namespace
