// softmax on the GPU, rung 0: three kernels, like three separate framework ops.
//
// The CUDA ladder:
//   reference/fusion/softmax.cu          0 three kernels: row max, row sum of exp, normalize
//   optimized/fusion/softmax_online.cu   1 one kernel: online max+sum, then normalize
// This rung: each kernel gives a block of 256 threads one row. Kernel 1 reads
// x and writes the row maxima; kernel 2 reads x again and writes the sums of
// exp(x - max); kernel 3 reads x a third time and writes y. Passes over
// global memory: 3 reads + 1 write of rows*cols*4 bytes, three launches.
// On a GPU a row is re-read from HBM (or L2, if the whole matrix fits in it)
// by every kernel, so time ~ 4 sweeps / HBM bandwidth.
#include "harness/cuda/device_problem.hpp"
#include "reference/fusion/cuda_common.hpp"
#include "reference/fusion/fusion.hpp"

namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

// Block-wide max and sum (shuffles within warps, then across warps' results).
__device__ float block_reduce(float v, bool is_max, float* scratch) {
    using namespace mw::fusion::cuda;
    v = is_max ? warp_max(v) : warp_sum(v);
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    float t = threadIdx.x < kWarps ? scratch[threadIdx.x] : (is_max ? -INFINITY : 0.0f);
    if (threadIdx.x < 32) t = is_max ? warp_max(t) : warp_sum(t);
    if (threadIdx.x == 0) scratch[kWarps] = t;
    __syncthreads();
    return scratch[kWarps];
}

__global__ void row_max_kernel(const float* __restrict__ x, float* __restrict__ m, int C) {
    __shared__ float scratch[kWarps + 1];
    const float* row = x + long(blockIdx.x) * C;
    float v = -INFINITY;
    for (int j = threadIdx.x; j < C; j += kThreads) v = fmaxf(v, row[j]);
    v = block_reduce(v, true, scratch);
    if (threadIdx.x == 0) m[blockIdx.x] = v;
}

__global__ void row_sum_kernel(const float* __restrict__ x, const float* __restrict__ m, float* __restrict__ s,
                               int C) {
    __shared__ float scratch[kWarps + 1];
    const float* row = x + long(blockIdx.x) * C;
    const float mr = m[blockIdx.x];
    float v = 0;
    for (int j = threadIdx.x; j < C; j += kThreads) v += expf(row[j] - mr);
    v = block_reduce(v, false, scratch);
    if (threadIdx.x == 0) s[blockIdx.x] = v;
}

__global__ void normalize_kernel(const float* __restrict__ x, const float* __restrict__ m,
                                 const float* __restrict__ s, float* __restrict__ y, int C) {
    const long base = long(blockIdx.x) * C;
    const float mr = m[blockIdx.x], inv = 1.0f / s[blockIdx.x];
    for (int j = threadIdx.x; j < C; j += kThreads) y[base + j] = expf(x[base + j] - mr) * inv;
}

mw::Instance prepare_three_pass(mw::Problem& p) {
    const int R = int(p.shape["rows"]), C = int(p.shape["cols"]);
    auto m = mw::fusion::cuda::device_floats(R), s = mw::fusion::cuda::device_floats(R);
    return mw::cuda::device_instance(
        p,
        [=](mw::cuda::DeviceProblem& d) {
            const float* x = d.in<const float>("x");
            mw::launch(row_max_kernel, dim3(R), dim3(kThreads), 0, d.stream, x, m.get(), C);
            mw::launch(row_sum_kernel, dim3(R), dim3(kThreads), 0, d.stream, x, (const float*)m.get(), s.get(), C);
            mw::launch(normalize_kernel, dim3(R), dim3(kThreads), 0, d.stream, x, (const float*)m.get(),
                       (const float*)s.get(), d.out<float>("y"), C);
        },
        2 * std::size_t(R) * sizeof(float));
}

}  // namespace

MW_REGISTER_VARIANT(softmax_three_pass_cuda, {
    .name = "three_pass", .op = "softmax", .lever = "fusion",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "max, sum of exp and normalize as three kernels: 3 reads + 1 write of the matrix, three launches",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return 16.0 * double(s["rows"]) * s["cols"]; },
    .prepare = prepare_three_pass });
