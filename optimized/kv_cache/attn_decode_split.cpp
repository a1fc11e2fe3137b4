// attn_decode, KV-cache lever, rung 1: split the cache into blocks, read each
// block once for a whole group of query heads, merge with online softmax
// (flash-decoding's idea on a CPU).
//
// Change from rung 0: the work is cut along the cache, not along the heads.
// A task is (sequence, kv head, block of 256 positions): it loads each K row
// of its block once and dots it with all G = heads / kv_heads queries of the
// group, keeps the block's running max m, sum s and unnormalized output o
// per head, then does the same for V. The tasks' partial results are merged
// per head with the online-softmax rescaling
//     M = max_c m_c,  o = sum_c o_c e^(m_c - M) / sum_c s_c e^(m_c - M).
// Expected: the cache crosses the memory bus once instead of G times, so the
// bytes fall by G (4x at the default GQA shape) and the time with them as
// long as the step stays memory-bound (intensity heads / (2 kv_heads) = 2
// FLOP/B, far under this machine's ~7 FLOP/B ridge); and there are
// b x kv_heads x ctx/256 tasks (2048 at the default shape) to balance
// however few sequences there are — the point of flash-decoding, whose GPU
// version splits the cache to fill the SMs when b x heads is small.
// The dot products and updates are 16-lane (AVX-512) or 8-lane (AVX2) FMAs.
//
// Measured (2-core EPYC, --cold, b 4, ctx 16384, hd 128; results/epyc-kvm-2c/
// kv_cache-attn_decode.md): 2.1x naive for MHA, 3.8x for GQA 32/8, 3.4x for
// MQA — but at 10, 4.2 and 2.7 GB/s of cache, far under the 35 GB/s DRAM
// roof: this rung is still compute-limited. Each score is a dot product
// ending in a horizontal sum, and each V row is added into G output rows
// through memory; scores for 16 rows at a time (a [rows x hd] by [hd x G]
// product in registers) and the V update kept in registers are the next
// rung's work.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/fusion/simd.hpp"
#include "reference/kv_cache/generate.hpp"

namespace mw::kv_cache {
namespace {

namespace simd = mw::fusion::simd;
constexpr long kBlock = 256;  // positions per task
constexpr int kMaxGroup = 64;

struct Task {
    const float *q, *K, *V;  // q: the group's G queries [G][hd]; K, V: the block's first row
    long rows, stride, hd;   // positions in the block; floats between rows (kv_heads * hd)
    int G;
    float scale;
    float* m;  // [G]
    float* s;  // [G]
    float* o;  // [G][hd]
};

template <class V> MW_SIMD_INLINE float dot(const float* a, const float* b, long n) {
    constexpr int W = simd::width<V>;
    const long nv = n - n % W;
    V acc{};
    for (long e = 0; e < nv; e += W) acc += simd::load<V>(a + e) * simd::load<V>(b + e);
    float t = simd::hsum(acc);
    for (long e = nv; e < n; ++e) t += a[e] * b[e];
    return t;
}
template <class V> MW_SIMD_INLINE void axpy(float w, const float* x, float* y, long n) {
    constexpr int W = simd::width<V>;
    const long nv = n - n % W;
    const V wv = simd::splat<V>(w);
    for (long e = 0; e < nv; e += W) simd::store(y + e, simd::load<V>(y + e) + wv * simd::load<V>(x + e));
    for (long e = nv; e < n; ++e) y[e] += w * x[e];
}

template <class V> MW_SIMD_INLINE void block(const Task& t) {
    float sc[kMaxGroup][kBlock];
    // K: each row loaded once, dotted with every query of the group.
    for (long j = 0; j < t.rows; ++j) {
        const float* k = t.K + j * t.stride;
        for (int h = 0; h < t.G; ++h) sc[h][j] = dot<V>(t.q + h * t.hd, k, t.hd) * t.scale;
    }
    for (int h = 0; h < t.G; ++h) {
        float m = -INFINITY, s = 0;
        for (long j = 0; j < t.rows; ++j) m = std::max(m, sc[h][j]);
        for (long j = 0; j < t.rows; ++j) s += (sc[h][j] = std::exp(sc[h][j] - m));
        t.m[h] = m, t.s[h] = s;
        std::fill(t.o + h * t.hd, t.o + (h + 1) * t.hd, 0.0f);
    }
    // V: each row loaded once, added into every head's output.
    for (long j = 0; j < t.rows; ++j) {
        const float* v = t.V + j * t.stride;
        for (int h = 0; h < t.G; ++h) axpy<V>(sc[h][j], v, t.o + h * t.hd, t.hd);
    }
}
MW_TARGET_AVX512 void block512(const Task& t) { block<simd::f16>(t); }
MW_TARGET_AVX2 void block256(const Task& t) { block<simd::f8>(t); }

Instance prepare_split(Problem& p) {
    const long b = p.shape["b"], h = p.shape["heads"], g = p.shape["kv_heads"], ctx = p.shape["ctx"], hd = p.shape["hd"];
    const long G = h / g, blocks = (ctx + kBlock - 1) / kBlock;
    const float *q = p.in("q").as<float>(), *K = p.in("K").as<float>(), *V = p.in("V").as<float>();
    float* o = p.out("o").as<float>();
    // Partial results, task-major: (sequence, kv head, block, head of the
    // group) at ((s g + kv) blocks + c) G + i, so a task writes one run.
    auto part_m = std::make_shared<std::vector<float>>(std::size_t(b * g * blocks * G));
    auto part_s = std::make_shared<std::vector<float>>(part_m->size());
    auto part_o = std::make_shared<std::vector<float>>(part_m->size() * std::size_t(hd));
    const bool wide = simd::pick() == simd::Isa::avx512;
    Instance inst;
    inst.run = [=] {
        const float scale = 1.0f / std::sqrt(float(hd));
#pragma omp parallel for collapse(3) schedule(dynamic, 4)
        for (long s = 0; s < b; ++s)
            for (long kv = 0; kv < g; ++kv)
                for (long c = 0; c < blocks; ++c) {
                    const long at = ((s * g + kv) * blocks + c) * G;
                    const long row0 = (s * ctx + c * kBlock) * g + kv;
                    // Groups wider than kMaxGroup heads (MQA with many heads) in slices.
                    for (long i0 = 0; i0 < G; i0 += kMaxGroup) {
                        const Task t{q + (s * h + kv * G + i0) * hd, K + row0 * hd, V + row0 * hd,
                                     std::min(kBlock, ctx - c * kBlock), g * hd, hd, int(std::min<long>(kMaxGroup, G - i0)),
                                     scale, part_m->data() + at + i0, part_s->data() + at + i0,
                                     part_o->data() + (at + i0) * hd};
                        wide ? block512(t) : block256(t);
                    }
                }
        // Merge the blocks of each (sequence, head), in block order.
#pragma omp parallel for schedule(static)
        for (long sh = 0; sh < b * h; ++sh) {
            const long s = sh / h, hh = sh % h, kv = hh / G, i = hh % G;
            auto idx = [&](long c) { return ((s * g + kv) * blocks + c) * G + i; };
            float M = -INFINITY;
            for (long c = 0; c < blocks; ++c) M = std::max(M, (*part_m)[std::size_t(idx(c))]);
            float S = 0;
            float* out = o + sh * hd;
            std::fill(out, out + hd, 0.0f);
            for (long c = 0; c < blocks; ++c) {
                const float w = std::exp((*part_m)[std::size_t(idx(c))] - M);
                S += (*part_s)[std::size_t(idx(c))] * w;
                const float* oc = part_o->data() + idx(c) * hd;
                for (long e = 0; e < hd; ++e) out[e] += w * oc[e];
            }
            for (long e = 0; e < hd; ++e) out[e] /= S;
        }
    };
    return inst;
}

}  // namespace
}  // namespace mw::kv_cache

MW_REGISTER_VARIANT(attn_decode_split_cpu, {
    .name = "split", .op = "attn_decode", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "cache cut into 256-position blocks, each read once for the whole query group, "
                 "partial softmaxes merged: G times fewer bytes, and tasks to spare at batch 1",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::kv_cache::attn_decode_cache_bytes(s); },
    .prepare = mw::kv_cache::prepare_split });
