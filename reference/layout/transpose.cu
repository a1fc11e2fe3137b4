// transpose on the GPU, rung 0: one thread per element, straight through.
//
// The CUDA ladder (out[C,R] = in[R,C]^T, fp32, exact):
//   reference/layout/transpose.cu                 0 naive (this file)
//   optimized/layout/transpose_smem_tiles.cu      1 32x32 tile in shared memory: both sides coalesced
//   optimized/layout/transpose_smem_padded.cu     2 the tile's rows padded to 33 floats: no bank conflicts
// Run: memwall run transpose --backend cuda   (or --backend cuda-emu without a GPU)
//
// What this rung does: blocks of 32x8 threads, threadIdx.x along the columns
// of `in`. A warp reads 32 consecutive floats of one row of `in`: 128 bytes,
// 4 whole 32-byte sectors (coalesced). It then writes them to one column of
// `out`: 32 addresses R*4 bytes apart, 32 different sectors, each carrying 4
// useful bytes of its 32. The L2 may merge the partial sectors that the 8
// warps of a block write into the same lines before anything reaches DRAM,
// but every one of them is a separate transaction between the SM and L2.
//
// Bytes (32-byte sectors between the SMs and L2): 4 per element read, 32 per
// element written:
//     36*R*C        (the tiled rungs: 8*R*C).
#include <stdexcept>
#include <string>

#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"

namespace {

__global__ void transpose_naive_kernel(const float* __restrict__ in, float* __restrict__ out, int R, int C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;  // a warp: 32 consecutive columns of one row
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < R && col < C) out[col * R + row] = in[row * C + col];
}

mw::Instance prepare_naive(mw::Problem& p) {
    const int R = int(p.shape["rows"]), C = int(p.shape["cols"]);
    const dim3 block(32, 8);
    const dim3 grid((C + 31) / 32, (R + 7) / 8);
    if (grid.y > 65535)
        throw std::runtime_error("transpose naive (cuda): rows=" + std::to_string(R) +
                                 " needs more than 65535 blocks along y (max rows 524280)");
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        mw::launch(transpose_naive_kernel, grid, block, 0, d.stream, d.in<const float>("in"), d.out<float>("out"), R,
                   C);
    });
}

}  // namespace

MW_REGISTER_VARIANT(transpose_naive_cuda, {
    .name = "naive", .op = "transpose", .lever = "layout",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "one thread per element: reads are coalesced, but each warp's 32 writes land in 32 "
                 "different 32-byte sectors, 4 useful bytes in each",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return 36.0 * double(s["rows"]) * s["cols"]; },
    .prepare = prepare_naive,
    .accepts = [](const mw::Shape& s) -> std::string {
        return s["rows"] > 524280 ? "rows > 524280 (65535 blocks of 8 rows along the grid's y)" : "";
    } });
