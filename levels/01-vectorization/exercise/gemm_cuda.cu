// Exercise gemm-cuda (level 01, vectorization): a fast GEMM kernel.
//
//   C[M][N] = A[M][K] * B[K][N], fp32, row-major, C overwritten (no +=).
//   dA, dB, dC are device pointers; launch on `stream`.
//
// Keep the signature exactly as it is, and launch through mw::launch (it is
// <<<grid, block, smem, stream>>> under nvcc, and runs the kernel on the CPU
// under the cuda-emu backend, so you can check correctness without a GPU):
//     memwall grade 01 --submission levels/01-vectorization/exercise/gemm_cuda.cu --seed 1
// Under cuda-emu only correctness is graded; speed (vs the project's
// register_tiles rung at 2048^3) needs a real GPU. Shapes include 1, 7, 33,
// 127, 129: guard every global access. The emulator poisons shared memory
// (NaN) and runs threads up to each __syncthreads in turn, so a missing
// barrier fails the check instead of passing by luck.
#include "harness/cuda/launch.hpp"

namespace {

__global__ void student_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
    // TODO: the textbook version: one thread per output, no reuse.
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= M || j >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
    C[i * N + j] = acc;
}

}  // namespace

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t stream) {
    const dim3 block(32, 8);
    const dim3 grid((N + block.x - 1) / block.x, (M + block.y - 1) / block.y);
    mw::launch(student_kernel, grid, block, 0, stream, dA, dB, dC, M, N, K);
}
