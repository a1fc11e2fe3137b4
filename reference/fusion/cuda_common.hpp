// Small pieces shared by the fusion lever's CUDA kernels (both backends).
#pragma once

#include <memory>

#include "harness/cuda/launch.hpp"

// An unnamed namespace, like harness/cuda/device_problem.hpp: nvcc and the
// emulator each compile these, and both copies end up in one binary.
namespace mw::fusion::cuda {
namespace {

// tanh-GELU as x * sigmoid(2u), the CPU rungs' formula (simd.hpp).
__device__ inline float gelu(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

// Sum over a warp; every lane gets the result.
__device__ inline float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ inline float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// A device scratch buffer owned by an Instance (freed with it).
inline std::shared_ptr<float> device_floats(std::size_t n) {
    void* p = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&p, (n ? n : 1) * sizeof(float)));
    return std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { (void)cudaFree(q); });
}

}  // namespace
}  // namespace mw::fusion::cuda
