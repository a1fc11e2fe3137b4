// Attack (red-team batch 10), transpose-cuda under cuda-emu: the kernel does
// nothing; the host transposes with one cudaMemcpy device to device per
// element, which the grader's device server ran itself (a copy is neither a
// host read nor a write of host data). It scored 60/60 with no kernel
// touching the output. A call may make at most 16 such copies: only the
// 1 x 1 shape (one copy) can still pass.
#include "harness/cuda/launch.hpp"

namespace {
__global__ void does_nothing() {}
}  // namespace

void student_transpose_cuda(const float* d_in, float* d_out, int R, int C, cudaStream_t stream) {
    mw::launch(does_nothing, dim3(1), dim3(1), 0, stream);
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j)
            cudaMemcpy(d_out + static_cast<long>(j) * R + i, d_in + static_cast<long>(i) * C + j, sizeof(float),
                       cudaMemcpyDeviceToDevice);
}
