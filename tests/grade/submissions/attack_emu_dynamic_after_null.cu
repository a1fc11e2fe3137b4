// Attack (red-team batch 11), transpose-cuda under cuda-emu: an entry of the
// submission's own in its executable's .dynamic section (an input section
// of that name lands after the linker's DT_NULL). The loader stops at
// DT_NULL, so the program runs as usual; the grader, building the kernel
// executor's sandbox from the libraries the executable loads, read on past
// it. With a name past the end of the file, the grade ended as the grader's
// own error (no score, exit 3); with a name like ../../../etc/shadow found
// in the string table, the grader, as root, copied that file into the
// kernels' sandbox for a kernel to read and leak through the output. Now the
// grader reads the entries as the loader does, up to DT_NULL: this one
// names nothing, and the honest kernel keeps full marks.
#include <elf.h>

#include "harness/cuda/launch.hpp"

__attribute__((section(".dynamic"), used)) static const Elf64_Dyn past_the_end[] = {{DT_NEEDED, {0x7fffffffffffull}}};

namespace {
__global__ void transpose_kernel(const float* in, float* out, int R, int C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < R && col < C) out[col * R + row] = in[row * C + col];
}
}  // namespace

void student_transpose_cuda(const float* d_in, float* d_out, int R, int C, cudaStream_t stream) {
    mw::launch(transpose_kernel, dim3((C + 31) / 32, (R + 7) / 8), dim3(32, 8), 0, stream, d_in, d_out, R, C);
}
