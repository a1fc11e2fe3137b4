// Attack on cuda-emu's grading of a CUDA exercise, after red-team batch 9's
// attack_timing_transpose.cu (20/60 with kernels that wrote nothing): a
// kernel sleeps as long as two bits of its input say, and the host times
// each launch, a call's small inputs in a few dozen launches. Now the host
// is answered at once and its kernels run when the call has returned, so
// no launch takes longer for the host than any other.
//
// This control's first call times a launch of a kernel that returns at once
// and of one that sleeps 0.3 s (each launch and a synchronize), and fails
// with "LAUNCH_MS short=... long=...".
#include <time.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "harness/cuda/launch.hpp"

namespace {

__global__ void nap(double seconds) {
    timespec t{time_t(seconds), long((seconds - double(time_t(seconds))) * 1e9)};
    nanosleep(&t, nullptr);
}

double timed_launch(double seconds, cudaStream_t stream) {
    const auto t0 = std::chrono::steady_clock::now();
    mw::launch(nap, dim3(1), dim3(1), 0, stream, seconds);
    cudaStreamSynchronize(stream);
    cudaDeviceSynchronize();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void student_gemm_cuda(const float*, const float*, float*, int, int, int, cudaStream_t stream) {
    const double short_ms = timed_launch(0.0, stream), long_ms = timed_launch(0.3, stream);
    char buf[96];
    std::snprintf(buf, sizeof buf, "LAUNCH_MS short=%.1f long=%.1f", short_ms, long_ms);
    throw std::runtime_error(buf);
}
