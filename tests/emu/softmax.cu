// cuda-emu test kernel: online softmax (one pass for max and sum, rescaling
// the running sum whenever the max grows), one block per row; the per-thread
// (max, sum) pairs are merged with butterfly shuffles, then across warps
// through shared memory.
#include "harness/cuda/launch.hpp"
#include "tests/emu/emu_kernels.hpp"

namespace {

struct MaxSum {
    float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return {m, 0.0f};  // both empty: avoid exp(-inf - -inf) = NaN
    return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
    for (int mask = warpSize / 2; mask > 0; mask /= 2) {
        MaxSum other{__shfl_xor_sync(0xffffffffu, v.m, mask), __shfl_xor_sync(0xffffffffu, v.s, mask)};
        v = merge(v, other);
    }
    return v;
}

__global__ void online_softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float part_m[32], part_s[32];
    __shared__ MaxSum total;
    const long base = static_cast<long>(blockIdx.x) * cols;
    MaxSum v{-INFINITY, 0.0f};
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float xi = x[base + c];
        if (xi > v.m) {
            v.s = v.s * __expf(v.m - xi) + 1.0f;
            v.m = xi;
        } else {
            v.s += __expf(xi - v.m);
        }
    }
    v = warp_merge(v);
    const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
    if (lane == 0) {
        part_m[warp] = v.m;
        part_s[warp] = v.s;
    }
    __syncthreads();
    if (warp == 0) {
        const int nwarps = (blockDim.x + warpSize - 1) / warpSize;
        v = lane < nwarps ? MaxSum{part_m[lane], part_s[lane]} : MaxSum{-INFINITY, 0.0f};
        v = warp_merge(v);
        if (lane == 0) total = v;
    }
    __syncthreads();
    const float m = total.m, inv = 1.0f / total.s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[base + c] = __expf(x[base + c] - m) * inv;
}

}  // namespace

namespace emu_test {

std::vector<float> online_softmax(const std::vector<float>& x, int rows, int cols, int block_threads) {
    float *dx = nullptr, *dy = nullptr;
    const std::size_t bytes = x.size() * sizeof(float);
    MW_CUDA_CHECK(cudaMalloc(&dx, bytes));
    MW_CUDA_CHECK(cudaMalloc(&dy, bytes));
    MW_CUDA_CHECK(cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice));
    mw::launch(online_softmax_kernel, dim3(rows), dim3(block_threads), 0, nullptr, dx, dy, cols);
    std::vector<float> y(x.size());
    MW_CUDA_CHECK(cudaMemcpy(y.data(), dy, bytes, cudaMemcpyDeviceToHost));
    cudaFree(dx);
    cudaFree(dy);
    return y;
}

}  // namespace emu_test
