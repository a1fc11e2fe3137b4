// GEMV on the GPU, precision lever, rung 4: int4 block-wise weights
// (dequant_gemv_int4_gG). (The CUDA ladder is listed in reference/precision/gemv_q.cu.)
//
// Change from rung 3 (int8 per channel): half a byte per weight, with a scale
// per group of G weights along n_in instead of per row (G = 32, 64, 128):
//   sym:  q in [-7, 7] stored as q+8, fp16 scale per group     4 + 16/G bits (G=64: 4.25)
//   asym: q in [0, 15], fp16 scale + fp16 zero-point per group 4 + 32/G bits (G=64: 4.5)
// quantize()'s bits, the CPU rung 4's, uploaded as they are: each 32-weight
// chunk is 16 bytes, byte m holding weight m in its low nibble and weight
// m+16 in its high nibble — so a lane's 16-byte load is one chunk, and one
// chunk never straddles two groups. Dequantized in registers inside the dot
// product, never expanded to an fp32 copy of W:
//   nibbles of word k (or of word k-4 shifted right by 4) masked with
//   0x0F0F0F0F, each dropped into the mantissa of 2^23 (one PRMT) and
//   2^23 + 8 subtracted: q - 8, exact (sym); asym subtracts 2^23 and then z.
// Each lane sums (q - z) x over its 32 weights and multiplies by the group's
// scale once: one fp16 scale load and one FMA per 32 weights.
// Bytes: n_out * n_in * (4 + 16/G) / 8 of W (+ x, y): 34 MiB at 8192^2 G=64
// sym, 7.5x fewer than rung 1, so up to ~7x faster while bandwidth-bound.
// The decode (about 2 ops per weight plus the FMA) stays below the SM's
// issue rate at b = 1; an int-to-float convert per weight would not have.
// x is now the larger stream inside the SM: 4 bytes of shared-memory reads
// per byte of W per batch item, which is why two rows share every read and
// why the swizzle (gemv_q_cuda.hpp) matters most here.
// Numerics: |w - dequant(w)| <= s_g / 2 per weight (quant.hpp).
#include "optimized/precision/gemv_q_cuda.hpp"

namespace mw::precision::cuda {
namespace {

template <bool ASYM>
struct Int4Load {
    static constexpr int kWeights = 32;
    static constexpr bool kGrouped = true;
    uint4 v;
    float scale;
    float offset;  // subtracted from the decoded 2^23 + q: sym 2^23 + 8 (one subtraction gives q - 8); asym z
    __device__ static Int4Load load(const QDev& q, int row, int col) {
        const int g = row * q.groups_per_row + col / q.group;
        Int4Load d;
        d.v = *reinterpret_cast<const uint4*>(row_ptr(q, row) + std::size_t(col) / 2);
        d.scale = bits::f16_to_f32(q.scales_f16[g]);
        d.offset = ASYM ? bits::f16_to_f32(q.zeros_f16[g]) : bits::kMagic + 8.0f;
        return d;
    }
    // Weights 4k..4k+3 of the chunk: low nibbles of word k (k < 4) or high
    // nibbles of word k-4 (weights 16..31).
    __device__ void slot(int k, float w[4]) const {
        const std::uint32_t word = (k & 3) == 0 ? v.x : (k & 3) == 1 ? v.y : (k & 3) == 2 ? v.z : v.w;
        const std::uint32_t nib = (k < 4 ? word : word >> 4) & 0x0F0F0F0Fu;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            if constexpr (ASYM) w[i] = (bits::magic_byte(nib, i) - bits::kMagic) - offset;
            else w[i] = bits::magic_byte(nib, i) - offset;
        }
    }
    __device__ static float row_scale(const QDev&, int) { return 1.0f; }
};

}  // namespace
}  // namespace mw::precision::cuda

namespace mwp = mw::precision;

#define MW_GEMV_INT4_CUDA(G, ASYM, NAME)                                                                     \
    MW_REGISTER_VARIANT(gemv_q_##NAME##_cuda, {                                                              \
        .name = #NAME, .op = "gemv_q", .lever = "precision",                                                 \
        .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 4,                                  \
        .rationale = std::string("int4 weights, two per byte, fp16 scale") + (ASYM ? " and zero-point" : "") + \
                     " per group of " #G ", dequantized in registers inside the warp's dot product",         \
        .needs = {"gpu"},                                                                                    \
        .bytes = [](const mw::Shape& s, mw::DType) {                                                         \
            return mwp::cuda::gemv_cuda_bytes({mwp::Format::int4, G, ASYM}, s);                              \
        },                                                                                                   \
        .prepare = mwp::cuda::gemv_prepare<mwp::cuda::Int4Load<ASYM>>({mwp::Format::int4, G, ASYM}),         \
        .contract_oracle = mwp::contract_oracle({mwp::Format::int4, G, ASYM}) })

MW_GEMV_INT4_CUDA(32, false, int4_g32_sym);
MW_GEMV_INT4_CUDA(64, false, int4_g64_sym);
MW_GEMV_INT4_CUDA(128, false, int4_g128_sym);
MW_GEMV_INT4_CUDA(32, true, int4_g32_asym);
MW_GEMV_INT4_CUDA(64, true, int4_g64_asym);
MW_GEMV_INT4_CUDA(128, true, int4_g128_asym);
