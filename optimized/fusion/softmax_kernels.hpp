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

// Software prefetch, kAhead floats (4 KiB) ahead of the loads. The exp loops
// run ~15 instructions per vector, so the out-of-order window holds only a
// few of their loads and the hardware prefetcher alone leaves DRAM latency
// exposed: measured here, a sum-of-exp sweep streamed at half the speed of
// its in-L1 compute plus a pure read sweep. Prefetching past the end of a
// row touches the next row, which a thread usually reads next.
constexpr long kAhead = 1024;
MW_SIMD_INLINE void ahead(const float* p) { __builtin_prefetch(p + kAhead, 0, 3); }

// The reductions keep two accumulators so consecutive vectors do not wait
// on each other's add (4 cycles of latency each).
template <class V> MW_SIMD_INLINE float row_max(const float* x, long n) {
    constexpr int W = simd::width<V>;
    const long nv = n - n % W, n2 = n - n % (2 * W);
    V m = splat<V>(-INFINITY), m2 = m;
    for (long j = 0; j < n2; j += 2 * W) {
        ahead(x + j);
        m = simd::vmax(m, load<V>(x + j));
        m2 = simd::vmax(m2, load<V>(x + j + W));
    }
    for (long j = n2; j < nv; j += W) m = simd::vmax(m, load<V>(x + j));
    float mm = simd::hmax(simd::vmax(m, m2));
    for (long j = nv; j < n; ++j) mm = x[j] > mm ? x[j] : mm;
    return mm;
}

template <class V> MW_SIMD_INLINE float row_sum_exp(const float* x, long n, float m) {
    constexpr int W = simd::width<V>;
    const long nv = n - n % W, n2 = n - n % (2 * W);
    V s{}, s2{};
    for (long j = 0; j < n2; j += 2 * W) {
        ahead(x + j);
        if constexpr (sizeof(V) == 32) ahead(x + j + W);  // 2 AVX2 vectors = one 64-byte line
        s += simd::exp(load<V>(x + j) - m);
        s2 += simd::exp(load<V>(x + j + W) - m);
    }
    for (long j = n2; j < nv; j += W) s += simd::exp(load<V>(x + j) - m);
    float t = simd::hsum(s + s2);
    for (long j = nv; j < n; ++j) t += std::exp(x[j] - m);
    return t;
}

// Online max and sum in one read of the row. The running max moves once per
// chunk of 64 vectors (4 KiB with AVX-512: the chunk's second read, for the
// exp, comes from L1), so the sum is rescaled once per chunk and exp is
// evaluated once per element, as in the three-sweep rung.
template <class V> MW_SIMD_INLINE void row_online_stats(const float* x, long n, float* m_out, float* s_out) {
    constexpr int W = simd::width<V>, kChunk = 64 * W;
    float m = -INFINITY;
    V s{}, s2{};
    float tail = 0;
    for (long j0 = 0; j0 < n; j0 += kChunk) {
        const long j1 = j0 + kChunk < n ? j0 + kChunk : n;
        const long jv = j1 - (j1 - j0) % W, j2 = j1 - (j1 - j0) % (2 * W);
        V cm = splat<V>(-INFINITY), cm2 = cm;
        for (long j = j0; j < j2; j += 2 * W) {
            cm = simd::vmax(cm, load<V>(x + j));
            cm2 = simd::vmax(cm2, load<V>(x + j + W));
        }
        for (long j = j2; j < jv; j += W) cm = simd::vmax(cm, load<V>(x + j));
        float c = simd::hmax(simd::vmax(cm, cm2));
        for (long j = jv; j < j1; ++j) c = x[j] > c ? x[j] : c;
        if (c > m) {  // new maximum: rescale what was summed against the old one
            const float f = std::exp(m - c);
            s *= f;
            s2 *= f;
            tail *= f;
            m = c;
        }
        for (long j = j0; j < j2; j += 2 * W) {
            ahead(x + j);  // spread over the exp work, for the chunk after next
            if constexpr (sizeof(V) == 32) ahead(x + j + W);
            s += simd::exp(load<V>(x + j) - m);
            s2 += simd::exp(load<V>(x + j + W) - m);
        }
        for (long j = j2; j < jv; j += W) s += simd::exp(load<V>(x + j) - m);
        for (long j = jv; j < j1; ++j) tail += std::exp(x[j] - m);
    }
    *m_out = m;
    *s_out = simd::hsum(s + s2) + tail;
}

// y = exp(x - m) * inv_sum. Full vectors go through `store` (the caller picks
// streaming or plain stores); the tail is scalar.
template <class V> MW_SIMD_INLINE void row_normalize_into(const float* x, float* y, long n, float m, float inv) {
    constexpr int W = simd::width<V>;
    const long nv = n - n % W;
    for (long j = 0; j < nv; j += W) {
        ahead(x + j);
        simd::store(y + j, simd::exp(load<V>(x + j) - m) * inv);
    }
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
        ahead(x + j);
        const V v = simd::exp(load<V>(x + j) - m) * inv;
        simd::stream(y + j, v);
    }
    for (long j = nv; j < n; ++j) y[j] = std::exp(x[j] - m) * inv;
}

inline void stream_fence() { _mm_sfence(); }

}  // namespace mw::fusion::softmax
