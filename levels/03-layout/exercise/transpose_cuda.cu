// Exercise transpose-cuda (level 03, layout): a tiled transpose kernel.
//
//   out[C][R] = in[R][C]^T, fp32, row-major: out[j*R + i] = in[i*C + j].
//   d_in and d_out are device pointers; launch on `stream`. The check is
//   exact (bit equality).
//
// Keep the signature exactly as it is, and launch through mw::launch (it is
// <<<grid, block, smem, stream>>> under nvcc, and runs the kernel on the CPU
// under the cuda-emu backend, so you can check correctness without a GPU):
//     memwall grade 03 --submission levels/03-layout/exercise/transpose_cuda.cu --seed 1
// Under cuda-emu only correctness is graded; speed (vs the project's
// smem_padded rung at 8192 x 8192) needs a real GPU. Shapes include 1, 7, 31,
// 33, 127, 129: guard every global access. The emulator poisons shared memory
// (NaN) and runs threads up to each __syncthreads in turn, so a missing
// barrier fails the check instead of passing by luck.
//
// What is here is rung 0 of the CUDA ladder (reference/layout/transpose.cu):
// a warp reads 32 consecutive floats of a row of `in` (4 whole 32-byte
// sectors) and writes them down a column of `out` (32 sectors, 4 useful
// bytes in each). The road map: stage a 32 x 32 tile in shared memory so
// that both the reads and the writes are whole rows, then pad the tile's
// rows so that reading a column of it does not hit one bank 32 times.
#include "harness/cuda/launch.hpp"

namespace {

__global__ void student_kernel(const float* in, float* out, int R, int C) {
    // TODO: one thread per element, straight through.
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < R && col < C) out[col * R + row] = in[row * C + col];
}

}  // namespace

void student_transpose_cuda(const float* d_in, float* d_out, int R, int C, cudaStream_t stream) {
    const dim3 block(32, 8);
    const dim3 grid((C + 31) / 32, (R + 7) / 8);
    mw::launch(student_kernel, grid, block, 0, stream, d_in, d_out, R, C);
}
