// GEMV, precision lever, rung 2: bf16 and fp16 weights, fp32 accumulation.
// (The whole ladder is listed in reference/precision/gemv_q.hpp.)
//
// Change from rung 1 (fp32): each weight is stored in 16 bits and widened to
// fp32 in registers right before the FMA; x, the accumulators and y stay fp32.
//   bf16: the top half of an fp32 — widening is a zero-extend and a 16-bit
//         shift (integer ops, no conversion unit);
//   fp16: one vcvtph2ps per 16 weights (F16C / AVX-512F).
// Expected effect: weight bytes halve, 2 * n_out * n_in (648 MiB at 18432^2),
// so a bandwidth-bound GEMV runs up to 2x faster than rung 1 (target >= 1.6x).
// FLOPs are unchanged; the widening adds 1-2 integer ops per 16 weights, far
// below what a core can issue while waiting on DRAM.
// Numerics: per-weight error <= 2^-8 |w| (bf16) or 2^-11 |w| (fp16).
#include "kernels/precision/gemv.hpp"
#include "optimized/precision/gemv_q_cpu.hpp"

namespace mw::precision::cpu {
namespace {

template <bool BF16>
struct Half16 {
    const char* at(std::int64_t j) const { return reinterpret_cast<const char*>(row + j); }
    static constexpr bool grouped = false;
    const std::uint16_t* row;
    std::int64_t group;
    float row_scale = 1;
    Half16(const QMatrix& m, std::int64_t r) : row(m.payload.as<std::uint16_t>() + r * m.ld), group(m.ld) {}
    MW_TARGET_AVX512 static __m512 widen(const std::uint16_t* p) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        if constexpr (BF16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        else return _mm512_cvtph_ps(h);
    }
    MW_TARGET_AVX512 void decode(std::int64_t j, __m512 w[2]) const {
        w[0] = widen(row + j);
        w[1] = widen(row + j + 16);
    }
};

template <bool BF16>
struct Half8 {
    const char* at(std::int64_t j) const { return reinterpret_cast<const char*>(row + j); }
    static constexpr bool grouped = false;
    const std::uint16_t* row;
    std::int64_t group;
    float row_scale = 1;
    Half8(const QMatrix& m, std::int64_t r) : row(m.payload.as<std::uint16_t>() + r * m.ld), group(m.ld) {}
    MW_TARGET_AVX2 static __m256 widen(const std::uint16_t* p) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        if constexpr (BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        else return _mm256_cvtph_ps(h);
    }
    MW_TARGET_AVX2 void decode(std::int64_t j, __m256 w[4]) const {
        for (int k = 0; k < 4; ++k) w[k] = widen(row + j + 8 * k);
    }
};

}  // namespace

// This rung as a function (kernels/precision/gemv.hpp).
void gemv_half(const QMatrix& m, const float* x, std::int64_t b, float* y) {
    thread_local std::vector<float> xpad, xsum;
    if (m.spec.format == Format::bf16)
        gemv_call<Half16<true>, Half8<true>>(m, x, b, y, xpad, xsum);
    else
        gemv_call<Half16<false>, Half8<false>>(m, x, b, y, xpad, xsum);
}
}  // namespace mw::precision::cpu

namespace mwp = mw::precision;

MW_REGISTER_VARIANT(gemv_q_bf16_cpu, {
    .name = "bf16", .op = "gemv_q", .lever = "precision",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 2,
    .rationale = "bf16 weights widened to fp32 in registers (a 16-bit shift): half the bytes of fp32",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mwp::gemv_bytes({mwp::Format::bf16}, s); },
    .prepare = mwp::cpu::gemv_prepare<mwp::cpu::Half16<true>, mwp::cpu::Half8<true>>({mwp::Format::bf16}),
    .contract_oracle = mwp::contract_oracle({mwp::Format::bf16}) });

MW_REGISTER_VARIANT(gemv_q_fp16_cpu, {
    .name = "fp16", .op = "gemv_q", .lever = "precision",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 2,
    .rationale = "fp16 weights widened to fp32 in registers (vcvtph2ps): half the bytes of fp32",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mwp::gemv_bytes({mwp::Format::f16}, s); },
    .prepare = mwp::cpu::gemv_prepare<mwp::cpu::Half16<false>, mwp::cpu::Half8<false>>({mwp::Format::f16}),
    .contract_oracle = mwp::contract_oracle({mwp::Format::f16}) });
