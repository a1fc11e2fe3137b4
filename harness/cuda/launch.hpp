// One launch helper for both CUDA backends, so every kernel lives in one .cu
// source:
//   - compiled by nvcc, mw::launch is a plain <<<grid, block, smem, stream>>>;
//   - compiled by the host compiler with MEMWALL_EMU defined (the cuda-emu
//     backend), the same call runs the kernel on the CPU through
//     harness/emu/cuda_emu.hpp, which also supplies dim3, __global__,
//     threadIdx, __syncthreads, cudaMalloc, ... with CUDA semantics.
//
// A .cu file registers its variants with .backend = MW_CUDA_BACKEND so that the
// nvcc build registers them as "cuda" and the emulated build as "cuda-emu".
// Code that only makes sense on a real GPU (cuBLAS, tensor cores, inline PTX)
// sits inside `#if !MEMWALL_EMU`.
#pragma once

#ifdef MEMWALL_EMU
#include "harness/emu/cuda_emu.hpp"
#define MW_CUDA_BACKEND ::mw::Backend::cuda_emu
#else
#define MEMWALL_EMU 0
#include <cuda_runtime.h>
#define MW_CUDA_BACKEND ::mw::Backend::cuda
// Dynamic shared memory, declared the same way for both backends (a macro
// cannot make a plain `extern __shared__ T name[]` work on the emulator). The
// byte array + cast lets template kernels use different element types.
#define MW_DYNAMIC_SHARED(T, name)                                              \
    extern __shared__ __align__(16) unsigned char mw_dynamic_smem_[];           \
    T* const name = reinterpret_cast<T*>(mw_dynamic_smem_)
#endif

#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

namespace mw {

// Throws std::runtime_error naming the call site on any CUDA error.
inline void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
    if (e != cudaSuccess)
        throw std::runtime_error(std::string(what) + " failed at " + file + ":" + std::to_string(line) +
                                 ": " + cudaGetErrorString(e));
}
#define MW_CUDA_CHECK(call) ::mw::cuda_check((call), #call, __FILE__, __LINE__)

template <class... KArgs, class... Args>
void launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, std::size_t smem_bytes,
            cudaStream_t stream, Args&&... args) {
#if MEMWALL_EMU
    ::mw::emu::launch(kernel, grid, block, smem_bytes, stream, std::forward<Args>(args)...);
#else
    kernel<<<grid, block, smem_bytes, stream>>>(std::forward<Args>(args)...);
    MW_CUDA_CHECK(cudaGetLastError());
#endif
}

}  // namespace mw
