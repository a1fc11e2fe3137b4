// Attack (red-team batch 12), transpose-cuda under cuda-emu: after its
// (honest) launch, the host queues 4800 cudaMemsets of a 768 MiB scratch
// allocation. Each is answered at once and waits in the grader's queue;
// the grader applies the queue when the call returns, in its own thread,
// and the time limit's watchdog only cut the wires: the sets ran on, 7
// minutes past a 300 s limit. Now the watchdog stops the queue: the grade
// ends soon after its time limit (LayoutGradeCudaEmu.QueuedWorkStopsAtTheTimeLimit).
#include "harness/cuda/launch.hpp"

namespace {
__global__ void transpose_kernel(const float* in, float* out, int R, int C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < R && col < C) out[col * R + row] = in[row * C + col];
}
}  // namespace

void student_transpose_cuda(const float* d_in, float* d_out, int R, int C, cudaStream_t stream) {
    mw::launch(transpose_kernel, dim3((C + 31) / 32, (R + 7) / 8), dim3(32, 8), 0, stream, d_in, d_out, R, C);
    static bool done = false;
    if (done) return;
    done = true;
    void* scratch = nullptr;
    const std::size_t bytes = std::size_t(768) << 20;
    if (cudaMalloc(&scratch, bytes) != cudaSuccess) return;
    for (int i = 0; i < 4800; ++i)
        if (cudaMemset(scratch, i & 0xFF, bytes) != cudaSuccess) break;
}
