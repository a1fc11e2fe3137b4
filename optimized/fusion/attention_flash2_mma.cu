// attention on the GPU, rung 3: FlashAttention-2 on tensor cores (bf16 in,
// fp32 softmax state and accumulators).
// (The wrappers and the fragment layouts they follow:
// kernels/cuda/tensor_core.cuh.)
//
// Change from rung 2 (attention_flash2.cu): the same walk — a block owns a
// block of query rows of one (batch, head) and streams every K/V tile past
// it, keeping the running max, sum and O on chip — but both products run on
// tensor cores instead of one query row per thread on CUDA cores. A block is
// 4 warps and 64 query rows, each warp 16 of them, its Q fragments loaded
// once with ldmatrix and kept in registers for the whole walk. Per tile of
// 32 keys (K and V rounded from fp32 to bf16 on the way to shared memory):
//   S = Q K^T   one mma.sync m16n8k16 per 16 of d and 8 keys (K's fragment
//               by ldmatrix, non-transposed: K's rows are B's columns);
//   softmax     on S's accumulator fragment in registers: each lane holds
//               two rows' values, the row max and sum reduced over the four
//               lanes of its quad with two shuffles; the causal mask and the
//               keys past s set to -inf;
//   O += P V    P rounded to bf16 straight from S's accumulators (two 16 x 8
//               C fragments side by side are one 16 x 16 A fragment: the
//               layouts line up, no trip through shared memory), V's fragment
//               by ldmatrix .trans (V's rows are B's rows).
// O is divided by the row sum and written once, at the end.
// Expected effect: on an H100 the bf16 tensor cores do ~15x the fp32 FMAs'
// FLOPs (harness/gpu_specs.cpp), and attention at s = 4096, d = 128 is
// compute-bound (s / 2 FLOPs per byte of K and V per query block), so this
// rung is judged against the bf16 roof; K and V are read once per 64
// queries (half rung 2's traffic).
// Precision: Q, K and V are rounded to bf16 (8 significant bits), so the
// rung is checked against that contract (fusion::oracle_bf16_inputs); the
// softmax weights are rounded to bf16 too before P V (each by at most 2^-9
// relatively; the row sum adds the rounded weights, so O stays their exact
// weighted mean), which the contract cannot model (the weights depend on the
// tile order through the running max, by up to 2^-8 of V's range in O): the
// tolerance is that of a computation carried out in bf16, u_bf16 sqrt(L) =
// 2^-8 sqrt(L) relative (the fp32 default's 16 u_f32 sqrt(L), scaled by 2^12).
// A wrong fragment, mask or rescale errs by far more: with the diagonal
// masked, P's A fragment built from the wrong C fragments, or O not
// rescaled when the max rises, tests/fusion's odd shapes fail (tried when
// the rung was written).
// Shapes: d <= 128 (any d: rounded up to 16 with zeros), any s (keys past s
// masked, query rows past s not written), causal and GQA as the op.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"
#include "kernels/cuda/tensor_core.cuh"
#include "reference/fusion/attention.hpp"
#include "reference/fusion/cuda_common.hpp"

namespace {

constexpr int kWarps = 4, kBr = 16 * kWarps, kBc = 32, kPad = 8;  // kPad bf16 after each shared row

__device__ inline unsigned short to_bf16(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
__device__ inline float from_bf16(unsigned short h) { return __bfloat162float(__ushort_as_bfloat16(h)); }
__device__ inline unsigned pack_bf16(float lo, float hi) { return unsigned(to_bf16(lo)) | unsigned(to_bf16(hi)) << 16; }

// rows x (16 DT) of src (row stride D, rows_valid rows) into dst (row stride
// Ds, bf16), zeros past rows_valid and D.
template <int DT>
__device__ inline void stage(unsigned short* dst, int Ds, const float* src, int rows, int rows_valid, int D) {
    for (int e = int(threadIdx.x); e < rows * 16 * DT; e += int(blockDim.x)) {
        const int r = e / (16 * DT), c = e % (16 * DT);
        dst[r * Ds + c] = to_bf16(r < rows_valid && c < D ? src[long(r) * D + c] : 0.0f);
    }
}

// DT: d rounded up to 16, in 16s (1..8).
template <int DT>
__global__ void MW_LAUNCH_BOUNDS(32 * kWarps)
    fa2_mma_kernel(const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
                   float* __restrict__ O, int H, int Hk, int S, int D, int causal, float scale) {
    MW_DYNAMIC_SHARED(unsigned short, smem);
    constexpr int Ds = 16 * DT + kPad;  // rows of 16-byte multiples: ldmatrix's alignment
    unsigned short* Qs = smem;          // kBr x Ds
    unsigned short* Ks = Qs + kBr * Ds;  // kBc x Ds
    unsigned short* Vs = Ks + kBc * Ds;  // kBc x Ds
    const int bh = int(blockIdx.y), b = bh / H, kh = (bh % H) / (H / Hk);
    const int q0 = int(blockIdx.x) * kBr, warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    const int g = lane / 4, t = lane % 4;
    const float* k = K + long(b * Hk + kh) * S * D;
    const float* v = V + long(b * Hk + kh) * S * D;

    stage<DT>(Qs, Ds, Q + (long(bh) * S + q0) * D, kBr, S - q0, D);
    __syncthreads();
    // This warp's 16 rows of Q as A fragments, one per 16 of d: matrix i of
    // the x4 load is rows 8 (i % 2).., columns 8 (i / 2).. of the 16 x 16.
    unsigned qa[DT][4];
    for (int kk = 0; kk < DT; ++kk)
        mw::tc::ldmatrix<4>(qa[kk], Qs + (warp * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * Ds + 16 * kk + 8 * (lane / 16));

    float o[2 * DT][4] = {};  // O's 16 x 8 C fragments, one per 8 of d
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // rows g and g + 8 of the warp
    const int row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    const int kv_end = causal ? min(S, q0 + kBr) : S;
    for (int k0 = 0; k0 < kv_end; k0 += kBc) {
        __syncthreads();  // the last tile's fragments are read
        stage<DT>(Ks, Ds, k + long(k0) * D, kBc, S - k0, D);
        stage<DT>(Vs, Ds, v + long(k0) * D, kBc, S - k0, D);
        __syncthreads();
        // S = Q K^T: 4 C fragments of 8 keys; K rows 8j.. are B's columns.
        float s[4][4] = {};
        for (int kk = 0; kk < DT; ++kk)
            for (int j = 0; j < 4; ++j) {
                unsigned kb[2];
                mw::tc::ldmatrix<2>(kb, Ks + (8 * j + lane % 8) * Ds + 16 * kk + 8 * ((lane / 8) % 2));
                mw::tc::mma_m16n8k16<__nv_bfloat16>(s[j], qa[kk], kb, s[j]);
            }
        // Scale and mask; the tile's row max over the quad's 4 lanes.
        float mx[2] = {-INFINITY, -INFINITY};
        for (int j = 0; j < 4; ++j)
            for (int e = 0; e < 4; ++e) {
                const int key = k0 + 8 * j + 2 * t + (e & 1);
                const bool keep = key < S && !(causal && key > row[e / 2]);
                s[j][e] = keep ? s[j][e] * scale : -INFINITY;
                mx[e / 2] = fmaxf(mx[e / 2], s[j][e]);
            }
        float base[2], alpha[2], sum[2] = {0.0f, 0.0f};
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float m_new = fmaxf(m[r], mx[r]);
            base[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet: everything stays 0
            alpha[r] = expf(m[r] - base[r]);
            m[r] = m_new;
        }
        // P = exp(S - max), rounded to bf16 here so that the row sum adds
        // exactly the weights P V multiplies.
        for (int j = 0; j < 4; ++j)
            for (int e = 0; e < 4; ++e) {
                s[j][e] = from_bf16(to_bf16(expf(s[j][e] - base[e / 2])));
                sum[e / 2] += s[j][e];
            }
        for (int r = 0; r < 2; ++r) {
            sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
            sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
            l[r] = l[r] * alpha[r] + sum[r];
        }
        for (int n = 0; n < 2 * DT; ++n) o[n][0] *= alpha[0], o[n][1] *= alpha[0], o[n][2] *= alpha[1], o[n][3] *= alpha[1];
        // O += P V, 16 keys at a time: S's fragments 2c and 2c + 1 are P's
        // A fragment; V rows 16c.. (transposed on the way) are B.
        for (int c = 0; c < 2; ++c) {
            const unsigned pa[4] = {pack_bf16(s[2 * c][0], s[2 * c][1]), pack_bf16(s[2 * c][2], s[2 * c][3]),
                                    pack_bf16(s[2 * c + 1][0], s[2 * c + 1][1]),
                                    pack_bf16(s[2 * c + 1][2], s[2 * c + 1][3])};
            for (int n = 0; n < 2 * DT; ++n) {
                unsigned vb[2];
                mw::tc::ldmatrix<2, true>(vb, Vs + (16 * c + lane % 8 + 8 * ((lane / 8) % 2)) * Ds + 8 * n);
                mw::tc::mma_m16n8k16<__nv_bfloat16>(o[n], pa, vb, o[n]);
            }
        }
    }
    for (int r = 0; r < 2; ++r) {
        if (row[r] >= S) continue;
        const float inv = 1.0f / l[r];
        float* out = O + (long(bh) * S + row[r]) * D;
        for (int n = 0; n < 2 * DT; ++n)
            for (int e = 0; e < 2; ++e)
                if (8 * n + 2 * t + e < D) out[8 * n + 2 * t + e] = o[n][2 * r + e] * inv;
    }
}

template <int DT> void launch_dt(const mw::fusion::AttnShape& a, mw::cuda::DeviceProblem& d) {
    const int S = int(a.S);
    const std::size_t smem = std::size_t(kBr + 2 * kBc) * (16 * DT + kPad) * sizeof(unsigned short);
    mw::launch(fa2_mma_kernel<DT>, dim3((S + kBr - 1) / kBr, unsigned(a.B * a.H)), dim3(32 * kWarps), smem,
               d.stream, d.in<const float>("Q"), d.in<const float>("K"), d.in<const float>("V"), d.out<float>("O"),
               int(a.H), int(a.Hk), S, int(a.D), int(a.causal), a.scale);
}

mw::Instance prepare_fa2_mma(mw::Problem& p) {
    const auto a = mw::fusion::attn_shape(p.shape);
    if (a.D > 128) throw std::runtime_error("attention flash2_bf16 (cuda): d=" + std::to_string(a.D) + " > 128");
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        switch ((a.D + 15) / 16) {
            case 1: return launch_dt<1>(a, d);
            case 2: return launch_dt<2>(a, d);
            case 3: return launch_dt<3>(a, d);
            case 4: return launch_dt<4>(a, d);
            case 5: return launch_dt<5>(a, d);
            case 6: return launch_dt<6>(a, d);
            case 7: return launch_dt<7>(a, d);
            default: return launch_dt<8>(a, d);
        }
    });
}

// Tensor-core work done, padding included: per (batch, head) and block of
// 64 queries, every 32-key tile it walks costs two 64 x 32 x d16 products.
double executed_flops(const mw::Shape& s) {
    const auto a = mw::fusion::attn_shape(s);
    const double d16 = 16.0 * double((a.D + 15) / 16);
    double tiles = 0;
    for (long q0 = 0; q0 < a.S; q0 += kBr) tiles += double((std::min(a.S, a.causal ? q0 + kBr : a.S) + kBc - 1) / kBc);
    return double(a.B * a.H) * tiles * 2 * (2.0 * kBr * kBc * d16);
}

}  // namespace

MW_REGISTER_VARIANT(attention_flash2_mma_cuda, {
    .name = "flash2_bf16", .op = "attention", .lever = "fusion",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 3,
    .rationale = "FlashAttention-2 on bf16 tensor cores: per warp 16 query rows, S = Q K^T and O += P V by "
                 "mma.sync m16n8k16 with P taken straight from S's accumulators, softmax state in fp32 registers",
    .needs = {"gpu", "sm_80"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        const auto a = mw::fusion::attn_shape(s);
        const double blocks = std::ceil(double(a.S) / kBr) * (a.causal ? 0.5 : 1.0);
        return 4.0 * a.B * a.S * a.D * (2.0 * a.H + 2.0 * a.H * blocks);
    },
    .executed_flops = executed_flops,
    .compute = "bf16",
    .prepare = prepare_fa2_mma,
    .accepts = [](const mw::Shape& s) -> std::string {
        return mw::fusion::attn_shape(s).D > 128 ? "d > 128 (its Q fragments and O accumulators live in registers)"
                                                 : "";
    },
    .contract_oracle = mw::fusion::oracle_bf16_inputs,
    .tolerance_scale = 4096.0 });
