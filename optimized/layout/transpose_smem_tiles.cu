// transpose on the GPU, rung 1: a 32x32 tile staged in shared memory.
// (The whole ladder is listed in reference/layout/transpose.cu.)
//
// Change from rung 0 (naive): a block of 32x8 threads owns a 32x32 tile. It
// reads the tile row by row (each warp 32 consecutive floats of a row of
// `in`: coalesced) into shared memory, waits, and writes the transposed tile
// row by row (each warp 32 consecutive floats of a row of `out`: coalesced),
// taking them down a column of the shared tile. The scattering moves from
// global memory, where it costs a sector per float, into shared memory,
// which has no sectors but 32 banks, 4 bytes wide, word w in bank w mod 32.
// A column of a [32][32] float array is 32 words 32 words apart, all in one
// bank, so each warp's column read is a 32-way bank conflict, served as 32
// serialized wavefronts instead of 1. Rung 2 removes that.
//
// Bytes (sectors between the SMs and L2): every sector read and written
// whole once: 8*R*C (rung 0: 36*R*C). The bank conflicts cost shared-memory
// cycles, not bytes: this rung and rung 2 move the same bytes.
#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"

namespace {

constexpr int TILE = 32, ROWS = 8;  // 32x8 threads, each moves 4 elements

__global__ void transpose_smem_tiles_kernel(const float* __restrict__ in, float* __restrict__ out, int R, int C) {
    __shared__ float tile[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x;  // column of `in`
    int y = blockIdx.y * TILE + threadIdx.y;  // row of `in`
    for (int r = 0; r < TILE; r += ROWS)
        if (y + r < R && x < C) tile[threadIdx.y + r][threadIdx.x] = in[(y + r) * C + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;  // column of `out` = row of `in`
    y = blockIdx.x * TILE + threadIdx.y;  // row of `out` = column of `in`
    for (int r = 0; r < TILE; r += ROWS)
        if (y + r < C && x < R) out[(y + r) * R + x] = tile[threadIdx.x][threadIdx.y + r];  // a column: one bank
}

mw::Instance prepare_smem_tiles(mw::Problem& p) {
    const int R = int(p.shape["rows"]), C = int(p.shape["cols"]);
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        const dim3 grid((C + TILE - 1) / TILE, (R + TILE - 1) / TILE);
        mw::launch(transpose_smem_tiles_kernel, grid, dim3(TILE, ROWS), 0, d.stream, d.in<const float>("in"),
                   d.out<float>("out"), R, C);
    });
}

}  // namespace

MW_REGISTER_VARIANT(transpose_smem_tiles_cuda, {
    .name = "smem_tiles", .op = "transpose", .lever = "layout",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 1,
    .rationale = "a 32x32 tile staged in shared memory: global reads and writes both coalesced (8 bytes per "
                 "element instead of 36), at the price of 32-way bank conflicts on the column reads",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return 8.0 * double(s["rows"]) * s["cols"]; },
    .prepare = prepare_smem_tiles });
