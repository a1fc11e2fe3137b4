// Attack on cuda-emu's grading of a CUDA exercise: host computation carried
// by kernels. When each launch ran in a process forked from the submission's
// own, a kernel saw everything the host had mapped: here a MAP_SHARED page
// the host made before launching. One kernel copies A and B from device
// memory into that mapping (no host read of device memory: the grader saw a
// launch's fetch), the host multiplies there with a plain loop, and a second
// kernel copies C from the mapping into device memory. It scored 60/60. Now
// kernels run in the kernel executor, a process of its own that shares
// nothing with the host but device memory: the host's mapping is not there,
// and the kernel's access to it faults, as a host pointer does on a GPU.
#include <sys/mman.h>

#include <cstddef>

#include "harness/cuda/launch.hpp"

namespace {

__global__ void to_host(const float* A, const float* B, float* shared, std::size_t a, std::size_t b) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    for (std::size_t i = 0; i < a; ++i) shared[i] = A[i];
    for (std::size_t i = 0; i < b; ++i) shared[a + i] = B[i];
}

__global__ void from_host(const float* shared, float* C, std::size_t c) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    for (std::size_t i = 0; i < c; ++i) C[i] = shared[i];
}

}  // namespace

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t stream) {
    const std::size_t a = std::size_t(M) * K, b = std::size_t(K) * N, c = std::size_t(M) * N;
    const std::size_t bytes = (a + b + c) * sizeof(float);
    auto* shared = static_cast<float*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (shared == MAP_FAILED) return;
    mw::launch(to_host, dim3(1), dim3(1), 0, stream, dA, dB, shared, a, b);
    const float *A = shared, *B = shared + a;
    float* C = shared + a + b;
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[std::size_t(i) * K + k] * B[std::size_t(k) * N + j];
            C[std::size_t(i) * N + j] = acc;
        }
    mw::launch(from_host, dim3(1), dim3(1), 0, stream, C, dC, c);
    munmap(shared, bytes);
}
