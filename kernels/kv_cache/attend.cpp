// Decode attention's chunk step (kernels/kv_cache/attend.hpp).
#include "kernels/kv_cache/attend.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/fusion/simd.hpp"

namespace mw::kv_cache {

namespace simd = mw::fusion::simd;

namespace {

// Row access for the two layouts: the j-th key/value row as floats, and its scale.
struct F32Src {
    const F32Rows& r;
    const float* key(int j) const { return r.k + j * r.stride; }
    const float* val(int j) const { return r.v + j * r.stride; }
    float kscale(int) const { return 1.0f; }
    float vscale(int) const { return 1.0f; }
};
struct I8Src {
    const I8Rows& r;
    const std::int8_t* key(int j) const { return r.k + j * r.stride; }
    const std::int8_t* val(int j) const { return r.v + j * r.stride; }
    float kscale(int j) const { return r.ks[j * r.sstride]; }
    float vscale(int j) const { return r.vs[j * r.sstride]; }
};

// W consecutive values as a vector (int8 widened exactly to float). The
// int8 codes go through int16 and int32 one step at a time: GCC 12 lowers a
// direct int8 -> float __builtin_convertvector to one scalar conversion per
// lane (it made the int8 cache slower to read than the fp32 one), the chain
// to sign extensions and one vcvtdq2ps.
template <class V> MW_SIMD_INLINE V loadv(const float* p) { return simd::load<V>(p); }
template <class V> MW_SIMD_INLINE V loadv(const std::int8_t* p) {
    using I = typename simd::Traits<V>::I;
    if constexpr (simd::width<V> == 16) {
        typedef std::int8_t C __attribute__((vector_size(16)));
        typedef std::int16_t S __attribute__((vector_size(32)));
        C c;
        std::memcpy(&c, p, sizeof c);
        return __builtin_convertvector(__builtin_convertvector(__builtin_convertvector(c, S), I), V);
    } else {
        typedef std::int8_t C __attribute__((vector_size(8)));
        typedef std::int16_t S __attribute__((vector_size(16)));
        C c;
        std::memcpy(&c, p, sizeof c);
        return __builtin_convertvector(__builtin_convertvector(__builtin_convertvector(c, S), I), V);
    }
}

// The chunk step over any row source, W lanes (hd % W == 0).
template <class V, class Src>
MW_SIMD_INLINE void chunk_simd(const float* q, int G, int hd, const Src& src, int n, float* m, float* l, float* acc) {
    constexpr int W = simd::width<V>;
    alignas(64) float s[kAttnChunk], p[kAttnChunk];
    for (int g = 0; g < G; ++g) {
        const float* qg = q + g * hd;
        float mx = -INFINITY;
        for (int j = 0; j < n; ++j) {
            const auto* k = src.key(j);
            V a = simd::splat<V>(0.0f);
            for (int e = 0; e < hd; e += W) a += simd::load<V>(qg + e) * loadv<V>(k + e);
            s[j] = simd::hsum(a) * src.kscale(j);
            mx = std::max(mx, s[j]);
        }
        const float m_new = std::max(m[g], mx);
        const float c = std::exp(m[g] - m_new);  // 0 for the first chunk (m = -inf)
        for (int j = n; j < kAttnChunk; ++j) s[j] = m_new;  // lanes past n: masked below
        for (int j = 0; j < kAttnChunk; j += W)
            simd::store(p + j, simd::exp(simd::load<V>(s + j) - simd::splat<V>(m_new)));
        float* ag = acc + g * hd;
        float lsum = 0;
        for (int j = 0; j < n; ++j) lsum += p[j];
        l[g] = l[g] * c + lsum;
        for (int e = 0; e < hd; e += W) {
            V a = simd::load<V>(ag + e) * c;
            for (int j = 0; j < n; ++j) a += (p[j] * src.vscale(j)) * loadv<V>(src.val(j) + e);
            simd::store(ag + e, a);
        }
        m[g] = m_new;
    }
}

template <class Src>
void chunk_scalar(const float* q, int G, int hd, const Src& src, int n, float* m, float* l, float* acc) {
    float s[kAttnChunk];
    for (int g = 0; g < G; ++g) {
        const float* qg = q + g * hd;
        float mx = -INFINITY;
        for (int j = 0; j < n; ++j) {
            const auto* k = src.key(j);
            float a = 0;
            for (int e = 0; e < hd; ++e) a += qg[e] * float(k[e]);
            s[j] = a * src.kscale(j);
            mx = std::max(mx, s[j]);
        }
        const float m_new = std::max(m[g], mx);
        const float c = std::exp(m[g] - m_new);
        float* ag = acc + g * hd;
        float lsum = 0;
        for (int e = 0; e < hd; ++e) ag[e] *= c;
        for (int j = 0; j < n; ++j) {
            const float pj = std::exp(s[j] - m_new);
            lsum += pj;
            const float w = pj * src.vscale(j);
            const auto* v = src.val(j);
            for (int e = 0; e < hd; ++e) ag[e] += w * float(v[e]);
        }
        l[g] = l[g] * c + lsum;
        m[g] = m_new;
    }
}

template <class Src, class Chunks>
void attend_any(const float* q, int G, int hd, int len, const Chunks& chunk, float* o) {
    if (G < 1 || G > kMaxGroup)
        throw std::invalid_argument("attention group of " + std::to_string(G) + " query heads: valid 1.." +
                                    std::to_string(kMaxGroup));
    if (len < 1) throw std::invalid_argument("attention over " + std::to_string(len) + " positions: need at least 1");
    thread_local std::vector<float> state;
    state.resize(std::size_t(G) * (hd + 2));
    float *m = state.data(), *l = m + G, *acc = l + G;
    std::fill(m, m + G, -INFINITY);
    std::fill(l, l + G, 0.0f);
    std::fill(acc, acc + std::int64_t(G) * hd, 0.0f);
    const bool wide = simd::pick() == simd::Isa::avx512;  // once per call: it reads the environment
    const int path = wide && hd % 16 == 0 ? 16 : hd % 8 == 0 ? 8 : 1;
    for (int c = 0; c * kAttnChunk < len; ++c) {
        const auto rows = chunk(c);
        const Src src{rows};
        const int n = std::min(kAttnChunk, len - c * kAttnChunk);
        if (path == 16) isa::on_avx512<chunk_simd<simd::f16, Src>>(q, G, hd, src, n, m, l, acc);
        else if (path == 8) isa::on_avx2<chunk_simd<simd::f8, Src>>(q, G, hd, src, n, m, l, acc);
        else chunk_scalar(q, G, hd, src, n, m, l, acc);
    }
    for (int g = 0; g < G; ++g)
        for (int e = 0; e < hd; ++e) o[g * hd + e] = acc[g * hd + e] / l[g];
}

}  // namespace

void attend_group(const float* q, int G, int hd, int len, const F32Chunks& chunk, float* o) {
    attend_any<F32Src>(q, G, hd, len, chunk, o);
}
void attend_group(const float* q, int G, int hd, int len, const I8Chunks& chunk, float* o) {
    attend_any<I8Src>(q, G, hd, len, chunk, o);
}

float quantize_row_int8(const float* x, int n, std::int8_t* q) {
    float amax = 0;
    for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float scale = amax > 0 ? amax / 127.0f : 1.0f;
    for (int i = 0; i < n; ++i) q[i] = std::int8_t(std::lrint(std::clamp(x[i] / scale, -127.0f, 127.0f)));
    return scale;
}

}  // namespace mw::kv_cache
