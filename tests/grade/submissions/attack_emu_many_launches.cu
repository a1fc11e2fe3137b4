// Attack on cuda-emu's grading of a CUDA exercise: every channel a kernel
// has found to the host so far (launch timing, pidfs numbers, the machine's
// counters) carried a few bits a launch and needed hundreds of launches a
// call. The grader now takes at most 64 launches in one call; this control
// makes 100 (of a kernel that does nothing) and must be told so.
#include "harness/cuda/launch.hpp"

namespace {

__global__ void nothing() {}

}  // namespace

void student_gemm_cuda(const float*, const float*, float*, int, int, int, cudaStream_t stream) {
    for (int i = 0; i < 100; ++i) mw::launch(nothing, dim3(1), dim3(1), 0, stream);
    cudaStreamSynchronize(stream);
}
