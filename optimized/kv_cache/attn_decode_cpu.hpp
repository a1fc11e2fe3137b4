// The CPU kernel of attn_decode's rungs 1-3 (optimized/kv_cache/
// attn_decode_split.cpp, _int8.cpp, _sliding.cpp): one template over the
// cache's row format, as gemv_q_cpu.hpp is for the precision lever, so that
// the rungs differ by what they change — the bytes of a row, the rows kept —
// and not by a second copy of the loop.
//
// The work of one call (the split rung's header says why it is cut so):
//   tasks      (sequence s, block c of kBlock positions, every kv head); each
//              thread takes a contiguous run of them, in order;
//   per task   for each kv head: (1) scores of the block's rows against the
//              group's G queries, (2) the block's softmax (its own max m and
//              sum l per head), (3) the G unnormalized outputs sum_j p_j V_j;
//              m, l, o land in the task's partial results;
//   merge      per (sequence, head), the blocks' partials rescaled to one max:
//              o = sum_c o_c e^(m_c - M) / sum_c l_c e^(m_c - M).
//
// (1) is a [rows x hd] by [hd x G] product: W accumulators (one per
// (row, head) pair of a tile of RB rows x GB heads, RB GB = W), each a vector
// of partial sums along hd, folded into one vector of W scores at the end of
// the tile (reduce_lanes: log2 W levels of two shuffles and an add) — not a
// horizontal sum per score. (3) keeps GB heads x EC vectors of the output in
// registers across all the block's rows: each V row chunk is loaded once per
// head group and feeds GB x EC FMAs, and o is stored once per block.
//
// The cache is row-major [b][ctx][kv_heads][hd]: a kv head's rows are
// kv_heads x hd apart, so for MHA and GQA each row of one head sits on its
// own 4 KiB page, where the hardware's stream prefetchers do not follow. The
// kernel prefetches in software, one phase ahead, into L2: while scoring a kv
// head's rows it prefetches the same rows of V; while summing V, the next kv
// head's rows of K (the adjacent bytes of the same pages) or, after the last
// kv head, the thread's next task's. The memory system always has a whole
// phase of requests (a block's rows of one head, 128 KiB at hd 128) to work on.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "harness/registry.hpp"
#include "kernels/fusion/simd.hpp"

namespace mw::kv_cache::cpu {

namespace simd = mw::fusion::simd;

inline constexpr long kBlock = 256;  // positions per task

// A cache as the kernel reads it: K and V rows [b][ctx][kv_heads][hd] of
// float or int8; for int8, one fp32 scale per row (per sequence, position and
// kv head, [b][ctx][kv_heads]) for K and one for V: x = scale * q.
template <class T> struct Cache {
    const T *K = nullptr, *V = nullptr;
    const float *k_scale = nullptr, *v_scale = nullptr;
    long b = 0, ctx = 0, kv_heads = 0, hd = 0;
};

// Scratch of one call, sized in prepare() so that the timed calls do not
// allocate: the tasks' partial results, and per thread the block's
// probabilities [G][kPStride] and the int8 rows' scales.
struct Workspace {
    long blocks = 0, heads = 0, hd = 0, G = 0;
    int threads = 1;
    std::vector<float> m, l, o;  // [b][blocks][heads], [b][blocks][heads], [b][blocks][heads][hd]
    std::vector<float> p;        // [threads][G + 2][kPStride]
    Workspace(long b, long heads, long kv_heads, long ctx, long hd)
        : blocks((ctx + kBlock - 1) / kBlock), heads(heads), hd(hd), G(heads / kv_heads),
          threads(omp_get_max_threads()), m(std::size_t(b * blocks * heads)), l(m.size()),
          o(m.size() * std::size_t(hd)), p(std::size_t(threads * (G + 2) * kPStride)) {}
    static constexpr long kPStride = kBlock + 16;  // room for a tile's rows past the block's end
};

// The two row formats. load<V>(p): W consecutive elements as fp32.
struct F32Format {
    using T = float;
    static constexpr bool scaled = false;
    template <class V> static MW_SIMD_INLINE V load(const float* p) { return simd::load<V>(p); }
};
struct I8Format {
    using T = std::int8_t;
    static constexpr bool scaled = true;
    template <class V> static MW_SIMD_INLINE V load(const std::int8_t* p) {
        // W bytes sign-extended to W ints (one vpmovsxbd; GCC scalarizes a
        // generic char-to-int vector conversion), then converted (vcvtdq2ps).
        typedef char B16 __attribute__((vector_size(16)));
        typedef long long Q2 __attribute__((vector_size(16)));
        using I = typename simd::Traits<V>::I;
        I i;
        if constexpr (simd::width<V> == 16) {
            B16 x;
            std::memcpy(&x, p, sizeof x);
            i = __builtin_ia32_pmovsxbd512_mask(x, I{}, 0xFFFF);
        } else {
            long long lo;  // 8 bytes (vmovq): a 16-byte load could run past the cache's end
            std::memcpy(&lo, p, sizeof lo);
            i = __builtin_ia32_pmovsxbd256(B16(Q2{lo, 0}));
        }
        return __builtin_convertvector(i, V);
    }
};

namespace detail {
// Into L2 (prefetcht1): a phase ahead is a whole block's rows of one kv
// head, 128 KiB at hd 128 — four times the L1.
MW_SIMD_INLINE void prefetch_l2(const char* p) { __builtin_prefetch(p, 0, 2); }

// One fold level: a and b each hold 2h-lane segments; lane L of the result
// is the sum of the two h-lane halves of a's segment (first half of the
// result's segment) or of b's (second half).
template <int h, class V, int... L> MW_SIMD_INLINE V fold(V a, V b, std::integer_sequence<int, L...>) {
    constexpr int W = simd::width<V>;
    return __builtin_shufflevector(a, b, (L % (2 * h) < h ? L : W + L - h)...) +
           __builtin_shufflevector(a, b, (L % (2 * h) < h ? L + h : W + L)...);
}
template <int N, class V> MW_SIMD_INLINE void fold_level(V* x) {
    constexpr int h = N / 2;
#pragma GCC unroll 16
    for (int k = 0; k < h; ++k) x[k] = fold<h>(x[k], x[k + h], std::make_integer_sequence<int, simd::width<V>>{});
    if constexpr (h > 1) fold_level<h, V>(x);
}

// W vectors in, one out: lane k = the sum of x[k]'s lanes (x is clobbered).
template <class V> MW_SIMD_INLINE V reduce_lanes(V* x) {
    fold_level<simd::width<V>, V>(x);
    return x[0];
}

// Raw scores q_i . K_j of RB rows (rows[r]) and GB heads (q + i hd), into
// P[i][j0 + r]. Lanes of the folded vector: i RB + r.
template <class V, class R, int RB, int GB>
MW_SIMD_INLINE void score_tile(const typename R::T* const* rows, const float* q, long hd, float* P, long j0) {
    constexpr int W = simd::width<V>;
    static_assert(RB * GB == W);
    const long hdv = hd - hd % W;
    V acc[W] = {};
    for (long e = 0; e < hdv; e += W) {
        V qv[GB];  // registers: W accumulators, GB queries, one row
#pragma GCC unroll 4
        for (int i = 0; i < GB; ++i) qv[i] = simd::load<V>(q + i * hd + e);
#pragma GCC unroll 16
        for (int r = 0; r < RB; ++r) {
            const V k = R::template load<V>(rows[r] + e);
#pragma GCC unroll 4
            for (int i = 0; i < GB; ++i) acc[i * RB + r] += k * qv[i];
        }
    }
    float s[W];
    const V sum = reduce_lanes<V>(acc);
    std::memcpy(s, &sum, sizeof s);
    for (long e = hdv; e < hd; ++e)  // hd not a multiple of W (odd test shapes)
        for (int i = 0; i < GB; ++i)
            for (int r = 0; r < RB; ++r) s[i * RB + r] += q[i * hd + e] * float(rows[r][e]);
    for (int i = 0; i < GB; ++i) std::memcpy(P + i * Workspace::kPStride + j0, s + i * RB, RB * sizeof(float));
}

// All n rows of one kv head against GB heads, RB rows at a time; while at
// it, prefetches the rows' V (pf: that kv head's first V row, or null).
template <class V, class R, int GB>
MW_SIMD_INLINE void score_rows(const typename R::T* K, const char* pf, long n, long ld, const float* q, long hd,
                               float* P) {
    constexpr int RB = simd::width<V> / GB;
    const long row_bytes = hd * long(sizeof(typename R::T));
    for (long j0 = 0; j0 < n; j0 += RB) {
        const typename R::T* rows[RB];
        for (int r = 0; r < RB; ++r) rows[r] = K + std::min(j0 + r, n - 1) * ld;  // past the end: repeat the last row
        if (pf)
            for (long r = j0; r < std::min(j0 + RB, n); ++r)
                for (long off = 0; off < row_bytes; off += 64)
                    prefetch_l2(pf + r * ld * long(sizeof(typename R::T)) + off);
        score_tile<V, R, RB, GB>(rows, q, hd, P, j0);
    }
}

// o[i][e0 + c W ...] = sum_j P[i][j] V_j[e0 + c W ...] for GB heads and EC
// vectors of hd, accumulated in registers over all n rows, stored once.
template <class V, class R, int GB, int EC>
MW_SIMD_INLINE void v_chunk(const typename R::T* Vr, long n, long ld, const float* P, float* o, long hd, long e0,
                            const char* pf, long pf_bytes) {
    constexpr int W = simd::width<V>;
    V acc[GB][EC] = {};
    for (long j = 0; j < n; ++j) {
        const typename R::T* v = Vr + j * ld + e0;
        if (pf)
            for (long off = 0; off < pf_bytes; off += 64) prefetch_l2(pf + j * ld * long(sizeof(typename R::T)) + off);
        V x[EC];
#pragma GCC unroll 8
        for (int c = 0; c < EC; ++c) x[c] = R::template load<V>(v + c * W);
#pragma GCC unroll 4
        for (int i = 0; i < GB; ++i) {
            const V p = simd::splat<V>(P[i * Workspace::kPStride + j]);
#pragma GCC unroll 8
            for (int c = 0; c < EC; ++c) acc[i][c] += p * x[c];
        }
    }
    for (int i = 0; i < GB; ++i)
        for (int c = 0; c < EC; ++c) simd::store(o + i * hd + e0 + c * W, acc[i][c]);
}

// Columns [e0, hd) in chunks of EC vectors, then EC/2, ..., 1, then the
// scalar tail; the prefetch rides on the first chunk only.
template <class V, class R, int GB, int EC>
MW_SIMD_INLINE void v_rows(const typename R::T* Vr, long n, long ld, const float* P, float* o, long hd, long e0,
                           const char* pf) {
    constexpr int W = simd::width<V>;
    const long pf_bytes = hd * long(sizeof(typename R::T));
    for (; e0 + EC * W <= hd; e0 += EC * W, pf = nullptr) v_chunk<V, R, GB, EC>(Vr, n, ld, P, o, hd, e0, pf, pf_bytes);
    if constexpr (EC > 1) {
        v_rows<V, R, GB, EC / 2>(Vr, n, ld, P, o, hd, e0, pf);
    } else {
        for (int i = 0; i < GB; ++i)
            for (long e = e0; e < hd; ++e) {
                float t = 0;
                for (long j = 0; j < n; ++j) t += P[i * Workspace::kPStride + j] * float(Vr[j * ld + e]);
                o[i * hd + e] = t;
            }
    }
}

// Softmax of one head's n raw scores in place: x_j = raw_j c_j (c_j = scale,
// times K's row scale for int8), p_j = e^(x_j - m); returns m and l = sum p_j,
// then leaves p_j (times V's row scale for int8) for the V sums.
template <class V, class R>
MW_SIMD_INLINE void softmax_block(float* P, long n, float scale, const float* ks, const float* vs, float& m_out,
                                  float& l_out) {
    constexpr int W = simd::width<V>;
    const long nv = n - n % W;
    V mv = simd::splat<V>(-INFINITY);
    for (long j = 0; j < nv; j += W) {
        V x = simd::load<V>(P + j) * scale;
        if constexpr (R::scaled) x *= simd::load<V>(ks + j);
        simd::store(P + j, x);
        mv = simd::vmax(mv, x);
    }
    float m = simd::hmax(mv);
    for (long j = nv; j < n; ++j) {
        P[j] *= R::scaled ? scale * ks[j] : scale;
        m = std::max(m, P[j]);
    }
    V lv{};
    for (long j = 0; j < nv; j += W) {
        const V p = simd::exp(simd::load<V>(P + j) - m);
        lv += p;
        simd::store(P + j, R::scaled ? p * simd::load<V>(vs + j) : p);
    }
    float l = simd::hsum(lv);
    for (long j = nv; j < n; ++j) {
        const float p = std::exp(P[j] - m);
        l += p;
        P[j] = R::scaled ? p * vs[j] : p;
    }
    m_out = m, l_out = l;
}

// The largest power of two dividing G, at most 4: heads per register tile.
inline int head_tile(long G) { return G % 4 == 0 ? 4 : G % 2 == 0 ? 2 : 1; }

// One task: block c of sequence s, every kv head.
template <class V, class R>
MW_SIMD_INLINE void task(const Cache<typename R::T>& kv, const float* q, long heads, long s, long c, long next,
                         Workspace& ws, float* scratch) {
    using T = typename R::T;
    constexpr int W = simd::width<V>;
    const long g = kv.kv_heads, hd = kv.hd, G = heads / g, ld = g * hd;
    const long j0 = c * kBlock, n = std::min(kBlock, kv.ctx - j0);
    const float scale = 1.0f / std::sqrt(float(hd));
    float* ks = scratch + G * Workspace::kPStride;  // int8: the block's row scales for this kv head
    float* vs = ks + Workspace::kPStride;
    const int gb = head_tile(G);
    for (long h = 0; h < g; ++h) {
        const T* K = kv.K + ((s * kv.ctx + j0) * g + h) * hd;
        const T* Vr = kv.V + ((s * kv.ctx + j0) * g + h) * hd;
        const float* qg = q + (s * heads + h * G) * hd;
        const long at = (s * ws.blocks + c) * heads + h * G;  // partials of the group's first head
        if constexpr (R::scaled)
            for (long j = 0; j < n; ++j) {
                ks[j] = kv.k_scale[(s * kv.ctx + j0 + j) * g + h];
                vs[j] = kv.v_scale[(s * kv.ctx + j0 + j) * g + h];
            }
        const char* pf_v = reinterpret_cast<const char*>(Vr);
        for (long i0 = 0; i0 < G; i0 += gb, pf_v = nullptr) {
            float* P = scratch + i0 * Workspace::kPStride;
            if (gb == 4) score_rows<V, R, 4>(K, pf_v, n, ld, qg + i0 * hd, hd, P);
            else if (gb == 2) score_rows<V, R, 2>(K, pf_v, n, ld, qg + i0 * hd, hd, P);
            else score_rows<V, R, 1>(K, pf_v, n, ld, qg + i0 * hd, hd, P);
        }
        for (long i = 0; i < G; ++i)
            softmax_block<V, R>(scratch + i * Workspace::kPStride, n, scale, ks, vs, ws.m[std::size_t(at + i)],
                                ws.l[std::size_t(at + i)]);
        // The next kv head's rows, or after the last one the next task's first kv head.
        const char* pf_k = h + 1 < g    ? reinterpret_cast<const char*>(K + hd)
                           : next >= 0 ? reinterpret_cast<const char*>(kv.K + (next / ws.blocks * kv.ctx + next % ws.blocks * kBlock) * ld)
                                       : nullptr;
        for (long i0 = 0; i0 < G; i0 += gb, pf_k = nullptr) {
            const float* P = scratch + i0 * Workspace::kPStride;
            float* o = ws.o.data() + (at + i0) * hd;
            constexpr int kAcc = W == 16 ? 16 : 8;  // output vectors in registers
            if (gb == 4) v_rows<V, R, 4, kAcc / 4>(Vr, n, ld, P, o, hd, 0, pf_k);
            else if (gb == 2) v_rows<V, R, 2, std::min(8, kAcc / 2)>(Vr, n, ld, P, o, hd, 0, pf_k);
            else v_rows<V, R, 1, 8>(Vr, n, ld, P, o, hd, 0, pf_k);
        }
    }
}

}  // namespace detail

// The blocks' partial results merged per (sequence, head) into o [b][heads][hd].
inline void merge(const Workspace& ws, long b, float* o) {
    const long blocks = ws.blocks, heads = ws.heads, hd = ws.hd;
#pragma omp parallel for schedule(static)
    for (long sh = 0; sh < b * heads; ++sh) {
        const long s = sh / heads, h = sh % heads;
        auto at = [&](long c) { return std::size_t((s * blocks + c) * heads + h); };
        float M = -INFINITY;
        for (long c = 0; c < blocks; ++c) M = std::max(M, ws.m[at(c)]);
        float L = 0;
        float* out = o + sh * hd;
        std::fill(out, out + hd, 0.0f);
        for (long c = 0; c < blocks; ++c) {
            const float w = std::exp(ws.m[at(c)] - M);
            L += ws.l[at(c)] * w;
            const float* oc = ws.o.data() + at(c) * hd;
            for (long e = 0; e < hd; ++e) out[e] += w * oc[e];
        }
        for (long e = 0; e < hd; ++e) out[e] /= L;
    }
}

// One task's work as compiled for one ISA: detail::task<V, R> inside its
// MW_TARGET wrapper, isa::pick_kernel's choice (OpenMP outlines the parallel
// loop below into a function of its own, without the wrapper's target, so
// the SIMD code must sit behind a call).
template <class T>
using TaskFn = void (*)(const Cache<T>& kv, const float* q, long heads, long s, long c, long next, Workspace& ws,
                        float* scratch);

// One decode step's attention over `kv` for q [b][heads][hd] into o [b][heads][hd].
template <class T> void decode(TaskFn<T> task, const Cache<T>& kv, const float* q, long heads, float* o, Workspace& ws) {
    const long b = kv.b, blocks = ws.blocks;
#pragma omp parallel num_threads(std::min(ws.threads, omp_get_max_threads()))  // scratch for ws.threads
    {
        // Each thread a contiguous run of tasks (s, c) in order, so that it
        // knows its next task and can prefetch it.
        const long total = b * blocks, nt = omp_get_num_threads(), t = omp_get_thread_num();
        const long first = total * t / nt, last = total * (t + 1) / nt;
        float* scratch = ws.p.data() + std::size_t(t * (ws.G + 2) * Workspace::kPStride);
        for (long k = first; k < last; ++k) task(kv, q, heads, k / blocks, k % blocks, k + 1 < last ? k + 1 : -1, ws, scratch);
    }
    merge(ws, b, o);
}

// The rungs' kernels as functions, AVX-512 or AVX2 chosen per call
// (MEMWALL_ISA=avx2 forces the fallback).
void decode_f32(const Cache<float>& kv, const float* q, long heads, float* o, Workspace& ws);       // attn_decode_split.cpp
void decode_i8(const Cache<std::int8_t>& kv, const float* q, long heads, float* o, Workspace& ws);  // attn_decode_int8.cpp

// The path name recorded in results (Instance::path).
inline std::string path_name() { return simd::pick() == simd::Isa::avx512 ? "avx512" : "avx2"; }

// The harness's Instance of rungs 1-3: one decode over `kv` per call, the
// problem's q into its o. `keep` owns whatever kv points into when it is not
// the problem's own K and V (the int8 rows, the ring).
template <class T> Instance decode_instance(Problem& p, const Cache<T>& kv, std::shared_ptr<const void> keep = {}) {
    const long heads = p.shape["heads"];
    const float* q = p.in("q").as<float>();
    float* o = p.out("o").as<float>();
    auto ws = std::make_shared<Workspace>(kv.b, heads, kv.kv_heads, kv.ctx, kv.hd);
    Instance inst;
    inst.run = [=, keep = std::move(keep)] {
        if constexpr (std::is_same_v<T, float>) decode_f32(kv, q, heads, o, *ws);
        else decode_i8(kv, q, heads, o, *ws);
    };
    inst.path = path_name();
    return inst;
}

}  // namespace mw::kv_cache::cpu
