// GEMM on the GPU, rung 1 of 9: coalesced global access.
// (The whole ladder is listed in reference/vectorization/gemm.cu.)
//
// Change from rung 0 (naive): the same one-thread-per-output kernel with the
// thread-to-element map transposed: threadIdx.x now runs along the column j,
// so the 32 threads of a warp cover 32 neighbouring columns of one row i.
// Each k step the warp now loads
//   - A[i][k]: one address for the whole warp (a broadcast), and
//   - B[k][j..j+31]: 128 contiguous bytes, four full 32-byte sectors,
// and stores 128 contiguous bytes of C. The FLOPs are unchanged; the sectors
// moved per warp-wide load drop from 33 (32 for A + 1 for B) to 5 (1 + 4).
// Cost model: A is read once per 32 columns, B once per row of C:
// bytes_blocked(s, 1, 32), ~4.1 bytes per FMA.
#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"
#include "reference/vectorization/gemm.hpp"

namespace {

__global__ void gemm_coalesced_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                      float* __restrict__ C, int M, int N, int K) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;  // column: neighbours in a warp are adjacent in B and C
    const int i = blockIdx.y * blockDim.y + threadIdx.y;  // row: the same for the whole warp
    if (i >= M || j >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
    C[i * N + j] = acc;
}

mw::Instance prepare_coalesced(mw::Problem& p) {
    const int M = int(p.shape["m"]), N = int(p.shape["n"]), K = int(p.shape["k"]);
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        const dim3 block(32, 8);  // x: 32 columns (one warp), y: 8 rows
        const dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
        mw::launch(gemm_coalesced_kernel, grid, block, 0, d.stream, d.in<const float>("A"),
                   d.in<const float>("B"), d.out<float>("C"), M, N, K);
    });
}

}  // namespace

MW_REGISTER_VARIANT(gemm_coalesced_cuda, {
    .name = "coalesced", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 1,
    .rationale = "threads of a warp take neighbouring columns, so each warp reads B and writes C "
                 "in full 128-byte lines and A as a broadcast",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::gemm::bytes_blocked(s, 1, 32); },
    .prepare = prepare_coalesced });
