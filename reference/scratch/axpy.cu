// axpy, scratch lever, rung 0 (CUDA): one thread per element.
#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"
#include "reference/scratch/axpy.hpp"

namespace {

__global__ void axpy_kernel(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i] + y[i];
}

mw::Instance prepare_naive(mw::Problem& p) {
    const int n = int(p.shape["n"]);
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        mw::launch(axpy_kernel, dim3((n + 127) / 128), dim3(128), 0, d.stream, d.in<const float>("x"),
                   d.in<const float>("y"), d.out<float>("out"), n);
    });
}

}  // namespace

MW_REGISTER_VARIANT(axpy_naive_cuda, {
    .name = "naive", .op = "axpy", .lever = "scratch",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "one thread per element, coalesced loads and stores",
    .needs = {"gpu"},
    .bytes = mw::scratch::axpy_bytes,
    .prepare = prepare_naive });
