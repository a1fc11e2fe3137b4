// Row kernels shared by the softmax rungs (reference/fusion/softmax.cpp,
// optimized/fusion/softmax_online.cpp, softmax_row_fused.cpp), so that the
// rungs differ only in how they schedule the sweeps over memory.
// Generic over the vector type (see simd.hpp); instantiate them inside a
// function with a target attribute.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "optimized/fusion/simd.hpp"

namespace mw::fusion::softmax {

using simd::load;
using simd::splat;

template <class V> MW_SIMD_INLINE float row_max(const float* x, long n) {
    constexpr int W = simd::width<V>;
    const long nv = n - n % W;
    V m = splat<V>(-INFINITY);
    for (long j = 0; j < nv; j += W) m = simd::vmax(m, load<V>(x + j));
    float mm = simd::hmax(m);
    for (long j = nv; j < n; ++j) mm = x[j] > mm ? x[j] : mm;
    return mm;
}

template <class V> MW_SIMD_INLINE float row_sum_exp(const float* x, long n, float m) {
    constexpr int W = simd::width<V>;
    const long nv = n - n % W;
    V s{};
    for (long j = 0; j < nv; j += W) s += simd::exp(load<V>(x + j) - m);
    float t = simd::hsum(s);
    for (long j = nv; j < n; ++j) t += std::exp(x[j] - m);
    return t;
}

// Online max and sum in one read of the row. The running max moves once per
// chunk of 16 vectors (the chunk's max comes from L1), so the sum is
// rescaled once per chunk and exp is evaluated once per element, as in the
// two-sweep rung.
template <class V> MW_SIMD_INLINE void row_online_stats(const float* x, long n, float* m_out, float* s_out) {
    constexpr int W = simd::width<V>, kChunk = 16 * W;
    float m = -INFINITY;
    V s{};
    float tail = 0;
    for (long j0 = 0; j0 < n; j0 += kChunk) {
        const long j1 = j0 + kChunk < n ? j0 + kChunk : n;
        const long jv = j1 - (j1 - j0) % W;
        V cm = splat<V>(-INFINITY);
        for (long j = j0; j < jv; j += W) cm = simd::vmax(cm, load<V>(x + j));
        float c = simd::hmax(cm);
        for (long j = jv; j < j1; ++j) c = x[j] > c ? x[j] : c;
        if (c > m) {  // new maximum: rescale what was summed against the old one
            const float f = std::exp(m - c);
            s *= f;
            tail *= f;
            m = c;
        }
        for (long j = j0; j < jv; j += W) s += simd::exp(load<V>(x + j) - m);
        for (long j = jv; j < j1; ++j) tail += std::exp(x[j] - m);
    }
    *m_out = m;
    *s_out = simd::hsum(s) + tail;
}

// y = exp(x - m) * inv_sum. Full vectors go through `store` (the caller picks
// streaming or plain stores); the tail is scalar.
template <class V> MW_SIMD_INLINE void row_normalize_into(const float* x, float* y, long n, float m, float inv) {
    constexpr int W = simd::width<V>;
    const long nv = n - n % W;
    for (long j = 0; j < nv; j += W) simd::store(y + j, simd::exp(load<V>(x + j) - m) * inv);
    for (long j = nv; j < n; ++j) y[j] = std::exp(x[j] - m) * inv;
}

// As above, but y's full 64-byte lines are written with non-temporal stores
// when y is aligned: the output is not read for ownership and does not push
// x out of the cache. Callers end the sweep with stream_fence().
template <class V> MW_SIMD_INLINE void row_normalize(const float* x, float* y, long n, float m, float inv) {
    constexpr int W = simd::width<V>;
    if (reinterpret_cast<std::uintptr_t>(y) % sizeof(V) != 0) return row_normalize_into<V>(x, y, n, m, inv);
    const long nv = n - n % W;
    for (long j = 0; j < nv; j += W) {
        const V v = simd::exp(load<V>(x + j) - m) * inv;
        simd::stream(y + j, v);
    }
    for (long j = nv; j < n; ++j) y[j] = std::exp(x[j] - m) * inv;
}

inline void stream_fence() { _mm_sfence(); }

}  // namespace mw::fusion::softmax
