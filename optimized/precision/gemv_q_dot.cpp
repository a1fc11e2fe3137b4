// GEMV, precision lever, rung 5: dot-product instructions on rounded
// activations (bf16_dot, int8_dot, int4_gG_{sym,asym}_dot).
// (The whole ladder is listed in reference/precision/gemv_q.hpp.)
//
// Change from rungs 2-4: x is rounded once per call to the weights' kind of
// number, so the inner loop multiplies stored weights directly instead of
// converting each one to fp32 first:
//   bf16_dot  x -> bf16; vdpbf16ps does 32 bf16 products into 16 fp32 lanes
//             (AVX512_BF16), one instruction where rung 2 needs two widenings
//             and two FMAs;
//   int8_dot  x -> int8 per block of 32 (scale d_blk); vpdpbusd does 64
//             u8 x s8 products into 16 int32 lanes (AVX512_VNNI, here on
//             256-bit registers: 32 weights a step). int8 weights are made
//             unsigned by a flip of the top bit (q + 128) and the 128 * sum(q_x)
//             it adds is taken off once per block;
//   int4_dot  x -> int8 per group of G; the nibbles (already unsigned: q + 8,
//             or q with a zero-point) go straight into vpdpbusd.
// A block's integer sum is scaled once, s_g * d_blk, instead of once per
// weight. Same weight bytes as rungs 2-4; what falls is the work per weight:
// int4 went from 5 decode ops + 2 FMAs per 32 weights per batch item to
// 4 decode ops (shared by the batch items) + 1 vpdpbusd per item, so this
// rung should reach the memory roof at b = 1 where rung 4 could not, and lose
// less per extra batch item. The rounding of x costs b * n_in values per call
// (timed: it is part of every call).
// AVX2 fallback (no VNNI / BF16, or MEMWALL_ISA=avx2): vpmaddubsw + vpmaddwd
// (int8 weights through |w| and sign(x, w), which cannot saturate), and bf16
// widened to fp32 + FMA. The path taken is recorded as the result's `path`.
// Numerics: contract y = dequant(W) . dequant(Q(x)) (quant.hpp's ActSpec);
// the error against the exact product adds |W| * d_blk / 2 (int8 x) or
// |W x| * 2^-9 (bf16 x).
#include "harness/inputs.hpp"
#include "kernels/precision/gemv.hpp"
#include "optimized/precision/gemv_q_cpu.hpp"

namespace mw::precision::cpu {

// --- rounding x (timed, once per call) -----------------------------------------
namespace {

MW_TARGET_AVX512 void quantize_row_avx512(const float* x, std::int64_t n, std::int64_t ld, int block, std::int8_t* q,
                                          float* d, std::int32_t* qsum) {
    for (std::int64_t k0 = 0, blk = 0; k0 < ld; k0 += block, ++blk) {
        __m512 amax = _mm512_setzero_ps();
        for (std::int64_t k = k0; k < k0 + block; k += 16) {
            const __mmask16 mk = __mmask16(k >= n ? 0 : n - k >= 16 ? 0xFFFF : (1u << (n - k)) - 1);
            amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_maskz_loadu_ps(mk, x + k)));
        }
        const float a = _mm512_reduce_max_ps(amax), s = a / 127.0f, inv = a > 0 ? 1.0f / s : 0.0f;
        __m512i sum = _mm512_setzero_si512();
        for (std::int64_t k = k0; k < k0 + block; k += 16) {
            const __mmask16 mk = __mmask16(k >= n ? 0 : n - k >= 16 ? 0xFFFF : (1u << (n - k)) - 1);
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + k), _mm512_set1_ps(inv)));
            v = _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
            sum = _mm512_add_epi32(sum, v);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k), _mm512_cvtepi32_epi8(v));
        }
        d[blk] = s;
        qsum[blk] = _mm512_reduce_add_epi32(sum);
    }
}

// x[k..k+7], zero past n.
MW_TARGET_AVX2 inline __m256 load8(const float* x, std::int64_t k, std::int64_t n) {
    if (k + 8 <= n) return _mm256_loadu_ps(x + k);
    alignas(32) float buf[8];
    for (int i = 0; i < 8; ++i) buf[i] = k + i < n ? x[k + i] : 0.0f;
    return _mm256_load_ps(buf);
}

MW_TARGET_AVX2 void quantize_row_avx2(const float* x, std::int64_t n, std::int64_t ld, int block, std::int8_t* q,
                                      float* d, std::int32_t* qsum) {
    alignas(32) float buf[8];
    alignas(32) std::int32_t qi[8];
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (std::int64_t k0 = 0, blk = 0; k0 < ld; k0 += block, ++blk) {
        __m256 amax = _mm256_setzero_ps();
        for (std::int64_t k = k0; k < k0 + block; k += 8) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, load8(x, k, n)));
        _mm256_store_ps(buf, amax);
        float a = 0;
        for (float v : buf) a = std::max(a, v);
        const float s = a / 127.0f, inv = a > 0 ? 1.0f / s : 0.0f;
        std::int32_t sum = 0;
        for (std::int64_t k = k0; k < k0 + block; k += 8) {
            __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(load8(x, k, n), _mm256_set1_ps(inv)));
            v = _mm256_min_epi32(_mm256_max_epi32(v, _mm256_set1_epi32(-127)), _mm256_set1_epi32(127));
            _mm256_store_si256(reinterpret_cast<__m256i*>(qi), v);
            for (int i = 0; i < 8; ++i) q[k + i] = std::int8_t(qi[i]), sum += qi[i];
        }
        d[blk] = s;
        qsum[blk] = sum;
    }
}

// Round to nearest even, as f32_to_bf16 (harness/inputs.cpp) for every non-NaN.
MW_TARGET_AVX512 void bf16_row_avx512(const float* x, std::int64_t n, std::int64_t ld, std::uint16_t* h) {
    for (std::int64_t k = 0; k < ld; k += 16) {
        const __mmask16 mk = __mmask16(k >= n ? 0 : n - k >= 16 ? 0xFFFF : (1u << (n - k)) - 1);
        const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(mk, x + k));
        const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + k), _mm512_cvtepi32_epi16(r));
    }
}

}  // namespace

void quantize_acts_int8(const float* x, std::int64_t b, std::int64_t n_in, std::int64_t ld, int block, DotActs& a) {
    a.b = b, a.ld = ld, a.blocks = ld / block;
    a.q.resize(std::size_t(b * ld));
    a.d.resize(std::size_t(b * a.blocks));
    a.qsum.resize(std::size_t(b * a.blocks));
    const bool wide = select_isa() == Isa::avx512;
    for (std::int64_t bb = 0; bb < b; ++bb) {
        auto* f = wide ? quantize_row_avx512 : quantize_row_avx2;
        f(x + bb * n_in, n_in, ld, block, a.q.data() + bb * ld, a.d.data() + bb * a.blocks, a.qsum.data() + bb * a.blocks);
    }
}

void round_acts_bf16(const float* x, std::int64_t b, std::int64_t n_in, std::int64_t ld, DotActs& a) {
    a.b = b, a.ld = ld, a.blocks = 0;
    a.h.resize(std::size_t(b * ld));
    const bool wide = select_isa() == Isa::avx512;
    for (std::int64_t bb = 0; bb < b; ++bb) {
        std::uint16_t* h = a.h.data() + bb * ld;
        if (wide) {
            bf16_row_avx512(x + bb * n_in, n_in, ld, h);
        } else {
            for (std::int64_t k = 0; k < ld; ++k) h[k] = k < n_in ? f32_to_bf16(x[bb * n_in + k]) : 0;
        }
    }
}

ActSpec dot_acts(const QuantSpec& w) {
    switch (w.format) {
        case Format::bf16: return {ActRound::bf16};
        case Format::int8_channel: return {ActRound::int8, 32};
        case Format::int4: return {ActRound::int8, w.group};
        default: return {};
    }
}

std::string dot_path(const QuantSpec& w) {
    const bool wide = select_isa() == Isa::avx512;
    if (w.format == Format::bf16) return wide && isa::has_avx512_bf16() ? "avx512_bf16 (vdpbf16ps)" : "avx2 (widen + FMA)";
    if (w.format == Format::f32) return wide ? "avx512 (FMA)" : "avx2 (FMA)";
    return wide && isa::has_avx512_vnni() ? "avx512_vnni (vpdpbusd)" : "avx2 (vpmaddubsw + vpmaddwd)";
}

std::string dot_compute(const QuantSpec& w) {
    if (w.format == Format::f32) return "";
    if (w.format == Format::bf16) return select_isa() == Isa::avx512 && isa::has_avx512_bf16() ? "bf16" : "f32";
    return "int8";
}

// --- the row loops ----------------------------------------------------------------
namespace {

struct DotArgs {
    const QMatrix* m;
    const DotActs* a;
    float* y;
};

// Scale and zero-point of block g of row r, in units of the integer dot
// product: y += s * d_blk * (sum u x_q - z * sum x_q), u the stored code.
struct IntRow {
    const std::uint8_t* row;
    const std::uint16_t *s16, *z16;
    float row_scale = 1;
    bool int4;
    IntRow(const QMatrix& m, std::int64_t r)
        : row(m.payload.as<std::uint8_t>() + r * (m.spec.format == Format::int4 ? m.ld / 2 : m.ld)),
          s16(m.spec.format == Format::int4 ? m.scales.as<std::uint16_t>() + r * m.groups_per_row : nullptr),
          z16(m.spec.asym ? m.zeros.as<std::uint16_t>() + r * m.groups_per_row : nullptr),
          row_scale(m.spec.format == Format::int8_channel ? m.scales.as<float>()[r] : 1.0f),
          int4(m.spec.format == Format::int4) {}
    MW_TARGET_AVX2 float scale(std::int64_t g) const { return s16 ? _cvtsh_ss(s16[g]) : 1.0f; }
    MW_TARGET_AVX2 float zero(std::int64_t g, float int8_zero) const { return z16 ? _cvtsh_ss(z16[g]) : int4 ? 8.0f : int8_zero; }
};

// 32 stored weights as 32 unsigned bytes, in x's order: int4's 16 bytes hold
// weights 0..15 in their low nibbles and 16..31 in their high nibbles.
MW_TARGET_AVX2 inline __m256i int4_codes(const std::uint8_t* p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), m4 = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
}

// Block g's integer sums scaled once: facc += s d (sum u q_x), and the
// zero-point's share z s d sum(q_x) kept aside (subtracted at the row's end).
template <int NB>
MW_TARGET_AVX2 inline void close_block(const DotActs& a, const IntRow& w, std::int64_t g, std::int64_t b0, float int8_zero,
                                       const __m256i* iacc, __m256* facc, float* corr) {
    const float s = w.scale(g), z = w.zero(g, int8_zero);
    for (int bb = 0; bb < NB; ++bb) {
        const std::int64_t k = (b0 + bb) * a.blocks + g;
        const float sd = s * a.d[k];
        facc[bb] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[bb]), _mm256_set1_ps(sd), facc[bb]);
        corr[bb] += sd * z * float(a.qsum[k]);
    }
}

template <bool INT4, int NB>
MW_TARGET_AVX512_VNNI void int_rows_vnni(const DotArgs& d, std::int64_t r0, std::int64_t r1, std::int64_t b0) {
    const QMatrix& m = *d.m;
    const DotActs& a = *d.a;
    const std::int64_t blk = a.ld / a.blocks;
    for (std::int64_t r = r0; r < r1; ++r) {
        const IntRow w(m, r);
        __m256 facc[NB];
        float corr[NB];
        for (int bb = 0; bb < NB; ++bb) facc[bb] = _mm256_setzero_ps(), corr[bb] = 0;
        for (std::int64_t g = 0; g < a.blocks; ++g) {
            __m256i iacc[NB];
            for (int bb = 0; bb < NB; ++bb) iacc[bb] = _mm256_setzero_si256();
            for (std::int64_t j = g * blk; j < (g + 1) * blk; j += 32) {
                const std::uint8_t* p = w.row + (INT4 ? j / 2 : j);
                __builtin_prefetch(p + kPrefetchBytes, 0, 3);
                // int8: q + 128 makes the weight unsigned for vpdpbusd (u8 x s8).
                const __m256i u = INT4 ? int4_codes(p)
                                       : _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                                                          _mm256_set1_epi8(char(0x80)));
                for (int bb = 0; bb < NB; ++bb)
                    iacc[bb] = _mm256_dpbusd_epi32(
                        iacc[bb], u, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q.data() + (b0 + bb) * a.ld + j)));
            }
            close_block<NB>(a, w, g, b0, 128.0f, iacc, facc, corr);
        }
        for (int bb = 0; bb < NB; ++bb) d.y[(b0 + bb) * m.n_out + r] = w.row_scale * (hsum(facc[bb]) - corr[bb]);
    }
}

template <bool INT4, int NB>
MW_TARGET_AVX2 void int_rows_avx2(const DotArgs& d, std::int64_t r0, std::int64_t r1, std::int64_t b0) {
    const QMatrix& m = *d.m;
    const DotActs& a = *d.a;
    const std::int64_t blk = a.ld / a.blocks;
    const __m256i ones = _mm256_set1_epi16(1);
    for (std::int64_t r = r0; r < r1; ++r) {
        const IntRow w(m, r);
        __m256 facc[NB];
        float corr[NB];
        for (int bb = 0; bb < NB; ++bb) facc[bb] = _mm256_setzero_ps(), corr[bb] = 0;
        for (std::int64_t g = 0; g < a.blocks; ++g) {
            __m256i iacc[NB];
            for (int bb = 0; bb < NB; ++bb) iacc[bb] = _mm256_setzero_si256();
            for (std::int64_t j = g * blk; j < (g + 1) * blk; j += 32) {
                const std::uint8_t* p = w.row + (INT4 ? j / 2 : j);
                __builtin_prefetch(p + kPrefetchBytes, 0, 3);
                const __m256i u = INT4 ? int4_codes(p) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
                for (int bb = 0; bb < NB; ++bb) {
                    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q.data() + (b0 + bb) * a.ld + j));
                    // int4: codes <= 15, pairs cannot saturate 16 bits. int8:
                    // |w| <= 127 against sign(x, w): 2 * 127 * 127 < 2^15.
                    const __m256i pairs = INT4 ? _mm256_maddubs_epi16(u, xq)
                                               : _mm256_maddubs_epi16(_mm256_abs_epi8(u), _mm256_sign_epi8(xq, u));
                    iacc[bb] = _mm256_add_epi32(iacc[bb], _mm256_madd_epi16(pairs, ones));
                }
            }
            close_block<NB>(a, w, g, b0, 0.0f, iacc, facc, corr);  // int8 here is a signed product: no offset
        }
        for (int bb = 0; bb < NB; ++bb) d.y[(b0 + bb) * m.n_out + r] = w.row_scale * (hsum(facc[bb]) - corr[bb]);
    }
}

// bf16 x bf16: two accumulators per batch item (alternate 32-weight steps)
// so that one item's dependency chain does not pace the loop.
template <int NB>
MW_TARGET_AVX512_BF16 void bf16_rows_dot(const DotArgs& d, std::int64_t r0, std::int64_t r1, std::int64_t b0) {
    const QMatrix& m = *d.m;
    const DotActs& a = *d.a;
    for (std::int64_t r = r0; r < r1; ++r) {
        const std::uint16_t* row = m.payload.as<std::uint16_t>() + r * m.ld;
        __m512 acc[NB][2];
        for (int bb = 0; bb < NB; ++bb) acc[bb][0] = acc[bb][1] = _mm512_setzero_ps();
        for (std::int64_t j = 0; j < a.ld; j += 32) {
            __builtin_prefetch(row + j + kPrefetchBytes / 2, 0, 3);
            const __m512bh w = (__m512bh)_mm512_loadu_si512(row + j);
            const int h = (j >> 5) & 1;
            for (int bb = 0; bb < NB; ++bb)
                acc[bb][h] = _mm512_dpbf16_ps(acc[bb][h], w, (__m512bh)_mm512_loadu_si512(a.h.data() + (b0 + bb) * a.ld + j));
        }
        for (int bb = 0; bb < NB; ++bb) d.y[(b0 + bb) * m.n_out + r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[bb][0], acc[bb][1]));
    }
}

MW_TARGET_AVX2 inline __m256 widen_bf16(const std::uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}

template <int NB>
MW_TARGET_AVX2 void bf16_rows_avx2(const DotArgs& d, std::int64_t r0, std::int64_t r1, std::int64_t b0) {
    const QMatrix& m = *d.m;
    const DotActs& a = *d.a;
    for (std::int64_t r = r0; r < r1; ++r) {
        const std::uint16_t* row = m.payload.as<std::uint16_t>() + r * m.ld;
        __m256 acc[NB][2];
        for (int bb = 0; bb < NB; ++bb) acc[bb][0] = acc[bb][1] = _mm256_setzero_ps();
        for (std::int64_t j = 0; j < a.ld; j += 16) {
            __builtin_prefetch(row + j + kPrefetchBytes / 2, 0, 3);
            const __m256 w0 = widen_bf16(row + j), w1 = widen_bf16(row + j + 8);
            for (int bb = 0; bb < NB; ++bb) {
                const std::uint16_t* xh = a.h.data() + (b0 + bb) * a.ld + j;
                acc[bb][0] = _mm256_fmadd_ps(w0, widen_bf16(xh), acc[bb][0]);
                acc[bb][1] = _mm256_fmadd_ps(w1, widen_bf16(xh + 8), acc[bb][1]);
            }
        }
        for (int bb = 0; bb < NB; ++bb) d.y[(b0 + bb) * m.n_out + r] = hsum(_mm256_add_ps(acc[bb][0], acc[bb][1]));
    }
}

enum class Path { vnni, int_avx2, bf16_dot, bf16_avx2 };

template <int NB>
void rows(Path path, bool int4, const DotArgs& d, std::int64_t r0, std::int64_t r1, std::int64_t b0) {
    switch (path) {
        case Path::vnni: return int4 ? int_rows_vnni<true, NB>(d, r0, r1, b0) : int_rows_vnni<false, NB>(d, r0, r1, b0);
        case Path::int_avx2: return int4 ? int_rows_avx2<true, NB>(d, r0, r1, b0) : int_rows_avx2<false, NB>(d, r0, r1, b0);
        case Path::bf16_dot: return bf16_rows_dot<NB>(d, r0, r1, b0);
        case Path::bf16_avx2: return bf16_rows_avx2<NB>(d, r0, r1, b0);
    }
}

}  // namespace

// This rung as a function (kernels/precision/gemv.hpp).
void gemv_dot(const QMatrix& m, const float* x, std::int64_t b, float* y, DotActs& acts) {
    const bool wide = select_isa() == Isa::avx512;
    Path path;
    switch (m.spec.format) {
        case Format::bf16:
            path = wide && isa::has_avx512_bf16() ? Path::bf16_dot : Path::bf16_avx2;
            round_acts_bf16(x, b, m.n_in, m.ld, acts);
            break;
        case Format::int8_channel:
        case Format::int4:
            path = wide && isa::has_avx512_vnni() ? Path::vnni : Path::int_avx2;
            quantize_acts_int8(x, b, m.n_in, m.ld, dot_acts(m.spec).block, acts);
            break;
        default:
            throw std::invalid_argument("gemv_dot: no dot-product rung for " + describe(m.spec) +
                                        " (choices: bf16, int8_channel, int4)");
    }
    const bool int4 = m.spec.format == Format::int4;
    const DotArgs d{&m, &acts, y};
    const double row_bytes = double(m.n_in) * effective_bits(m.spec, m.n_in) / 8;
    const std::int64_t tile = std::max<std::int64_t>(1, std::int64_t((512 << 10) / row_bytes));
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t r0 = 0; r0 < m.n_out; r0 += tile) {
        const std::int64_t r1 = std::min(m.n_out, r0 + tile);
        for (std::int64_t b0 = 0; b0 < b;) {
            const std::int64_t left = b - b0;
            if (left >= 4) rows<4>(path, int4, d, r0, r1, b0), b0 += 4;
            else if (left >= 2) rows<2>(path, int4, d, r0, r1, b0), b0 += 2;
            else rows<1>(path, int4, d, r0, r1, b0), b0 += 1;
        }
    }
}

}  // namespace mw::precision::cpu

namespace mwp = mw::precision;

namespace {

// Quantized once here (untimed); x is rounded inside every timed call.
std::function<mw::Instance(mw::Problem&)> prepare_dot(mwp::QuantSpec spec) {
    return [spec](mw::Problem& p) {
        const std::int64_t n_out = p.shape["n_out"], n_in = p.shape["n_in"], b = p.shape["b"];
        auto m = std::make_shared<mwp::QMatrix>(mwp::quantize(spec, p.in("W").as<float>(), n_out, n_in));
        auto acts = std::make_shared<mwp::cpu::DotActs>();
        const float* x = p.in("x").as<float>();
        float* y = p.out("y").as<float>();
        mwp::cpu::gemv_dot(*m, x, b, y, *acts);  // sizes the scratch: the timed calls do not allocate
        mw::Instance inst;
        inst.run = [=] { mwp::cpu::gemv_dot(*m, x, b, y, *acts); };
        inst.path = mwp::cpu::dot_path(spec);
        inst.compute = mwp::cpu::dot_compute(spec);
        return inst;
    };
}

mw::Variant dot_variant(std::string name, mwp::QuantSpec spec, std::string rationale) {
    return {.name = std::move(name), .op = "gemv_q", .lever = "precision",
            .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 5,
            .rationale = std::move(rationale),
            .needs = {"avx2"},
            .bytes = [spec](const mw::Shape& s, mw::DType) { return mwp::gemv_bytes(spec, s); },
            .compute = spec.format == mwp::Format::bf16 ? "bf16" : "int8",  // MFU against the vdpbf16ps / VNNI peak;
                                                                            // prepare() names the AVX2 path's
            .prepare = prepare_dot(spec),
            .contract_oracle = mwp::contract_oracle(spec, mwp::cpu::dot_acts(spec))};
}

std::string int4_rationale(int g, bool asym) {
    return "int4 g" + std::to_string(g) + (asym ? " asym" : " sym") + " nibbles fed straight to vpdpbusd against x rounded to "
           "int8 per group; one scale (and zero-point) per group's integer sum";
}

}  // namespace

MW_REGISTER_VARIANT(gemv_q_bf16_dot_cpu, {dot_variant("bf16_dot", {mwp::Format::bf16},
    "bf16 weights times x rounded to bf16 with vdpbf16ps: 32 products per instruction, no widening")});
MW_REGISTER_VARIANT(gemv_q_int8_dot_cpu, {dot_variant("int8_dot", {mwp::Format::int8_channel},
    "int8 weights times x rounded to int8 per block of 32 with vpdpbusd; one fp32 scale per block sum")});
MW_REGISTER_VARIANT(gemv_q_int4_g32_sym_dot_cpu, {dot_variant("int4_g32_sym_dot", {mwp::Format::int4, 32, false}, int4_rationale(32, false))});
MW_REGISTER_VARIANT(gemv_q_int4_g64_sym_dot_cpu, {dot_variant("int4_g64_sym_dot", {mwp::Format::int4, 64, false}, int4_rationale(64, false))});
MW_REGISTER_VARIANT(gemv_q_int4_g32_asym_dot_cpu, {dot_variant("int4_g32_asym_dot", {mwp::Format::int4, 32, true}, int4_rationale(32, true))});
MW_REGISTER_VARIANT(gemv_q_int4_g64_asym_dot_cpu, {dot_variant("int4_g64_asym_dot", {mwp::Format::int4, 64, true}, int4_rationale(64, true))});
