// attention on the GPU, rung 2: FlashAttention-2 loop order.
//
// Change from rung 1: the loops are swapped. Each block owns one block of 32
// query rows of one (batch, head) — the grid is (s/32) x (b*h), so a single
// long sequence fills the GPU — and walks all K/V tiles for it. A query's
// running max, sum and its O row stay on chip (registers and a 32 x d shared
// tile) for the whole walk; O is normalized and written to global memory
// once, at the end (FlashAttention-2, Dao 2023). With the causal mask a
// block stops at its diagonal tile.
// Expected effect: no O/m/l round trips per tile (rung 1's extra term), and
// s/32 times more blocks to spread over the SMs. K and V are read once per
// query block (from L2 mostly).
#include <stdexcept>

#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"
#include "kernels/fusion/attention_tile_cuda.hpp"
#include "reference/fusion/attention.hpp"
#include "reference/fusion/cuda_common.hpp"

namespace {

constexpr int kBq = 32, kBc = mw::fusion::cuda::kTileKeys;

__global__ void fa2_kernel(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
                           float* __restrict__ O, int H, int Hk, int S, int D, int causal, float scale) {
    MW_DYNAMIC_SHARED(float, smem);
    float* Os = smem;               // kBq x D accumulator, row per thread
    float* Ks = Os + kBq * D;
    float* Vs = Ks + kBc * D;
    const int bh = blockIdx.y, b = bh / H, kh = (bh % H) / (H / Hk);
    const int q0 = blockIdx.x * kBq, i = q0 + threadIdx.x;
    const float* k = K + long(b * Hk + kh) * S * D;
    const float* v = V + long(b * Hk + kh) * S * D;
    const float* q = Q + (long(bh) * S + min(i, S - 1)) * D;
    float* orow = Os + threadIdx.x * D;
    for (int c = 0; c < D; ++c) orow[c] = 0;
    float m = -INFINITY, l = 0;
    const int kv_end = causal ? min(S, q0 + kBq) : S;
    for (int k0 = 0; k0 < kv_end; k0 += kBc) {
        const int cols = min(kBc, kv_end - k0);
        __syncthreads();
        for (int e = threadIdx.x; e < cols * D; e += kBq) {
            Ks[e] = k[long(k0) * D + e];
            Vs[e] = v[long(k0) * D + e];
        }
        __syncthreads();
        const int n = i >= S ? 0 : causal ? min(cols, i - k0 + 1) : cols;
        if (n <= 0) continue;
        mw::fusion::cuda::attend_tile_row(q, Ks, Vs, n, D, scale, m, l, orow);  // m, l, O row: registers/shared
    }
    if (i < S) {
        const float inv = 1.0f / l;
        for (int c = 0; c < D; ++c) O[(long(bh) * S + i) * D + c] = orow[c] * inv;
    }
}

mw::Instance prepare_fa2(mw::Problem& p) {
    const auto a = mw::fusion::attn_shape(p.shape);
    const int H = int(a.H), Hk = int(a.Hk), S = int(a.S), D = int(a.D), BH = int(a.B * a.H);
    const std::size_t smem = std::size_t(kBq + 2 * kBc) * D * sizeof(float);
    if (smem > 48 * 1024) throw std::runtime_error("attention flash2 (cuda): d=" + std::to_string(D) + " > 128");
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        mw::launch(fa2_kernel, dim3((S + kBq - 1) / kBq, BH), dim3(kBq), smem, d.stream, d.in<const float>("Q"),
                   d.in<const float>("K"), d.in<const float>("V"), d.out<float>("O"), H, Hk, S, D, int(a.causal),
                   a.scale);
    });
}

}  // namespace

MW_REGISTER_VARIANT(attention_flash2_cuda, {
    .name = "flash2", .op = "attention", .lever = "fusion",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 2,
    .rationale = "FlashAttention-2 order: one block per 32-query block walks all K/V tiles with its O "
                 "on chip, written once; s/32 x more blocks than rung 1",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        const auto a = mw::fusion::attn_shape(s);
        const double blocks = std::ceil(double(a.S) / 32.0) * (a.causal ? 0.5 : 1.0);
        return 4.0 * a.B * a.S * a.D * (2.0 * a.H + 2.0 * a.H * blocks);
    },
    .prepare = prepare_fa2,
    .accepts = [](const mw::Shape& s) -> std::string {
        return mw::fusion::attn_shape(s).D > 128 ? "d > 128 (its Q, K and V tiles fill 48 KiB of shared memory)" : "";
    } });
