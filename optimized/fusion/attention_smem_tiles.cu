// attention on the GPU, rung 1: K/V tiles in shared memory, online softmax
// (FlashAttention-1 loop order).
//
// Change from rung 0: no score matrix. One block of 64 threads owns one
// (batch, head); it walks the keys in tiles of 32, staging each K and V tile
// in shared memory (2 x 32 x d floats, 32 KiB at d = 128), and for every
// tile sweeps all its query rows, one thread per query: scores for the 32
// keys, online-softmax update of the row's max m and sum l, and
// O_row = O_row * alpha + P V_tile. As in FlashAttention-1, the outer loop
// is over K/V tiles, so each row's O, m and l live in global memory and are
// read and written once per tile (L2-resident for moderate s).
// Expected effect: the 4 s^2 floats of scores and probabilities per head
// disappear; K and V are read once per head instead of once per query row.
// Parallelism is only b*h blocks, which is what rung 2 fixes.
#include <stdexcept>

#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"
#include "kernels/fusion/attention_tile_cuda.hpp"
#include "reference/fusion/attention.hpp"
#include "reference/fusion/cuda_common.hpp"

namespace {

constexpr int kThreads = 64, kBc = mw::fusion::cuda::kTileKeys;

__global__ void fa1_kernel(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
                           float* __restrict__ O, float* __restrict__ ML, int H, int Hk, int S, int D, int causal,
                           float scale) {
    MW_DYNAMIC_SHARED(float, smem);
    float* Ks = smem;
    float* Vs = smem + kBc * D;
    const int bh = blockIdx.x, b = bh / H, kh = (bh % H) / (H / Hk);
    const float* k = K + long(b * Hk + kh) * S * D;
    const float* v = V + long(b * Hk + kh) * S * D;
    float* o = O + long(bh) * S * D;
    float* m = ML + long(bh) * 2 * S;
    float* l = m + S;
    for (int i = threadIdx.x; i < S; i += kThreads) {
        m[i] = -INFINITY;
        l[i] = 0;
        for (int c = 0; c < D; ++c) o[long(i) * D + c] = 0;
    }
    for (int k0 = 0; k0 < S; k0 += kBc) {
        const int cols = min(kBc, S - k0);
        __syncthreads();  // the previous tile is no longer read
        for (int e = threadIdx.x; e < cols * D; e += kThreads) {
            Ks[e] = k[long(k0) * D + e];
            Vs[e] = v[long(k0) * D + e];
        }
        __syncthreads();
        for (int i = threadIdx.x; i < S; i += kThreads) {
            const int n = causal ? min(cols, i - k0 + 1) : cols;  // keys of this tile row i may see
            if (n <= 0) continue;
            const float* q = Q + (long(bh) * S + i) * D;
            // m, l and the O row live in global memory: read and written once per tile.
            mw::fusion::cuda::attend_tile_row(q, Ks, Vs, n, D, scale, m[i], l[i], o + long(i) * D);
        }
    }
    for (int i = threadIdx.x; i < S; i += kThreads) {
        const float inv = 1.0f / l[i];
        for (int c = 0; c < D; ++c) o[long(i) * D + c] *= inv;
    }
}

mw::Instance prepare_fa1(mw::Problem& p) {
    const auto a = mw::fusion::attn_shape(p.shape);
    const int H = int(a.H), Hk = int(a.Hk), S = int(a.S), D = int(a.D), BH = int(a.B * a.H);
    const std::size_t smem = 2 * std::size_t(kBc) * D * sizeof(float);
    if (smem > 48 * 1024) throw std::runtime_error("attention smem_tiles (cuda): d=" + std::to_string(D) + " > 192");
    auto ml = mw::fusion::cuda::device_floats(std::size_t(BH) * 2 * S);
    return mw::cuda::device_instance(
        p,
        [=](mw::cuda::DeviceProblem& d) {
            mw::launch(fa1_kernel, dim3(BH), dim3(kThreads), smem, d.stream, d.in<const float>("Q"),
                       d.in<const float>("K"), d.in<const float>("V"), d.out<float>("O"), ml.get(), H, Hk, S, D,
                       int(a.causal), a.scale);
        },
        std::size_t(BH) * 2 * S * sizeof(float));
}

}  // namespace

MW_REGISTER_VARIANT(attention_smem_tiles_cuda, {
    .name = "smem_tiles", .op = "attention", .lever = "fusion",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 1,
    .rationale = "K/V tiles staged in shared memory and an online softmax per query row: no s x s "
                 "scores; FlashAttention-1 loop order, one block per head",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType dt) {
        // Plus O, m, l read and written once per 32-key tile.
        const auto a = mw::fusion::attn_shape(s);
        return mw::fusion::attention_compulsory_bytes(s, dt) +
               8.0 * a.B * a.H * double(a.S) * (a.D + 2) * std::ceil(double(a.S) / 32.0);
    },
    .prepare = prepare_fa1,
    .accepts = [](const mw::Shape& s) -> std::string {
        return mw::fusion::attn_shape(s).D > 192 ? "d > 192 (its K and V tiles fill 48 KiB of shared memory)" : "";
    } });
