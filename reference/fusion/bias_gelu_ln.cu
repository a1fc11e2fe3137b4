// bias_gelu_ln on the GPU, rung 0: three kernels, intermediates in global memory.
//
// The CUDA ladder:
//   reference/fusion/bias_gelu_ln.cu        0 naive: bias kernel, GELU kernel, LayerNorm kernel
//   optimized/fusion/bias_gelu_ln_fused.cu  1 one block per row, row in shared memory
// This rung: t1 = x + bias and t2 = GELU(t1) are element-wise kernels that
// write full-size temporaries to global memory; the LayerNorm kernel (one
// block per row, shared-memory tree reductions) reads t2 twice (statistics,
// then normalize) and writes y. Bytes: x, t1 (w, r), t2 (w, r, r), y: 7
// sweeps of rows*hidden*4 (plus L2 hits on the second read of t2 for small
// rows); three launches.
#include "harness/cuda/device_problem.hpp"
#include "reference/fusion/cuda_common.hpp"
#include "reference/fusion/fusion.hpp"

namespace {

__global__ void add_bias_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ t1,
                                int n, int H) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) t1[i] = x[i] + bias[i % H];
}

__global__ void gelu_kernel(const float* __restrict__ t1, float* __restrict__ t2, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) t2[i] = mw::fusion::cuda::gelu(t1[i]);
}

constexpr int kThreads = 256;

__global__ void layernorm_kernel(const float* __restrict__ t2, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* __restrict__ y, int H) {
    __shared__ float red[kThreads];
    const float* row = t2 + long(blockIdx.x) * H;
    float s = 0;
    for (int j = threadIdx.x; j < H; j += kThreads) s += row[j];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w >>= 1) {
        if (int(threadIdx.x) < w) red[threadIdx.x] += red[threadIdx.x + w];
        __syncthreads();
    }
    const float mean = red[0] / H;
    __syncthreads();
    float q = 0;
    for (int j = threadIdx.x; j < H; j += kThreads) q += (row[j] - mean) * (row[j] - mean);
    red[threadIdx.x] = q;
    __syncthreads();
    for (int w = kThreads / 2; w > 0; w >>= 1) {
        if (int(threadIdx.x) < w) red[threadIdx.x] += red[threadIdx.x + w];
        __syncthreads();
    }
    const float rstd = rsqrtf(red[0] / H + mw::fusion::kLnEps);
    for (int j = threadIdx.x; j < H; j += kThreads)
        y[long(blockIdx.x) * H + j] = (row[j] - mean) * rstd * gamma[j] + beta[j];
}

mw::Instance prepare_naive(mw::Problem& p) {
    const int R = int(p.shape["rows"]), H = int(p.shape["hidden"]), n = R * H;
    auto t1 = mw::fusion::cuda::device_floats(n), t2 = mw::fusion::cuda::device_floats(n);
    return mw::cuda::device_instance(
        p,
        [=](mw::cuda::DeviceProblem& d) {
            const int blocks = (n + 255) / 256;
            mw::launch(add_bias_kernel, dim3(blocks), dim3(256), 0, d.stream, d.in<const float>("x"),
                       d.in<const float>("bias"), t1.get(), n, H);
            mw::launch(gelu_kernel, dim3(blocks), dim3(256), 0, d.stream, (const float*)t1.get(), t2.get(), n);
            mw::launch(layernorm_kernel, dim3(R), dim3(kThreads), 0, d.stream, (const float*)t2.get(),
                       d.in<const float>("gamma"), d.in<const float>("beta"), d.out<float>("y"), H);
        },
        2 * std::size_t(n) * sizeof(float));
}

}  // namespace

MW_REGISTER_VARIANT(bias_gelu_ln_naive_cuda, {
    .name = "naive", .op = "bias_gelu_ln", .lever = "fusion",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "bias, GELU and LayerNorm as three kernels with full-size intermediates in global memory",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * (7.0 * double(s["rows"]) * s["hidden"] + 3.0 * s["hidden"]);
    },
    .prepare = prepare_naive });
