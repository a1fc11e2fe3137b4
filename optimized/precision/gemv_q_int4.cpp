// GEMV, precision lever, rung 4: INT4 block-wise weights (dequant_gemv_int4_gG).
// (The whole ladder is listed in reference/precision/gemv_q.hpp.)
//
// Change from rung 3 (int8 per channel): half a byte per weight, with a scale
// per group of G weights along n_in instead of per row, so one outlier spoils
// only its own group (G = 32, 64, 128):
//   sym:  q in [-7, 7] stored as q+8, fp16 scale per group     4 + 16/G bits (G=64: 4.25)
//   asym: q in [0, 15], fp16 scale + fp16 zero-point per group 4 + 32/G bits (G=64: 4.5)
// Two weights per byte, laid out so that one 16-byte load gives 32 weights:
// the low nibbles are weights 0..15 of the chunk, the high nibbles 16..31
// (quant.hpp). Decode = one zero-extension of the 16 bytes to 16 dwords,
// then AND (low nibbles) and shift (high nibbles), int-to-float: 5 ops per
// 32 weights, no lookup tables, no fp32 copy of W ever exists.
// The scale is applied once per group to the group's partial dot product,
// and the zero-point through the group sum of x (gemv_q_cpu.hpp):
//     sum_j s (q_j - z) x_j = s * (sum_j q_j x_j - z * sum_j x_j).
// Expected effect: weight bytes n_out * n_in * (4 + 16/G)/8 (172 MiB at 18432^2,
// G=64 sym), 7.5x fewer than fp32, so up to ~7x faster while bandwidth-bound
// (target >= 3x at b = 1). The decode now costs about as much as the FMA, so
// at b = 1 the kernel sits closer to its compute roof than any earlier rung,
// and the ridge (where extra batch items stop being free) comes at a smaller b.
// Numerics: |w - dequant(w)| <= s_g / 2 per weight (quant.hpp).
#include "kernels/precision/gemv.hpp"
#include "optimized/precision/gemv_q_cpu.hpp"

namespace mw::precision::cpu {
namespace {

// Shared per-row state: payload row, fp16 scales (and zero-points) of its groups.
struct Int4Row {
    static constexpr bool grouped = true;
    const std::uint8_t* row;
    const std::uint16_t *s16, *z16;
    std::int64_t group;
    float row_scale = 1;
    Int4Row(const QMatrix& m, std::int64_t r)
        : row(m.payload.as<std::uint8_t>() + r * (m.ld / 2)),
          s16(m.scales.as<std::uint16_t>() + r * m.groups_per_row),
          z16(m.spec.asym ? m.zeros.as<std::uint16_t>() + r * m.groups_per_row : nullptr),
          group(m.spec.group) {}
    const char* at(std::int64_t j) const { return reinterpret_cast<const char*>(row + j / 2); }
    MW_TARGET_AVX2 float scale(std::int64_t g) const { return _cvtsh_ss(s16[g]); }
    MW_TARGET_AVX2 float zero(std::int64_t g) const { return z16 ? _cvtsh_ss(z16[g]) : 8.0f; }
};

struct Int4x16 : Int4Row {
    using Int4Row::Int4Row;
    // The 16 bytes are widened once to 16 dwords; each dword then holds a low
    // nibble (weights 0..15) and a high nibble (weights 16..31) of the chunk.
    MW_TARGET_AVX512 void decode(std::int64_t j, __m512 w[2]) const {
        const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j / 2)));
        w[0] = _mm512_cvtepi32_ps(_mm512_and_si512(d, _mm512_set1_epi32(0x0F)));
        w[1] = _mm512_cvtepi32_ps(_mm512_srli_epi32(d, 4));
    }
};

struct Int4x8 : Int4Row {
    using Int4Row::Int4Row;
    MW_TARGET_AVX2 void decode(std::int64_t j, __m256 w[4]) const {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j / 2));
        const __m256i d0 = _mm256_cvtepu8_epi32(v), d1 = _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8));
        const __m256i m = _mm256_set1_epi32(0x0F);
        w[0] = _mm256_cvtepi32_ps(_mm256_and_si256(d0, m));
        w[1] = _mm256_cvtepi32_ps(_mm256_and_si256(d1, m));
        w[2] = _mm256_cvtepi32_ps(_mm256_srli_epi32(d0, 4));
        w[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(d1, 4));
    }
};

}  // namespace

// This rung as a function (kernels/precision/gemv.hpp).
void gemv_int4(const QMatrix& m, const float* x, std::int64_t b, float* y) {
    thread_local std::vector<float> xpad, xsum;
    gemv_call<Int4x16, Int4x8>(m, x, b, y, xpad, xsum);
}
}  // namespace mw::precision::cpu

namespace mwp = mw::precision;

#define MW_GEMV_INT4(G, ASYM, NAME)                                                                          \
    MW_REGISTER_VARIANT(gemv_q_##NAME##_cpu, {                                                               \
        .name = #NAME, .op = "gemv_q", .lever = "precision",                                                 \
        .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 4,                                 \
        .rationale = std::string("int4 weights, two per byte, fp16 scale") + (ASYM ? " and zero-point" : "") + \
                     " per group of " #G ", dequantized in registers inside the dot product",                \
        .needs = {"avx2"},                                                                                   \
        .bytes = [](const mw::Shape& s, mw::DType) { return mwp::gemv_bytes({mwp::Format::int4, G, ASYM}, s); }, \
        .prepare = mwp::cpu::gemv_prepare<mwp::cpu::Int4x16, mwp::cpu::Int4x8>({mwp::Format::int4, G, ASYM}),    \
        .contract_oracle = mwp::contract_oracle({mwp::Format::int4, G, ASYM}) })

MW_GEMV_INT4(32, false, int4_g32_sym);
MW_GEMV_INT4(64, false, int4_g64_sym);
MW_GEMV_INT4(128, false, int4_g128_sym);
MW_GEMV_INT4(32, true, int4_g32_asym);
MW_GEMV_INT4(64, true, int4_g64_asym);
MW_GEMV_INT4(128, true, int4_g128_asym);
