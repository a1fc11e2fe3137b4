// GEMM on the GPU, rung 5 of 9: tensor cores through the warp matrix API
// (nvcuda::wmma: 16x16x16 bf16 tiles, fp32 accumulate).
// (The whole ladder is listed in reference/vectorization/gemm.cu; the API,
// and its emulation under cuda-emu: kernels/cuda/wmma.cuh.)
//
// Change from rung 4 (vectorized): the multiply-adds leave the CUDA cores
// for the tensor cores, by the simplest route. A block of 4 warps computes a
// 64x64 block of C, each warp a 32x32 quarter as 2 x 2 tiles of 16x16. K is
// walked 32 at a time: the block stages a 64x32 tile of A and a 32x64 tile
// of B in shared memory (rounding fp32 to bf16 on the way: the tensor cores
// multiply 16-bit inputs), and each warp, per 16 of K, loads its fragments
// with load_matrix_sync and multiplies them with mma_sync. The API hides
// which lane holds which element: the accumulators go back through shared
// memory (store_matrix_sync) to reach C with its edges cut.
// Effect:
//   - compute: an H100 SXM's bf16 tensor cores peak at 989 TFLOP/s against
//     67 for its fp32 FMAs (harness/gpu_specs.cpp): the roof is ~15x higher;
//   - global: bytes_blocked(s, 64, 64), twice rung 4's traffic per FMA, and
//     nothing overlaps the loads of the next tile with this one's products:
//     this rung feeds the tensor cores far slower than they can multiply.
//     The next rungs take the same route by hand (mma.sync on ldmatrix
//     fragments, rung 6), then overlap the loads (cp.async, rung 7) and
//     remove shared-memory bank conflicts (rung 8);
//   - precision: the products are of bf16-rounded inputs (8 significant
//     bits), so the rung is checked against that contract
//     (gemm::oracle_bf16_inputs); its error against the exact fp32 GEMM is
//     recorded as the price of the format.
#include "optimized/vectorization/gemm_mma.cuh"
#include "harness/cuda/device_problem.hpp"
#include "kernels/cuda/wmma.cuh"
#include "reference/vectorization/gemm.hpp"

namespace {

constexpr int WMMA_CPAD = 4;  // floats after each row of the staged C tile

__global__ void MW_LAUNCH_BOUNDS(MMA_THREADS)
    gemm_wmma_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N,
                     int K) {
    namespace wmma = mw::wmma;
    __shared__ __align__(32) MmaPadded tiles;
    __shared__ __align__(32) float out[MMA_BM][MMA_BN + WMMA_CPAD];
    const int tid = int(threadIdx.x);
    const int bm = int(blockIdx.y) * MMA_BM, bn = int(blockIdx.x) * MMA_BN;
    const int wm = mma_warp_row(), wn = mma_warp_col();
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
    for (auto& row : acc)
        for (auto& f : row) wmma::fill_fragment(f, 0.0f);
    for (int k0 = 0; k0 < K; k0 += MMA_BK) {
        mma_stage_rounded(tiles, A, B, M, N, K, bm, bn, k0);
        __syncthreads();
        for (int kk = 0; kk < MMA_BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b[2];
            for (int i = 0; i < 2; ++i) {
                wmma::load_matrix_sync(a[i], reinterpret_cast<const __nv_bfloat16*>(tiles.at_a(wm + 16 * i, kk)),
                                       MMA_BK + MMA_PAD);
                wmma::load_matrix_sync(b[i], reinterpret_cast<const __nv_bfloat16*>(tiles.at_b(kk, wn + 16 * i)),
                                       MMA_BN + MMA_PAD);
            }
            for (int i = 0; i < 2; ++i)
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(&out[wm + 16 * i][wn + 16 * j], acc[i][j], MMA_BN + WMMA_CPAD,
                                    wmma::mem_row_major);
    __syncthreads();
    for (int i = tid; i < MMA_BM * MMA_BN; i += MMA_THREADS) {
        const int r = i / MMA_BN, c = i % MMA_BN;
        if (bm + r < M && bn + c < N) C[std::size_t(bm + r) * N + bn + c] = out[r][c];
    }
}

mw::Instance prepare_wmma(mw::Problem& p) {
    const int M = int(p.shape["m"]), N = int(p.shape["n"]), K = int(p.shape["k"]);
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        const dim3 grid((N + MMA_BN - 1) / MMA_BN, (M + MMA_BM - 1) / MMA_BM);
        mw::launch(gemm_wmma_kernel, grid, dim3(MMA_THREADS), 0, d.stream, d.in<const float>("A"),
                   d.in<const float>("B"), d.out<float>("C"), M, N, K);
    });
}

}  // namespace

MW_REGISTER_VARIANT(gemm_wmma_cuda, {
    .name = "wmma_bf16", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 5,
    .rationale = "bf16 tensor cores through the warp matrix API (wmma load/mma/store_matrix_sync on 16x16x16 "
                 "tiles from 64x32 / 32x64 shared tiles, fp32 rounded to bf16 on the way), fp32 accumulate",
    .needs = {"gpu", "sm_80"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::gemm::bytes_blocked(s, 64, 64); },
    .executed_flops = mma_padded_flops,
    .compute = "bf16",
    .prepare = prepare_wmma,
    .contract_oracle = mw::gemm::oracle_bf16_inputs });
