// Attack class 6, a "CUDA" submission that launches no kernel: it computes
// the GEMM on the host through the device pointers. On a GPU that is an
// invalid host access; under cuda-emu (as the grader runs it) device memory
// is inaccessible outside kernels and copies too, so it crashes there as well.
#include "harness/cuda/launch.hpp"

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += dA[i * K + k] * dB[k * N + j];
            dC[i * N + j] = acc;
        }
}
