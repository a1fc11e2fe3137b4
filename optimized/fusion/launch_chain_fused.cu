// launch_chain on the GPU, rung 2: one fused kernel.
//
// Change from rung 1: the chain is one kernel; each thread loads its
// element once, applies all `ops` maps in registers and stores the result.
// Expected effect: one launch instead of `ops`, and bytes drop from 8n per
// op to 8n in all; the time approaches a single launch plus one sweep.
#include "harness/cuda/device_problem.hpp"
#include "reference/fusion/cuda_common.hpp"
#include "reference/fusion/fusion.hpp"

namespace {

__global__ void chain_fused_kernel(const float* __restrict__ x, float* __restrict__ y, int n, int ops) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    for (int k = 0; k < ops; ++k) v = mw::fusion::chain_op(k, v);
    y[i] = v;
}

mw::Instance prepare_fused(mw::Problem& p) {
    const int n = int(p.shape["n"]), ops = int(p.shape["ops"]);
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        mw::launch(chain_fused_kernel, dim3((n + 255) / 256), dim3(256), 0, d.stream, d.in<const float>("x"),
                   d.out<float>("y"), n, ops);
    });
}

}  // namespace

MW_REGISTER_VARIANT(launch_chain_fused_cuda, {
    .name = "fused", .op = "launch_chain", .lever = "fusion",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 2,
    .rationale = "the whole chain in one kernel, the value kept in a register: one launch, 8n bytes",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return 8.0 * double(s["n"]); },
    .prepare = prepare_fused });
