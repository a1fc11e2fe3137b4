// Negative control (CUDA): a correctly guarded 16x16 tiled kernel without the
// __syncthreads() between loading a tile and reading it. On a GPU it is right
// or wrong by luck; the emulator runs each thread up to its next barrier in
// turn, so threads read tile entries their neighbours have not written yet
// (NaN poison) on every run.
#include "harness/cuda/launch.hpp"

namespace {

constexpr int T = 16;

__global__ void tiled_no_sync(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int t = 0; t < (K + T - 1) / T; ++t) {
        const int ka = t * T + tx, kb = t * T + ty;
        As[ty][tx] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
        // missing: __syncthreads();
        for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

}  // namespace

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t stream) {
    const dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
    mw::launch(tiled_no_sync, grid, block, 0, stream, dA, dB, dC, M, N, K);
}
