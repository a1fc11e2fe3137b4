// GEMM on the GPU, rung 2 of 9: shared-memory tiles.
// (The whole ladder is listed in reference/vectorization/gemm.cu.)
//
// Change from rung 1 (coalesced): a 32x32 block of threads still computes a
// 32x32 block of C, one output per thread, but it walks K in steps of 32:
// each step the block copies a 32x32 tile of A and a 32x32 tile of B into
// shared memory (one coalesced element per thread each), waits, and then
// every thread runs its 32 FMAs out of shared memory.
// Effect: every element of A and B loaded from global memory now feeds 32
// FMAs instead of 1 (A is re-read once per 32 columns, B once per 32 rows):
// 2 global loads per 32 FMAs, bytes_blocked(s, 32, 32) = 0.25 bytes per FMA,
// 16x fewer than rung 1 for A and B together. Shared memory now carries the
// per-FMA traffic (As[ty][k] is a broadcast, Bs[k][tx] hits 32 banks).
#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"
#include "reference/vectorization/gemm.hpp"

namespace {

constexpr int TILE = 32;

__global__ void gemm_smem_tiles_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                       float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Out-of-range elements load as zero, so the FMA loop below needs no
        // guards; no thread returns early, because all must reach the barriers.
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();  // before the next iteration overwrites the tiles
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

mw::Instance prepare_smem_tiles(mw::Problem& p) {
    const int M = int(p.shape["m"]), N = int(p.shape["n"]), K = int(p.shape["k"]);
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        const dim3 block(TILE, TILE);
        const dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
        mw::launch(gemm_smem_tiles_kernel, grid, block, 0, d.stream, d.in<const float>("A"),
                   d.in<const float>("B"), d.out<float>("C"), M, N, K);
    });
}

}  // namespace

MW_REGISTER_VARIANT(gemm_smem_tiles_cuda, {
    .name = "smem_tiles", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 2,
    .rationale = "32x32 tiles of A and B staged in shared memory, so each element loaded from "
                 "global memory feeds 32 FMAs instead of one",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::gemm::bytes_blocked(s, 32, 32); },
    .prepare = prepare_smem_tiles });
