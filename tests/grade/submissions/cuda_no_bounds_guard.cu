// Negative control (CUDA): 16x16 shared-memory tiles whose loads assume M, N
// and K are multiples of 16. Right on 16-multiples, wrong on odd shapes: the
// edge tiles read past the rows they belong to (stores are guarded, so
// nothing is written out of bounds).
#include "harness/cuda/launch.hpp"

namespace {

constexpr int T = 16;

__global__ void tiled_unguarded(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int t = 0; t < (K + T - 1) / T; ++t) {
        As[ty][tx] = A[(row % M) * K + (t * T + tx) % K];  // no zero fill: wraps instead of guarding
        Bs[ty][tx] = B[((t * T + ty) % K) * N + col % N];
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

}  // namespace

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t stream) {
    const dim3 block(T, T), grid((N + T - 1) / T, (M + T - 1) / T);
    mw::launch(tiled_unguarded, grid, block, 0, stream, dA, dB, dC, M, N, K);
}
