// GEMM on the GPU, rung 0 of 9: naive, one thread per element of C.
//
// The CUDA ladder (C[M,N] = A[M,K] * B[K,N], row-major fp32), one idea a rung:
//   reference/vectorization/gemm.cu                   0 naive (this file)
//   optimized/vectorization/gemm_coalesced.cu         1 threadIdx.x along columns: coalesced B and C
//   optimized/vectorization/gemm_smem_tiles.cu        2 32x32 shared-memory tiles: 16x fewer global loads
//   optimized/vectorization/gemm_register_tiles.cu    3 8x8 outputs per thread from registers
//   optimized/vectorization/gemm_vectorized.cu        4 float4 global loads, transposed A tile
//   optimized/vectorization/gemm_wmma.cu              5 bf16 tensor cores through the wmma API
//   optimized/vectorization/gemm_mma.cu               6 the same by hand: mma.sync on ldmatrix fragments
//   optimized/vectorization/gemm_mma_pipelined.cu     7 the same fed by a 3-stage cp.async pipeline
//   optimized/vectorization/gemm_mma_swizzled.cu      8 the same, shared tiles swizzled: no bank conflicts
//   optimized/vectorization/gemm_cublas.cu       vendor cublasSgemm, and cublasGemmEx on bf16
// Run: memwall run vectorization --backend cuda   (or --backend cuda-emu without a GPU)
//
// What this rung does: thread (x, y) computes C[i][j] with i (the row) taken
// from threadIdx.x, so the 32 threads of a warp cover 32 consecutive rows of
// one column j. Each k step the warp loads
//   - B[k][j]: one address for the whole warp (a broadcast), and
//   - A[i][k] for 32 rows: 32 addresses K floats apart, so 32 separate
//     32-byte sectors to deliver 128 useful bytes (uncoalesced),
// and the final stores to C are likewise N floats apart.
// Cost model: nothing is reused on purpose, every FMA loads both operands
// from global memory: 8 bytes per 2 FLOPs (bytes_blocked(s, 1, 1)); the
// caches catch some of it, the uncoalesced A loads waste most of each sector.
#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"
#include "reference/vectorization/gemm.hpp"

namespace {

__global__ void gemm_naive_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;  // row: neighbours in a warp are K floats apart in A
    const int j = blockIdx.y * blockDim.y + threadIdx.y;  // column: the same for the whole warp
    if (i >= M || j >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
    C[i * N + j] = acc;
}

mw::Instance prepare_naive(mw::Problem& p) {
    const int M = int(p.shape["m"]), N = int(p.shape["n"]), K = int(p.shape["k"]);
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        const dim3 block(32, 8);  // x: 32 rows (one warp), y: 8 columns
        const dim3 grid((M + block.x - 1) / block.x, (N + block.y - 1) / block.y);
        mw::launch(gemm_naive_kernel, grid, block, 0, d.stream, d.in<const float>("A"),
                   d.in<const float>("B"), d.out<float>("C"), M, N, K);
    });
}

}  // namespace

MW_REGISTER_VARIANT(gemm_naive_cuda, {
    .name = "naive", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "one thread per output with threads of a warp walking down a column: "
                 "B is broadcast but A is read with a stride of K floats, so every load is uncoalesced",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::gemm::bytes_blocked(s, 1, 1); },
    .prepare = prepare_naive });
