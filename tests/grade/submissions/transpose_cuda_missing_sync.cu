// Negative control (level 03, transpose-cuda): the shared-memory tile
// without the __syncthreads() between filling the tile and reading it down
// its columns. Each thread reads elements other threads were to write; on a
// GPU the result depends on warp timing, under cuda-emu (threads run in
// order up to a barrier, shared memory poisoned with NaN) it is wrong every
// time, except on a 1 x 1 matrix, where each thread reads only what it wrote.
#include "harness/cuda/launch.hpp"

namespace {

constexpr int TILE = 32, ROWS = 8;

__global__ void tile_no_sync(const float* in, float* out, int R, int C) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int r = 0; r < TILE; r += ROWS)
        if (y + r < R && x < C) tile[threadIdx.y + r][threadIdx.x] = in[(y + r) * C + x];
    // missing: __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int r = 0; r < TILE; r += ROWS)
        if (y + r < C && x < R) out[(y + r) * R + x] = tile[threadIdx.x][threadIdx.y + r];
}

}  // namespace

void student_transpose_cuda(const float* d_in, float* d_out, int R, int C, cudaStream_t stream) {
    const dim3 grid((C + TILE - 1) / TILE, (R + TILE - 1) / TILE);
    mw::launch(tile_no_sync, grid, dim3(TILE, ROWS), 0, stream, d_in, d_out, R, C);
}
