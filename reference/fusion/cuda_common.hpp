// Small pieces shared by the fusion lever's CUDA kernels (both backends).
#pragma once

#include <memory>

#include "harness/cuda/launch.hpp"
#include "kernels/cuda/warp.hpp"

// An unnamed namespace, like harness/cuda/device_problem.hpp: nvcc and the
// emulator each compile these, and both copies end up in one binary.
namespace mw::fusion::cuda {
namespace {

// tanh-GELU as x * sigmoid(2u), the CPU rungs' formula (simd.hpp).
__device__ inline float gelu(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

// Sum and max over a warp (kernels/cuda/warp.hpp).
using mw::warp::warp_max;
using mw::warp::warp_sum;

// A device scratch buffer owned by an Instance (freed with it).
inline std::shared_ptr<float> device_floats(std::size_t n) {
    void* p = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&p, (n ? n : 1) * sizeof(float)));
    return std::shared_ptr<float>(static_cast<float*>(p), [](float* q) { (void)cudaFree(q); });
}

}  // namespace
}  // namespace mw::fusion::cuda
