// The launch_chain's per-op kernel and the chain of launches, shared by the
// per-launch rung and the CUDA Graph rung (which captures exactly these
// launches).
#pragma once

#include "harness/cuda/device_problem.hpp"
#include "reference/fusion/fusion.hpp"

namespace mw::fusion::cuda {
namespace {

__global__ void chain_op_kernel(const float* __restrict__ in, float* __restrict__ out, int n, int k) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = chain_op(k, in[i]);
}

// x -> tmp[0] -> tmp[1] -> tmp[0] ... -> y, one launch per op.
inline void enqueue_chain(mw::cuda::DeviceProblem& d, float* tmp, int n, int ops) {
    const float* in = d.in<const float>("x");
    for (int k = 0; k < ops; ++k) {
        float* out = k == ops - 1 ? d.out<float>("y") : tmp + std::size_t(k % 2) * n;
        mw::launch(chain_op_kernel, dim3((n + 255) / 256), dim3(256), 0, d.stream, in, out, n, k);
        in = out;
    }
}

}  // namespace
}  // namespace mw::fusion::cuda
