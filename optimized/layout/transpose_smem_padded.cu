// transpose on the GPU, rung 2: the shared tile padded against bank
// conflicts. What the rung changes and what it buys, and its kernel:
// transpose_smem_padded.cuh. This file prepares and registers it.
#include "optimized/layout/transpose_smem_padded.cuh"
#include "harness/cuda/device_problem.hpp"

namespace {

mw::Instance prepare_smem_padded(mw::Problem& p) {
    const int R = int(p.shape["rows"]), C = int(p.shape["cols"]);
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        const dim3 grid((C + TILE - 1) / TILE, (R + TILE - 1) / TILE);
        mw::launch(transpose_smem_padded_kernel, grid, dim3(TILE, ROWS), 0, d.stream, d.in<const float>("in"),
                   d.out<float>("out"), R, C);
    });
}

}  // namespace

MW_REGISTER_VARIANT(transpose_smem_padded_cuda, {
    .name = "smem_padded", .op = "transpose", .lever = "layout",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 2,
    .rationale = "the shared tile's rows padded to 33 floats: a tile column spans all 32 banks, so the "
                 "32-way bank conflict of rung 1 becomes a single wavefront; same global bytes",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return 8.0 * double(s["rows"]) * s["cols"]; },
    .prepare = prepare_smem_padded });
