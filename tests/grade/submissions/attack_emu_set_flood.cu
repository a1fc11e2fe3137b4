// Attack (red-team batch 10), transpose-cuda under cuda-emu: after its
// (honest) launch, the host floods the device with one-byte cudaMemsets of
// a scratch buffer (the red team sent empty ones on the wire itself). Each
// waits in the grader's queue behind the launch; nothing bounded their
// number, and a flood grew the grader by 1.7 GB in 200 s. Now every queued
// request counts against the queue's budget: the flood is refused within
// 2^18 requests. This control proves it by its answer, in its first call:
// if 300000 sets all succeed it zeroes the output, and the call fails.
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
    static bool flooded = false;  // once: a flood of 2^18 requests takes seconds
    if (flooded) return;
    flooded = true;
    void* scratch = nullptr;
    if (cudaMalloc(&scratch, 1) != cudaSuccess) return;
    for (int i = 0; i < 300000; ++i)
        if (cudaMemset(scratch, 0, 1) != cudaSuccess) {  // refused: the queue is bounded
            (void)cudaGetLastError();                    // the call goes on, its answer right
            return;
        }
    cudaMemset(d_out, 0, sizeof(float) * static_cast<long>(R) * C);
}
