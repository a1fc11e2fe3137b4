// Attack (red-team batch 10), transpose-cuda under cuda-emu: device memory
// read back by the host just after a call returns. The grader dropped what
// the device server answered between two calls, so such a read was charged
// to no call. A thread of the submission's reads 4 bytes of the output as
// soon as each call returns; every read now counts towards the call it is
// answered in or the next one, so every shape (two calls each) fails.
#include <atomic>
#include <thread>

#include "harness/cuda/launch.hpp"

namespace {
__global__ void transpose_kernel(const float* in, float* out, int R, int C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < R && col < C) out[col * R + row] = in[row * C + col];
}

std::atomic<const float*> g_last{nullptr};
std::atomic<int> g_calls{0};

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
    }
}
}  // namespace

void student_transpose_cuda(const float* d_in, float* d_out, int R, int C, cudaStream_t stream) {
    static std::thread* t = new std::thread(reader);
    (void)t;
    mw::launch(transpose_kernel, dim3((C + 31) / 32, (R + 7) / 8), dim3(32, 8), 0, stream, d_in, d_out, R, C);
    g_last = d_out;
    ++g_calls;  // the reader reads once this call has returned, or as it does
}
