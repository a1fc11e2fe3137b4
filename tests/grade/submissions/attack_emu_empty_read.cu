// Attack on cuda-emu's grading of a CUDA exercise, after red-team batch 9:
// a read of device memory by host code runs the call's queued kernels at
// once (the answer must be the truth) and so lets the host time them, which
// is why any read forfeits the call. A read of zero bytes counted nothing,
// and kept the call's points. This control computes C honestly, then reads
// nothing from device memory through the emulated runtime's own copy, and
// must lose its points for the read.
#include <cstddef>

#include "harness/cuda/launch.hpp"

namespace mw::emu::detail {
cudaError_t remote_copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
}

namespace {

__global__ void gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    const int i = int(blockIdx.y * blockDim.y + threadIdx.y), j = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= M || j >= N) return;
    float acc = 0;
    for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
    C[i * N + j] = acc;
}

}  // namespace

void student_gemm_cuda(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t stream) {
    const dim3 block(16, 16), grid((N + 15) / 16, (M + 15) / 16);
    mw::launch(gemm, grid, block, 0, stream, A, B, C, M, N, K);
    float none = 0;
    mw::emu::detail::remote_copy(&none, C, 0, cudaMemcpyDeviceToHost);
}
