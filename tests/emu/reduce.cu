// cuda-emu test kernel: block-wide sum with warp shuffles, one block per row.
// Odd column counts leave partial warps' worth of work and idle lanes, which
// the shuffles must still include (they hold zeros).
#include "harness/cuda/launch.hpp"
#include "tests/emu/emu_kernels.hpp"

namespace {

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
    __shared__ float warp_partials[32];
    const float* row = x + static_cast<long>(blockIdx.x) * cols;
    float v = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) v += row[c];
    v = warp_sum(v);
    const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
    if (lane == 0) warp_partials[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const int nwarps = (blockDim.x + warpSize - 1) / warpSize;
        v = lane < nwarps ? warp_partials[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) out[blockIdx.x] = v;
    }
}

}  // namespace

namespace emu_test {

std::vector<float> row_sums(const std::vector<float>& x, int rows, int cols, int block_threads) {
    float *dx = nullptr, *dout = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&dx, x.size() * sizeof(float)));
    MW_CUDA_CHECK(cudaMalloc(&dout, rows * sizeof(float)));
    MW_CUDA_CHECK(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    mw::launch(row_sum_kernel, dim3(rows), dim3(block_threads), 0, nullptr, dx, dout, cols);
    std::vector<float> out(rows);
    MW_CUDA_CHECK(cudaMemcpy(out.data(), dout, rows * sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(dx);
    cudaFree(dout);
    return out;
}

}  // namespace emu_test
