// GEMV, precision lever, rung 3: INT8 weights, symmetric, one scale per
// output channel (row).
// (The whole ladder is listed in reference/precision/gemv_q.hpp.)
//
// Change from rung 2 (bf16/fp16): one byte per weight, q in [-127, 127] with
// w ~ s_row * q (s_row = max|w_row| / 127, fp32). The decode is a
// sign-extend and an int-to-float convert per 16 weights; the scale is
// applied once per row, to the finished dot product (rs in gemv_q_cpu.hpp),
// not per weight. Weights only: x stays fp32 (a W8A16-style kernel).
// Expected effect: weight bytes n_out * n_in + 4 * n_out (324 MiB at 18432^2,
// 8.004 bits per weight), a quarter of fp32: up to 4x faster than rung 1
// while bandwidth-bound; the convert adds 2 ops per 16 weights.
// Numerics: |w - s q| <= s_row / 2 per weight (quant.hpp).
#include "kernels/precision/gemv.hpp"
#include "optimized/precision/gemv_q_cpu.hpp"

namespace mw::precision::cpu {
namespace {

struct I8x16 {
    const char* at(std::int64_t j) const { return reinterpret_cast<const char*>(row + j); }
    static constexpr bool grouped = false;
    const std::int8_t* row;
    std::int64_t group;
    float row_scale;
    I8x16(const QMatrix& m, std::int64_t r)
        : row(m.payload.as<std::int8_t>() + r * m.ld), group(m.ld), row_scale(m.scales.as<float>()[r]) {}
    MW_TARGET_AVX512 static __m512 widen(const std::int8_t* p) {
        return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    }
    MW_TARGET_AVX512 void decode(std::int64_t j, __m512 w[2]) const {
        w[0] = widen(row + j);
        w[1] = widen(row + j + 16);
    }
};

struct I8x8 {
    const char* at(std::int64_t j) const { return reinterpret_cast<const char*>(row + j); }
    static constexpr bool grouped = false;
    const std::int8_t* row;
    std::int64_t group;
    float row_scale;
    I8x8(const QMatrix& m, std::int64_t r)
        : row(m.payload.as<std::int8_t>() + r * m.ld), group(m.ld), row_scale(m.scales.as<float>()[r]) {}
    MW_TARGET_AVX2 static __m256 widen(const std::int8_t* p) {
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    }
    MW_TARGET_AVX2 void decode(std::int64_t j, __m256 w[4]) const {
        for (int k = 0; k < 4; ++k) w[k] = widen(row + j + 8 * k);
    }
};

}  // namespace

// This rung as a function (kernels/precision/gemv.hpp).
void gemv_int8(const QMatrix& m, const float* x, std::int64_t b, float* y) {
    thread_local std::vector<float> xpad, xsum;
    gemv_call<I8x16, I8x8>(m, x, b, y, xpad, xsum);
}
}  // namespace mw::precision::cpu

namespace mwp = mw::precision;

MW_REGISTER_VARIANT(gemv_q_int8_channel_cpu, {
    .name = "int8_channel", .op = "gemv_q", .lever = "precision",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 3,
    .rationale = "int8 weights with one fp32 scale per row, widened in registers and scaled once per row: "
                 "a quarter of fp32's bytes",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mwp::gemv_bytes({mwp::Format::int8_channel}, s); },
    .prepare = mwp::cpu::gemv_prepare<mwp::cpu::I8x16, mwp::cpu::I8x8>({mwp::Format::int8_channel}),
    .contract_oracle = mwp::contract_oracle({mwp::Format::int8_channel}) });
