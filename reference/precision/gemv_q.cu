// GEMV on the GPU, precision lever, rung 0: naive, one thread per output.
//
// The CUDA ladder (y[b, n_out] = x[b, n_in] W[n_out, n_in]^T, W stored by the
// rung; the op itself is defined in reference/precision/gemv_q.cpp):
//   reference/precision/gemv_q.cu           0 naive: one thread per y element, fp32 W (this file)
//   optimized/precision/gemv_q_fp32.cu      1 fp32: a warp per row pair, 16-byte coalesced loads, x in shared memory
//   optimized/precision/gemv_q_half.cu      2 bf16 / fp16 weights: half the bytes
//   optimized/precision/gemv_q_int8.cu      3 int8 per-channel weights: a quarter
//   optimized/precision/gemv_q_int4.cu      4 int4 block-wise (G = 32/64/128, sym/asym): ~1/7
//   optimized/precision/gemv_q_cublas.cu  vendor cuBLAS fp16 / bf16 GEMM (fp32 accumulation), for batched shapes
// Shared machinery of rungs 1-4: optimized/precision/gemv_q_cuda.hpp.
// Run: memwall run gemv_q --backend cuda   (or --backend cuda-emu without a GPU)
//
// What this rung does: thread (i, bb) computes y[bb][i] with a plain loop
// over n_in, i taken from threadIdx.x. At every step the 32 lanes of a warp
// load W[i][j] for 32 consecutive rows i: 32 addresses n_in floats apart,
// 32 separate 32-byte sectors to deliver 128 useful bytes — uncoalesced. L1
// keeps each lane's sector for its next 7 steps, so DRAM still sees W about
// once per batch item, but the load/store unit handles 32 requests per
// instruction and the few warps per SM cannot keep enough bytes in flight.
// x[bb][j] is one address per warp (a broadcast).
// Bytes: fp32 W once per batch item (blockIdx.y = bb: nothing is shared
// between batch items), 4 * b * n_out * n_in, plus x and y. Expected: far
// below HBM bandwidth — the floor the other rungs are measured from.
#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"
#include "reference/precision/gemv_q.hpp"

namespace {

__global__ void gemv_naive_kernel(const float* __restrict__ W, const float* __restrict__ x, float* __restrict__ y,
                                  int n_out, int n_in) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;  // row: neighbours in a warp are n_in floats apart in W
    const int bb = blockIdx.y;
    if (i >= n_out) return;
    float acc = 0.0f;
    for (int j = 0; j < n_in; ++j) acc += W[i * n_in + j] * x[bb * n_in + j];
    y[bb * n_out + i] = acc;
}

mw::Instance prepare_naive(mw::Problem& p) {
    const int n_out = int(p.shape["n_out"]), n_in = int(p.shape["n_in"]), b = int(p.shape["b"]);
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        mw::launch(gemv_naive_kernel, dim3(unsigned((n_out + 127) / 128), unsigned(b)), dim3(128), 0, d.stream,
                   d.in<const float>("W"), d.in<const float>("x"), d.out<float>("y"), n_out, n_in);
    });
}

}  // namespace

MW_REGISTER_VARIANT(gemv_q_naive_cuda, {
    .name = "naive", .op = "gemv_q", .lever = "precision",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "one thread per output walking its own fp32 row: a warp's loads are 32 rows apart (uncoalesced)",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        return mw::precision::gemv_bytes({mw::precision::Format::f32}, s) +
               (double(s["b"]) - 1) * 4.0 * double(s["n_out"]) * double(s["n_in"]);
    },
    .prepare = prepare_naive });
