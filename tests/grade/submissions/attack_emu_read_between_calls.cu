// Attack (red-team batch 10), transpose-cuda under cuda-emu: device memory
// read back by the host just after a call returns. The grader dropped what
// the device server answered between two calls, so such a read was charged
// to no call. A thread of the submission's reads 4 bytes of the output once
// each call has returned, and each call waits (up to 10 s) until the last
// one's read has been answered: every read is answered in its own call,
// between calls, or in the next call, and now counts towards one of them —
// so of each shape's two calls, one is charged and the shape fails.
#include <atomic>
#include <chrono>
#include <thread>

#include "harness/cuda/launch.hpp"

namespace {
__global__ void transpose_kernel(const float* in, float* out, int R, int C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < R && col < C) out[col * R + row] = in[row * C + col];
}

std::atomic<const float*> g_last{nullptr};
std::atomic<int> g_calls{0}, g_answered{0};

void reader() {
    int seen = 0;
    for (;;) {
        const int now = g_calls.load();
        if (now == seen) {
            std::this_thread::yield();
            continue;
        }
        seen = now;
        float v = 0;
        cudaMemcpy(&v, g_last.load(), sizeof v, cudaMemcpyDeviceToHost);
        g_answered = seen;
    }
}
}  // namespace

void student_transpose_cuda(const float* d_in, float* d_out, int R, int C, cudaStream_t stream) {
    static std::thread* t = new std::thread(reader);
    (void)t;
    const int before = g_calls.load();
    const auto t0 = std::chrono::steady_clock::now();
    while (g_answered.load() < before && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
        std::this_thread::yield();
    mw::launch(transpose_kernel, dim3((C + 31) / 32, (R + 7) / 8), dim3(32, 8), 0, stream, d_in, d_out, R, C);
    g_last = d_out;
    ++g_calls;  // the reader reads once this call has returned, or as it does
}
