// attention on the GPU, rung 0: scores in global memory.
//
// The CUDA ladder (O = softmax(Q K^T / sqrt(d), causal) V, GQA):
//   reference/fusion/attention.cu             0 naive: scores kernel, softmax kernel, PV kernel
//   optimized/fusion/attention_smem_tiles.cu  1 K/V tiles in shared memory, online softmax
//                                               (FlashAttention-1 loop order: one block per head)
//   optimized/fusion/attention_flash2.cu      2 FlashAttention-2 order: blocks over query blocks,
//                                               O accumulated on chip, written once
//   optimized/fusion/attention_flash2_mma.cu  3 the same walk on bf16 tensor cores: S = Q K^T
//                                               and O += P V by mma.sync, softmax in registers
// This rung: a b*h*s*s fp32 score buffer in global memory, written by one
// thread per score, normalized in place by one thread per row, read back by
// one thread per output element. Bytes: 4 s^2 floats per head on top of Q,
// K, V, O (plus K and V re-read by every query row from L2/DRAM).
#include "harness/cuda/device_problem.hpp"
#include "reference/fusion/attention.hpp"
#include "reference/fusion/cuda_common.hpp"

namespace {

__global__ void scores_kernel(const float* __restrict__ Q, const float* __restrict__ K, float* __restrict__ Sc,
                              int H, int Hk, int S, int D, int causal, float scale) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    const int bh = blockIdx.z, b = bh / H, kh = (bh % H) / (H / Hk);
    if (i >= S || j >= S) return;
    const float* q = Q + (long(bh) * S + i) * D;
    const float* k = K + (long(b * Hk + kh) * S + j) * D;
    float dot = 0;
    for (int c = 0; c < D; ++c) dot += q[c] * k[c];
    Sc[(long(bh) * S + i) * S + j] = (causal && j > i) ? -INFINITY : dot * scale;
}

__global__ void softmax_kernel(float* __restrict__ Sc, int rows, int S) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float* s = Sc + long(r) * S;
    float m = -INFINITY, sum = 0;
    for (int j = 0; j < S; ++j) m = fmaxf(m, s[j]);
    for (int j = 0; j < S; ++j) sum += s[j] = (s[j] == -INFINITY) ? 0.0f : expf(s[j] - m);
    for (int j = 0; j < S; ++j) s[j] /= sum;
}

__global__ void pv_kernel(const float* __restrict__ P, const float* __restrict__ V, float* __restrict__ O, int H,
                          int Hk, int S, int D) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y * blockDim.y + threadIdx.y;
    const int bh = blockIdx.z, b = bh / H, kh = (bh % H) / (H / Hk);
    if (i >= S || c >= D) return;
    const float* p = P + (long(bh) * S + i) * S;
    const float* v = V + long(b * Hk + kh) * S * D;
    float acc = 0;
    for (int j = 0; j < S; ++j) acc += p[j] * v[long(j) * D + c];
    O[(long(bh) * S + i) * D + c] = acc;
}

mw::Instance prepare_naive(mw::Problem& p) {
    const auto a = mw::fusion::attn_shape(p.shape);
    const int H = int(a.H), Hk = int(a.Hk), S = int(a.S), D = int(a.D), BH = int(a.B * a.H);
    const std::size_t n = std::size_t(BH) * S * S;
    auto scores = mw::fusion::cuda::device_floats(n);
    return mw::cuda::device_instance(
        p,
        [=](mw::cuda::DeviceProblem& d) {
            const dim3 blk(16, 16);
            mw::launch(scores_kernel, dim3((S + 15) / 16, (S + 15) / 16, BH), blk, 0, d.stream,
                       d.in<const float>("Q"), d.in<const float>("K"), scores.get(), H, Hk, S, D, int(a.causal),
                       a.scale);
            mw::launch(softmax_kernel, dim3((BH * S + 127) / 128), dim3(128), 0, d.stream, scores.get(), BH * S, S);
            mw::launch(pv_kernel, dim3((D + 15) / 16, (S + 15) / 16, BH), blk, 0, d.stream,
                       (const float*)scores.get(), d.in<const float>("V"), d.out<float>("O"), H, Hk, S, D);
        },
        n * sizeof(float));
}

}  // namespace

MW_REGISTER_VARIANT(attention_naive_cuda, {
    .name = "naive", .op = "attention", .lever = "fusion",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "three kernels around a b*h*s*s score matrix in global memory",
    .needs = {"gpu"},
    .bytes = mw::fusion::attention_bytes_materialized,
    .prepare = prepare_naive });
