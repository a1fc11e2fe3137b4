// cuda-emu test kernels: dynamic shared memory, atomics across blocks and
// workers, 3-D grids and blocks, and the warp/barrier primitives.
#include "harness/cuda/launch.hpp"
#include "tests/emu/emu_kernels.hpp"

namespace {

__global__ void reverse_kernel(const float* x, float* y, int n) {
    MW_DYNAMIC_SHARED(float, buf);
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) buf[threadIdx.x] = x[i];
    __syncthreads();
    const int block_n = min(static_cast<int>(blockDim.x), n - static_cast<int>(blockIdx.x * blockDim.x));
    if (static_cast<int>(threadIdx.x) < block_n) y[i] = buf[block_n - 1 - threadIdx.x];
}

__global__ void count_kernel(int* count, float* fsum, double* dsum, unsigned* max_seen) {
    atomicAdd(count, 1);
    atomicAdd(fsum, 0.5f);
    atomicAdd(dsum, 0.5);
    atomicMax(max_seen, blockIdx.x * blockDim.x + threadIdx.x);
}

__global__ void index_3d_kernel(long long* out) {
    const unsigned x = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned y = blockIdx.y * blockDim.y + threadIdx.y;
    const unsigned z = blockIdx.z * blockDim.z + threadIdx.z;
    const unsigned nx = gridDim.x * blockDim.x, ny = gridDim.y * blockDim.y;
    const long long linear = (static_cast<long long>(z) * ny + y) * nx + x;
    out[linear] = linear;
}

__global__ void warp_primitives_kernel(long long* out, int n) {
    const int t = threadIdx.x, lane = t % 32;
    const unsigned full = __activemask();  // all lanes of this warp are live here
    long long* o = out + 5L * t;
    o[0] = __ballot_sync(full, lane % 3 == 0);
    o[1] = __shfl_sync(full, t, lane + 3, 8);    // wraps inside groups of 8
    o[2] = __shfl_up_sync(full, t, 3);           // lanes 0..2 keep their own
    o[3] = __shfl_xor_sync(full, t, 5, 16);
    o[4] = __syncthreads_count(t % 2 == 0);
    (void)n;
}

}  // namespace

namespace emu_test {

std::vector<float> reverse_in_blocks(const std::vector<float>& x, int block_threads) {
    const int n = static_cast<int>(x.size());
    float *dx = nullptr, *dy = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
    MW_CUDA_CHECK(cudaMalloc(&dy, n * sizeof(float)));
    MW_CUDA_CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    const int blocks = (n + block_threads - 1) / block_threads;
    mw::launch(reverse_kernel, dim3(blocks), dim3(block_threads), block_threads * sizeof(float), nullptr, dx, dy, n);
    std::vector<float> y(n);
    MW_CUDA_CHECK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(dx);
    cudaFree(dy);
    return y;
}

AtomicTotals count_atomically(unsigned blocks, unsigned threads) {
    int* count = nullptr;
    float* fsum = nullptr;
    double* dsum = nullptr;
    unsigned* max_seen = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&count, sizeof(int)));
    MW_CUDA_CHECK(cudaMalloc(&fsum, sizeof(float)));
    MW_CUDA_CHECK(cudaMalloc(&dsum, sizeof(double)));
    MW_CUDA_CHECK(cudaMalloc(&max_seen, sizeof(unsigned)));
    MW_CUDA_CHECK(cudaMemset(count, 0, sizeof(int)));
    MW_CUDA_CHECK(cudaMemset(fsum, 0, sizeof(float)));
    MW_CUDA_CHECK(cudaMemset(dsum, 0, sizeof(double)));
    MW_CUDA_CHECK(cudaMemset(max_seen, 0, sizeof(unsigned)));
    mw::launch(count_kernel, dim3(blocks), dim3(threads), 0, nullptr, count, fsum, dsum, max_seen);
    int c = 0;
    float f = 0;
    double d = 0;
    unsigned m = 0;
    MW_CUDA_CHECK(cudaMemcpy(&c, count, sizeof c, cudaMemcpyDeviceToHost));
    MW_CUDA_CHECK(cudaMemcpy(&f, fsum, sizeof f, cudaMemcpyDeviceToHost));
    MW_CUDA_CHECK(cudaMemcpy(&d, dsum, sizeof d, cudaMemcpyDeviceToHost));
    MW_CUDA_CHECK(cudaMemcpy(&m, max_seen, sizeof m, cudaMemcpyDeviceToHost));
    cudaFree(count);
    cudaFree(fsum);
    cudaFree(dsum);
    cudaFree(max_seen);
    return {c, f, d, m};
}

std::vector<std::int64_t> index_3d(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz) {
    const std::size_t n = std::size_t{gx} * gy * gz * bx * by * bz;
    long long* d = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&d, n * sizeof(long long)));
    MW_CUDA_CHECK(cudaMemset(d, 0xff, n * sizeof(long long)));
    mw::launch(index_3d_kernel, dim3(gx, gy, gz), dim3(bx, by, bz), 0, nullptr, d);
    std::vector<std::int64_t> out(n);
    MW_CUDA_CHECK(cudaMemcpy(out.data(), d, n * sizeof(long long), cudaMemcpyDeviceToHost));
    cudaFree(d);
    return out;
}

std::vector<std::int64_t> warp_primitives(int threads) {
    long long* d = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&d, 5 * threads * sizeof(long long)));
    mw::launch(warp_primitives_kernel, dim3(1), dim3(threads), 0, nullptr, d, threads);
    std::vector<std::int64_t> out(5 * threads);
    MW_CUDA_CHECK(cudaMemcpy(out.data(), d, out.size() * sizeof(long long), cudaMemcpyDeviceToHost));
    cudaFree(d);
    return out;
}

}  // namespace emu_test
