// cuda-emu test kernels that break CUDA rules on purpose; each launch must
// throw mw::emu::LaunchError naming the kernel, the block and the thread.
#include "harness/cuda/launch.hpp"
#include "tests/emu/emu_kernels.hpp"

namespace {

__global__ void early_return_kernel(float* out) {
    if (threadIdx.x < 16) return;  // these threads never reach the barrier
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

__global__ void barrier_in_branches_kernel(float* out) {
    if (threadIdx.x % 2 == 0) {
        out[threadIdx.x] = 1.0f;
        __syncthreads();
    } else {
        out[threadIdx.x] = 2.0f;
        __syncthreads();
    }
}

__global__ void half_mask_kernel(float* out) {
    float v = threadIdx.x;
    v += __shfl_down_sync(0x0000ffffu, v, 1);  // lane 15 reads lane 16, outside the mask
    out[threadIdx.x] = v;
}

__global__ void xor_half_mask_kernel(float* out) {
    float v = threadIdx.x;
    v += __shfl_xor_sync(0x0000ffffu, v, 1);  // lanes 16..31 call with a mask that excludes them
    out[threadIdx.x] = v;
}

__global__ void different_masks_kernel(float* out) {
    const unsigned mask = threadIdx.x == 0 ? 0x3u : 0xffffffffu;
    out[threadIdx.x] = __shfl_xor_sync(mask, static_cast<float>(threadIdx.x), 1);
}

__global__ void shuffle_after_exit_kernel(float* out) {
    if (threadIdx.x >= 16) return;
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, static_cast<float>(threadIdx.x), 1);
}

// Reads the whole tile although each thread wrote only its own entry and no
// barrier separates the write from the reads.
__global__ void unsynchronised_tile_kernel(float* out) {
    __shared__ float tile[64];
    tile[threadIdx.x] = 1.0f;
    float s = 0.0f;
    for (int i = 0; i < 64; ++i) s += tile[i];
    out[blockIdx.x * 64 + threadIdx.x] = s;
}

// Out-of-bounds accesses: only AddressSanitizer (the asan: twin) sees these.
__global__ void global_overflow_kernel(float* out, int n) {
    out[threadIdx.x] = 1.0f;
    if (threadIdx.x == 0) out[n] = 2.0f;  // one past the cudaMalloc'd end
}

__global__ void dynamic_shared_overflow_kernel(float* out) {
    MW_DYNAMIC_SHARED(float, buf);
    buf[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = buf[threadIdx.x + 1];  // the last thread reads past smem_bytes
}

void run(void (*kernel)(float*), unsigned threads) {
    float* d = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&d, 256 * sizeof(float)));
    try {
        mw::launch(kernel, dim3(2), dim3(threads), 0, nullptr, d);
    } catch (...) {
        cudaFree(d);
        throw;
    }
    cudaFree(d);
}

}  // namespace

namespace emu_test {

void divergent_barrier() { run(early_return_kernel, 64); }
void barrier_in_branches() { run(barrier_in_branches_kernel, 64); }
void shuffle_mask_excludes_caller() { run(xor_half_mask_kernel, 32); }
void shuffle_reads_outside_mask() { run(half_mask_kernel, 32); }
void shuffle_masks_differ() { run(different_masks_kernel, 32); }
void shuffle_after_exit() { run(shuffle_after_exit_kernel, 32); }

void global_out_of_bounds() {
    float* d = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&d, 32 * sizeof(float)));
    mw::launch(global_overflow_kernel, dim3(1), dim3(32), 0, nullptr, d, 32);
    cudaFree(d);
}

void dynamic_shared_out_of_bounds() {
    float* d = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&d, 32 * sizeof(float)));
    mw::launch(dynamic_shared_overflow_kernel, dim3(1), dim3(32), 32 * sizeof(float), nullptr, d);
    cudaFree(d);
}

void reads_uninitialised_static_shared(std::vector<float>& out) {
    float* d = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&d, 3 * 64 * sizeof(float)));
    mw::launch(unsynchronised_tile_kernel, dim3(3), dim3(64), 0, nullptr, d);
    out.resize(3 * 64);
    MW_CUDA_CHECK(cudaMemcpy(out.data(), d, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(d);
}

}  // namespace emu_test
