// GEMV, precision lever, rung 1: fp32 weights, AVX-512, all cores, streaming.
// (The whole ladder is listed in reference/precision/gemv_q.hpp.)
//
// Change from rung 0 (naive): the same fp32 bytes — 4 bytes per weight,
// 1.27 GiB at n_out = n_in = 18432 — but read fast enough to hit the memory
// wall: 16-lane FMAs with two independent accumulators per batch item (a
// single chain would cap a core at 16 floats per 4-cycle FMA latency), rows
// dealt to every core in ~512 KiB sequential tiles the prefetcher can follow
// (optimized/precision/gemv_q_cpu.hpp). Expected: bytes unchanged, time falls
// to bytes / DRAM bandwidth, i.e. >= 70% of the calibrated ~22 GB/s
// (~62 ms at the default shape). This is the baseline every lower-precision
// rung divides: from here on only the bytes per weight change.
#include "kernels/precision/gemv.hpp"
#include "optimized/precision/gemv_q_cpu.hpp"

namespace mw::precision::cpu {
namespace {

// fp32 needs no decode: load. The last chunk of a row whose length is not a
// multiple of 32 is masked (W is the problem's own, unpadded buffer).
struct F32x16 {
    const char* at(std::int64_t j) const { return reinterpret_cast<const char*>(row + j); }
    static constexpr bool grouped = false;
    const float* row;
    std::int64_t n, group;
    float row_scale = 1;
    F32x16(const QMatrix& m, std::int64_t r) : row(m.payload.as<float>() + r * m.ld), n(m.n_in), group((m.n_in + 31) / 32 * 32) {}
    MW_TARGET_AVX512 void decode(std::int64_t j, __m512 w[2]) const {
        if (j + 32 <= n) {
            w[0] = _mm512_loadu_ps(row + j);
            w[1] = _mm512_loadu_ps(row + j + 16);
            return;
        }
        const auto mask = [&](std::int64_t at) {
            const std::int64_t k = std::clamp<std::int64_t>(n - at, 0, 16);
            return __mmask16(k == 16 ? 0xFFFF : (1u << k) - 1);
        };
        w[0] = _mm512_maskz_loadu_ps(mask(j), row + j);
        w[1] = _mm512_maskz_loadu_ps(mask(j + 16), row + j + 16);
    }
};

struct F32x8 {
    const char* at(std::int64_t j) const { return reinterpret_cast<const char*>(row + j); }
    static constexpr bool grouped = false;
    const float* row;
    std::int64_t n, group;
    float row_scale = 1;
    F32x8(const QMatrix& m, std::int64_t r) : row(m.payload.as<float>() + r * m.ld), n(m.n_in), group((m.n_in + 31) / 32 * 32) {}
    MW_TARGET_AVX2 void decode(std::int64_t j, __m256 w[4]) const {
        if (j + 32 <= n) {
            for (int k = 0; k < 4; ++k) w[k] = _mm256_loadu_ps(row + j + 8 * k);
            return;
        }
        alignas(32) float tail[32] = {};
        for (std::int64_t k = j; k < n; ++k) tail[k - j] = row[k];
        for (int k = 0; k < 4; ++k) w[k] = _mm256_load_ps(tail + 8 * k);
    }
};

}  // namespace

// This rung as a function (kernels/precision/gemv.hpp).
void gemv_f32(const QMatrix& m, const float* x, std::int64_t b, float* y) {
    thread_local std::vector<float> xpad, xsum;
    gemv_call<F32x16, F32x8>(m, x, b, y, xpad, xsum);
}
}  // namespace mw::precision::cpu

MW_REGISTER_VARIANT(gemv_q_fp32_cpu, {
    .name = "fp32", .op = "gemv_q", .lever = "precision",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "fp32 weights streamed by every core with 16-lane FMAs: same 4 bytes per weight "
                 "as naive, now limited by DRAM bandwidth instead of FMA latency",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::precision::gemv_bytes({mw::precision::Format::f32}, s); },
    .prepare = mw::precision::cpu::gemv_prepare<mw::precision::cpu::F32x16, mw::precision::cpu::F32x8>(
        {mw::precision::Format::f32}) });
