// An honest gemm-cuda submission that uses the runtime the way real CUDA
// code does, beyond one launch on the buffers it is given: a zero-byte
// allocation, a scratch copy of A made on the device (cudaMemcpy device to
// device), a cudaMemset, two launches, and a scratch buffer allocated and
// freed on every call. Under the grader's emulated device memory (held by the
// grader, each launch in a process of its own) it must keep full marks.
#include "harness/cuda/launch.hpp"

namespace {

__global__ void zero_kernel(float* C, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) C[i] = 0.0f;
}

__global__ void gemm_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
    if (i >= M || j >= N) return;
    float acc = C[i * N + j];  // zeroed by the first launch
    for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
    C[i * N + j] = acc;
}

}  // namespace

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t stream) {
    void* nothing = nullptr;
    float* scratch = nullptr;
    if (cudaMalloc(&nothing, 0) != cudaSuccess) return;
    if (cudaMalloc(reinterpret_cast<void**>(&scratch), sizeof(float) * M * K) != cudaSuccess) return;
    cudaMemset(scratch, 0x7F, sizeof(float) * M * K);
    cudaMemcpy(scratch, dA, sizeof(float) * M * K, cudaMemcpyDeviceToDevice);
    mw::launch(zero_kernel, dim3((M * N + 127) / 128), dim3(128), 0, stream, dC, M * N);
    mw::launch(gemm_kernel, dim3((N + 63) / 64, M), dim3(64), 0, stream, scratch, dB, dC, M, N, K);
    cudaFree(scratch);
    cudaFree(nothing);
}
