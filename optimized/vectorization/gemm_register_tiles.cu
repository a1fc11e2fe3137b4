// GEMM on the GPU, rung 3 of 9: 2-D register tiling. What the rung changes
// and what it buys, and its kernel: gemm_register_tiles.cuh. This file
// prepares and registers it.
#include "optimized/vectorization/gemm_register_tiles.cuh"
#include "harness/cuda/device_problem.hpp"
#include "reference/vectorization/gemm.hpp"

namespace {

mw::Instance prepare_register_tiles(mw::Problem& p) {
    const int M = int(p.shape["m"]), N = int(p.shape["n"]), K = int(p.shape["k"]);
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        const dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
        mw::launch(gemm_register_tiles_kernel, grid, dim3(THREADS), 0, d.stream, d.in<const float>("A"),
                   d.in<const float>("B"), d.out<float>("C"), M, N, K);
    });
}

}  // namespace

MW_REGISTER_VARIANT(gemm_register_tiles_cuda, {
    .name = "register_tiles", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 3,
    .rationale = "each thread computes an 8x8 block of C in registers from 128x8 and 8x128 shared "
                 "tiles, cutting shared-memory loads per FMA 8x and global loads 4x",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::gemm::bytes_blocked(s, 128, 128); },
    .prepare = prepare_register_tiles });
