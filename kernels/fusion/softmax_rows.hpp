// Row kernels shared by the softmax rungs (reference/fusion/softmax.cpp,
// optimized/fusion/softmax_online.cpp, softmax_row_fused.cpp), so that the
// rungs differ only in how they schedule the sweeps over memory.
// Generic over the vector type (see simd.hpp); instantiate them inside a
// function with a target attribute.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/fusion/simd.hpp"

namespace mw::fusion::softmax {

using simd::load;
using simd::splat;

// Software prefetch, kAhead floats (4 KiB) ahead of the loads. The exp loops
// run ~15 instructions per vector, so the out-of-order window holds only a
// few of their loads and the hardware prefetcher alone leaves DRAM latency
// exposed (compare `memwall run softmax` at a shape that fits L2 with one far
// beyond the L3: without the prefetch the sum sweep's time was about its
// in-cache compute plus a pure read sweep). Prefetching past the end of a
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

// Online max and sum in one read of the row (Milakov & Gimelshein's running
// max with a rescaled sum), with the rescaling done lazily: m is a reference
// point, not necessarily the exact maximum. A vector is compared with
// m + kSlack (one compare and one mask test) and the sum is rescaled only
// when some element exceeds that — then m moves to the true maximum so far.
// Every exp argument stays <= kSlack, so exp(x - m) <= e^20 and the sum
// cannot overflow; the result s * exp(m) is the same sum either way, and the
// normalize sweep uses the same m. For typical rows m moves a handful of
// times, so the loop costs what the three-sweep rung's sum sweep costs — its
// max sweep is simply gone. (Taking each chunk's exact maximum first cost an
// extra L1 pass and a horizontal max per chunk.)
inline constexpr float kSlack = 20.0f;
template <class V> MW_SIMD_INLINE void row_online_stats(const float* x, long n, float* m_out, float* s_out) {
    constexpr int W = simd::width<V>;
    if (n <= 0) {
        *m_out = -INFINITY;
        *s_out = 0;
        return;
    }
    float m = x[0];
    V s{}, s2{};
    float tail = 0;
    V limit = splat<V>(m + kSlack);
    auto move_to = [&](float c) {  // new reference: rescale what was summed against the old one
        const float f = std::exp(m - c);
        s *= f;
        s2 *= f;
        tail *= f;
        m = c;
        limit = splat<V>(m + kSlack);
    };
    const long nv = n - n % W, n2 = n - n % (2 * W);
    for (long j = 0; j < n2; j += 2 * W) {
        ahead(x + j);
        if constexpr (sizeof(V) == 32) ahead(x + j + W);
        const V a = load<V>(x + j), b = load<V>(x + j + W);
        if (simd::any_gt(simd::vmax(a, b), limit)) [[unlikely]]
            move_to(simd::hmax(simd::vmax(a, b)));
        s += simd::exp(a - m);
        s2 += simd::exp(b - m);
    }
    for (long j = n2; j < nv; j += W) {
        const V a = load<V>(x + j);
        if (simd::any_gt(a, limit)) move_to(simd::hmax(a));
        s += simd::exp(a - m);
    }
    for (long j = nv; j < n; ++j) {
        if (x[j] > m + kSlack) move_to(x[j]);
        tail += std::exp(x[j] - m);
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
