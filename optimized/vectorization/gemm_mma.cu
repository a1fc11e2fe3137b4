// GEMM on the GPU, rung 6 of 9: tensor cores (mma.sync m16n8k16, bf16 in, fp32
// accumulate), fragments loaded with ldmatrix.
// (The whole ladder is listed in reference/vectorization/gemm.cu; the
// wrappers and the fragment layouts they follow: kernels/cuda/tensor_core.cuh.)
//
// Change from rung 5 (wmma_bf16): the same tensor-core instruction, taken by
// hand instead of through the warp matrix API. A block of
// 4 warps computes a 64x64 block of C; each warp a 32x32 quarter, as 2 x 4
// tiles of 16x8, each one mma.sync per 16 of K (gemm_mma.cuh, shared with
// rungs 7 and 8). K is walked 32 at a time:
// the block stages a 64x32 tile of A and a 32x64 tile of B in shared memory,
// rounding fp32 to bf16 on the way (so half the shared bytes per element),
// and every warp reads its fragments with ldmatrix (A's four 8x8 matrices
// in one x4 load, B's column fragment transposed on the way with x2.trans)
// instead of element by element.
// Effect:
//   - compute: one mma.sync does 16x8x16 = 2048 multiply-adds; an H100 SXM's
//     bf16 tensor cores peak at 989 TFLOP/s against 67 for its fp32 FMAs
//     (harness/gpu_specs.cpp), so the roof this rung is judged against is
//     ~15x higher;
//   - global: bytes_blocked(s, 64, 64), twice rung 4's 128x128 traffic per
//     FMA; at 4096^3 that is 8.6 GB, 2.6 ms at 3.35 TB/s if none of the
//     re-reads hit in L2, against 0.14 ms of bf16 peak for the 137 GFLOP:
//     this rung is bound by how fast it feeds the tensor cores (global loads, and the conversion on
//     the way to shared memory, with no overlap of the next tile's loads:
//     what cp.async and a multi-stage pipeline add next), not by their peak;
//   - precision: the products are of bf16-rounded inputs (8 significant
//     bits), so the rung is checked against that contract
//     (gemm::oracle_bf16_inputs), and its error against the exact fp32
//     GEMM is recorded as the price of the format.
// Shapes: any M, N, K; edges are zero-filled in shared memory and the
// wasted multiply-adds of the last tiles are counted as executed FLOPs.
#include "optimized/vectorization/gemm_mma.cuh"
#include "harness/cuda/device_problem.hpp"
#include "reference/vectorization/gemm.hpp"

namespace {

__global__ void MW_LAUNCH_BOUNDS(MMA_THREADS)
    gemm_mma_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N,
                    int K) {
    __shared__ __align__(16) MmaPadded tiles;
    const int bm = int(blockIdx.y) * MMA_BM, bn = int(blockIdx.x) * MMA_BN;
    MmaAcc acc{};
    for (int k0 = 0; k0 < K; k0 += MMA_BK) {
        mma_stage_rounded(tiles, A, B, M, N, K, bm, bn, k0);
        __syncthreads();
        mma_warp_step(tiles, acc);
        __syncthreads();
    }
    mma_store(acc, C, M, N, bm, bn);
}

mw::Instance prepare_mma(mw::Problem& p) {
    const int M = int(p.shape["m"]), N = int(p.shape["n"]), K = int(p.shape["k"]);
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        const dim3 grid((N + MMA_BN - 1) / MMA_BN, (M + MMA_BM - 1) / MMA_BM);
        mw::launch(gemm_mma_kernel, grid, dim3(MMA_THREADS), 0, d.stream, d.in<const float>("A"),
                   d.in<const float>("B"), d.out<float>("C"), M, N, K);
    });
}

}  // namespace

MW_REGISTER_VARIANT(gemm_mma_cuda, {
    .name = "mma_bf16", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 6,
    .rationale = "bf16 tensor cores: each warp issues mma.sync m16n8k16 on fragments loaded with ldmatrix "
                 "from 64x32 / 32x64 shared tiles (fp32 rounded to bf16 on the way), fp32 accumulate",
    .needs = {"gpu", "sm_80"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::gemm::bytes_blocked(s, 64, 64); },
    .executed_flops = mma_padded_flops,
    .compute = "bf16",
    .prepare = prepare_mma,
    .contract_oracle = mw::gemm::oracle_bf16_inputs });
