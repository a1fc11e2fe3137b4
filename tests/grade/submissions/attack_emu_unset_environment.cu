// Attack on cuda-emu's device memory, from inside the submission's process:
// a static initializer, run before main and before the emulator reads its
// environment, unsets the variables that tell the emulator to keep device
// memory out of host code's reach; then the GEMM is computed on the host
// through the device pointers. While the emulator's own process held device
// memory, that turned the protection off and scored full correctness. Now
// the grader holds device memory and stages the call's buffers itself: the
// pointers the submission is given are not memory of its process at all.
#include <cstdlib>

#include "harness/cuda/launch.hpp"

namespace {

const bool unset = [] {
    unsetenv("MEMWALL_EMU_DEVICE_FD");
    unsetenv("MEMWALL_EMU_DEVICE_MEMORY");
    return true;
}();

}  // namespace

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += dA[i * K + k] * dB[k * N + j];
            dC[i * N + j] = acc;
        }
}
