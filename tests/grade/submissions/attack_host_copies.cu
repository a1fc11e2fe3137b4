// Attack on cuda-emu's grading of a CUDA exercise: the work done on the host
// through the runtime's copies. The "device" function launches one empty
// kernel (so that the call is not kernel-free), copies A and B to the host
// with cudaMemcpy, multiplies there with a plain loop, and copies C back.
// The device memory is the grader's, so no pointer trick is needed: the
// copy API reaches it. Under cuda-emu only correctness is graded, so this
// scored 60/60 while no kernel computed anything. The grader now counts
// what the submission's host code reads back from device memory during a
// call: none is allowed (the grader reads the outputs itself).
#include <vector>

#include "harness/cuda/launch.hpp"

namespace {
__global__ void nothing() {}
}  // namespace

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t stream) {
    mw::launch(nothing, dim3(1), dim3(1), 0, stream);
    std::vector<float> A(std::size_t(M) * K), B(std::size_t(K) * N), C(std::size_t(M) * N, 0.0f);
    cudaMemcpy(A.data(), dA, A.size() * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(B.data(), dB, B.size() * sizeof(float), cudaMemcpyDeviceToHost);
    for (int i = 0; i < M; ++i)
        for (int k = 0; k < K; ++k)
            for (int j = 0; j < N; ++j) C[std::size_t(i) * N + j] += A[std::size_t(i) * K + k] * B[std::size_t(k) * N + j];
    cudaMemcpy(dC, C.data(), C.size() * sizeof(float), cudaMemcpyHostToDevice);
}
