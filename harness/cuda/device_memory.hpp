// Device memory as plain functions, with no CUDA type in their signatures,
// for the tables of launchers that code compiled without CUDA headers calls
// (kernels/model/elementwise.hpp, kernels/kv_cache/paged_attention.hpp): the
// tests allocate and copy through them on either backend. Each throws
// std::runtime_error naming the call on a CUDA error. In an unnamed
// namespace, like device_problem.hpp: nvcc and the emulator each compile a
// copy, and both end up in one binary.
#pragma once

#include <cstddef>

#include "harness/cuda/launch.hpp"

namespace mw::cuda {
namespace {

inline void* alloc_bytes(std::size_t bytes) {
    void* p = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
inline void free_bytes(void* p) { MW_CUDA_CHECK(cudaFree(p)); }
inline void copy_to_device(void* dst, const void* src, std::size_t bytes) {
    MW_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
inline void copy_to_host(void* dst, const void* src, std::size_t bytes) {
    MW_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
inline void synchronize_device() { MW_CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace
}  // namespace mw::cuda
