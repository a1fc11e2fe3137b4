// attention, fusion lever, rung 1 (CPU): FlashAttention-style tiles.
//
// Change from rung 0: no s x s buffer. Each task is one (batch, head, block
// of Br = 64 queries). It walks the keys in tiles of Bc = 64 and keeps, per
// query, the running max m, the running sum l and an unnormalized output row
// in a Br x d accumulator (the online softmax of softmax_online.cpp, applied
// tile by tile); O is divided by l once at the end.
//   - The block's queries are packed once, transposed and pre-scaled by
//     1/sqrt(d) (Qt: d x 64 in rows of 80 floats, 40 KiB at d = 128). Scores are computed
//     transposed, St = K_tile Qt (64 keys x 64 queries), by a SIMD
//     register-tile micro-kernel (6 keys x 64 queries per step, 24 zmm
//     accumulators), reading K rows straight from the input.
//   - St's columns are queries, so the softmax statistics are vectors over
//     16 queries at a time: no horizontal reductions. A row of St is four
//     such vectors (eight of 8 on AVX2, taken four at a time),
//     exponentiated together: four independent chains.
//   - O_acc = alpha O_acc + P V by the same micro-kernel with P read
//     column-wise from St; the correction alpha is applied as the
//     accumulators are loaded, not in a pass of its own.
//   - St and O_acc are laid out in panels of 64 columns, so every row stride
//     in the micro-kernel is a constant.
//   - At long s, K and V come from L3 or DRAM: while one tile is computed,
//     the next tile's K and V are prefetched into L2, one line per step of
//     the micro-kernel. With it and the changes above, the recorded causal
//     GQA run at s = 16384 (h = 32, hk = 8, d = 128, 2 threads) went from 269
//     to 301 GFLOP/s on the 2-core Xeon of results/xeon-260m-kvm-2c
//     (attention-gqa-causal-16k.*).
//   - Later, on the Zen 3 EPYC of results/epyc-zen3-kvm-2c: Qt's and St's
//     rows 80 floats apart (64 and a line), so a walk down a column spreads
//     over L1's sets; a tile's 64 rows as 9 micro-kernel calls of 6 and 2 of
//     5 (ten accumulators on AVX2) rather than 10 of 6 and a 4-row tail; and
//     once a query's running max has settled (its correction exactly 1), its
//     O_acc rows load unscaled. Paired against the kernel before them, the
//     gain was within that host's run-to-run noise (~3%).
// Working set per thread: Qt, St (20 KiB), O_acc (32 KiB), the K/V tiles
// streamed through (32 KiB each) and the next two being prefetched (64 KiB)
// — L2-resident; peak extra memory is Qt, St, O_acc and a padded V tile
// (when d is not a multiple of 64), per thread (~100 KiB at d = 128),
// instead of 2 s^2 floats (128 MiB at s = 4096).
// Bytes: Q and O once; K and V once per query block (s/64 times per head,
// from L2/L3 as much as from DRAM), no s^2 term. FLOPs as rung 0; with the
// causal mask the tiles above the diagonal are skipped, so half the work.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "kernels/fusion/simd.hpp"
#include "reference/fusion/attention.hpp"

namespace mw::fusion {
namespace {

constexpr long kBr = 64, kBc = 64;  // queries per block, keys per tile
// St and O_acc are stored in panels of 64 columns, each panel 64 rows of LDC
// floats: C(i, c) = C[(c / 64) * 64 * LDC + i * LDC + c % 64], with LDC = 64
// for O_acc and kLd for St (one panel). The row stride is then a constant, so
// the micro-kernel's row addresses are immediates.
constexpr long kP = 64;
static_assert(kBr == kP && kBc == kP);
// Row stride of Qt and St: 64 floats and a line (320 B, five lines). At 256 B
// a column walk of 64 or 128 rows falls in 16 of L1's 64 sets and the
// K rows streamed beside it evict it.
constexpr long kLd = 80;

// C[MR][NV*W] = C0 + A[MR][K] B[K][NV*W], C0 = 0 (scale null) or C scaled by
// row (scale[i]: the online softmax's correction, folded into the load of
// the accumulators instead of a pass over O_acc of its own). A(i, p) =
// A[i*ars + p*acs] is broadcast, B's rows are loaded as NV vectors; the
// MR x NV accumulators stay in registers for the whole K loop. The first
// pf_lines iterations each prefetch one line of pf into L2.
template <class V, int MR, int NV, long LDC>
MW_SIMD_INLINE void micro(long K, const float* A, long ars, long acs, const float* B, long ldb, float* C,
                          const float* scale, const char* pf, long pf_lines) {
    constexpr int W = simd::width<V>;
    V c[MR][NV];
    // Once a row's running max has settled, its correction is exactly 1 from
    // tile to tile: the rows are then loaded without the multiply (MR x NV
    // multiplies on the FMA ports per call, ~1.5% of PV's FMAs at K = 64).
    bool unit = scale != nullptr;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) unit = unit && scale[i] == 1.0f;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
        const V s = scale ? simd::splat<V>(scale[i]) : V{};
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v)
            c[i][v] = !scale ? V{} : unit ? simd::load<V>(C + i * LDC + v * W) : simd::load<V>(C + i * LDC + v * W) * s;
    }
#pragma GCC unroll 2
    for (long p = 0; p < K; ++p) {
        if (p < pf_lines) __builtin_prefetch(pf + p * 64, 0, 2);
        V b[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) b[v] = simd::load<V>(B + p * ldb + v * W);
#pragma GCC unroll 8
        for (int i = 0; i < MR; ++i) {
            const V a = simd::splat<V>(A[i * ars + p * acs]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) c[i][v] += a * b[v];
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) simd::store(C + i * LDC + v * W, c[i][v]);
}

// C[rows][ncols] = C0 + A[rows][K] B[K][ncols] (C in panels, C0 as for
// micro); ncols a multiple of NV*W. Prefetches pf_bytes of pf into L2 along
// the way, one line per K step.
template <class V, int MR, int NV, long LDC>
MW_SIMD_INLINE void tile_gemm(long rows, long ncols, long K, const float* A, long ars, long acs, const float* B,
                              long ldb, float* C, const float* scale, const char* pf, long pf_bytes) {
    constexpr int W = simd::width<V>;
    long pf_left = pf ? pf_bytes / 64 : 0;
    auto row_scale = [&](long i) { return scale ? scale + i : nullptr; };
    auto next_pf = [&] {  // this call's share of the lines to prefetch
        const long n = std::min(K, pf_left);
        const char* at = n > 0 ? pf : nullptr;
        if (n > 0) pf += n * 64, pf_left -= n;
        return std::pair{at, n};
    };
    for (long c0 = 0; c0 < ncols; c0 += NV * W) {
        float* Cc = C + c0 / kP * kP * LDC + c0 % kP;
        // Rows in calls of MR and, for the rest, of MR - 1 where they fit
        // (64 = 9 x 6 + 2 x 5, ten accumulators per 5-row call on AVX2)
        // rather than a 4-row tail of eight. perf put ~9% of the time in
        // the tails for ~6% of the FLOPs; the split did not change the
        // measured total beyond this host's noise.
        const long short_calls = (MR - rows % MR) % MR;
        const bool split = rows >= short_calls * (MR - 1);
        const long full_end = split ? rows - short_calls * (MR - 1) : rows / MR * MR;
        long i = 0;
        for (; i < full_end; i += MR) {
            const auto [at, n] = next_pf();
            micro<V, MR, NV, LDC>(K, A + i * ars, ars, acs, B + c0, ldb, Cc + i * LDC, row_scale(i), at, n);
        }
        for (; split && i < rows; i += MR - 1) {
            const auto [at, n] = next_pf();
            micro<V, MR - 1, NV, LDC>(K, A + i * ars, ars, acs, B + c0, ldb, Cc + i * LDC, row_scale(i), at, n);
        }
        // The rows left (when no split into MR and MR - 1 fits) by the widest
        // kernel that fits: one row at a time would load NV vectors of B for NV FMAs.
        if (i + 4 <= rows) {
            micro<V, 4, NV, LDC>(K, A + i * ars, ars, acs, B + c0, ldb, Cc + i * LDC, row_scale(i), nullptr, 0);
            i += 4;
        }
        if (i + 2 <= rows) {
            micro<V, 2, NV, LDC>(K, A + i * ars, ars, acs, B + c0, ldb, Cc + i * LDC, row_scale(i), nullptr, 0);
            i += 2;
        }
        for (; i < rows; ++i)
            micro<V, 1, NV, LDC>(K, A + i * ars, ars, acs, B + c0, ldb, Cc + i * LDC, row_scale(i), nullptr, 0);
    }
}

struct Work {
    AttnShape a;
    long Dp;  // d rounded up to 64: O_acc's panels
    const float *Q, *K, *V;
    float* O;
};

// Floats of per-thread workspace: Qt, St, O_acc, a padded V tile, m, l, alpha.
long workspace_floats(long D, long Dp) { return D * kLd + kBc * kLd + kBr * Dp + kBc * Dp + 3 * kBr; }

template <class V>
MW_SIMD_INLINE void attend_block(const Work& w, long bh, long q0, float* ws) {
    constexpr int W = simd::width<V>;
    constexpr int MR = 6, NV = W == 16 ? 4 : 2;  // 24 zmm or 12 ymm accumulators
    const AttnShape& a = w.a;
    const long D = a.D, Dp = w.Dp, S = a.S;
    const long b = bh / a.H, h = bh % a.H, kh = h / (a.H / a.Hk);
    const float* q = w.Q + (bh * S + q0) * D;
    const float* k = w.K + (b * a.Hk + kh) * S * D;
    const float* v = w.V + (b * a.Hk + kh) * S * D;
    float* o = w.O + (bh * S + q0) * D;
    const long rows = std::min(kBr, S - q0);
    float* Qt = ws;
    float* St = Qt + D * kLd;
    float* Oacc = St + kBc * kLd;
    float* Vp = Oacc + kBr * Dp;
    float* m = Vp + kBc * Dp;
    float* l = m + kBr;
    float* alpha = l + kBr;

    for (long p = 0; p < D; ++p)
        for (long i = 0; i < kBr; ++i) Qt[p * kLd + i] = i < rows ? q[i * D + p] * a.scale : 0.0f;
    std::fill(Oacc, Oacc + kBr * Dp, 0.0f);
    std::fill(m, m + kBr, -INFINITY);
    std::fill(l, l + kBr, 0.0f);
    if (D != Dp) std::fill(Vp, Vp + kBc * Dp, 0.0f);

    const long kv_end = a.causal ? q0 + rows : S;  // keys past the block's last query are masked
    for (long k0 = 0; k0 < kv_end; k0 += kBc) {
        const long cols = std::min(kBc, kv_end - k0);
        // While this tile is computed, the next tile's K (during QK^T) and V
        // (during PV) come into L2: at long s they stream from L3 or DRAM, and
        // the hardware prefetchers do not run far enough ahead of six rows
        // read a float at a time.
        const long next = std::max(0L, std::min(kBc, kv_end - k0 - kBc));
        const char* k_next = next ? reinterpret_cast<const char*>(k + (k0 + kBc) * D) : nullptr;
        const char* v_next = next ? reinterpret_cast<const char*>(v + (k0 + kBc) * D) : nullptr;
        tile_gemm<V, MR, NV, kLd>(cols, kBr, D, k + k0 * D, D, 1, Qt, kLd, St, nullptr, k_next, next * D * 4);
        if (a.causal && k0 + cols > q0)
            for (long j = 0; j < cols; ++j)
                for (long i = 0; i < kBr; ++i)
                    if (k0 + j > q0 + i) St[j * kLd + i] = -INFINITY;

        // Online softmax down the columns of St. G vectors of a row of St
        // are walked together: G independent max, exp and sum chains (one
        // vector at a time would wait on its own chain's latency).
        constexpr int G = 4;
        static_assert(kBr % (G * W) == 0);
        const V ninf = simd::splat<V>(-INFINITY), zero{}, one = simd::splat<V>(1.0f);
        for (long i0 = 0; i0 < kBr; i0 += G * W) {
            V mo[G], mn[G], ls[G];
#pragma GCC unroll 4
            for (int g = 0; g < G; ++g) mo[g] = mn[g] = simd::load<V>(m + i0 + g * W);
            for (long j = 0; j < cols; ++j)
#pragma GCC unroll 4
                for (int g = 0; g < G; ++g) mn[g] = simd::vmax(mn[g], simd::load<V>(St + j * kLd + i0 + g * W));
#pragma GCC unroll 4
            for (int g = 0; g < G; ++g) {
                const V al = mn[g] == ninf ? one : simd::exp(mo[g] - mn[g]);
                ls[g] = simd::load<V>(l + i0 + g * W) * al;
                simd::store(m + i0 + g * W, mn[g]);
                simd::store(alpha + i0 + g * W, al);
            }
            for (long j = 0; j < cols; ++j) {
                V s[G], pr[G];
#pragma GCC unroll 4
                for (int g = 0; g < G; ++g) {
                    s[g] = simd::load<V>(St + j * kLd + i0 + g * W);
                    pr[g] = s[g] - mn[g];
                }
                simd::exp_n<G>(pr);
#pragma GCC unroll 4
                for (int g = 0; g < G; ++g) {
                    pr[g] = s[g] == ninf ? zero : pr[g];
                    simd::store(St + j * kLd + i0 + g * W, pr[g]);
                    ls[g] += pr[g];
                }
            }
#pragma GCC unroll 4
            for (int g = 0; g < G; ++g) simd::store(l + i0 + g * W, ls[g]);
        }
        // O_acc = alpha O_acc + P V, with P(i, j) = St[j][i].
        const float* vt = v + k0 * D;
        long ldv = D;
        if (D != Dp) {
            for (long j = 0; j < cols; ++j) std::copy(vt + j * D, vt + (j + 1) * D, Vp + j * Dp);
            vt = Vp;
            ldv = Dp;
        }
        tile_gemm<V, MR, NV, kP>(rows, Dp, cols, St, 1, kLd, vt, ldv, Oacc, alpha, v_next, next * D * 4);
    }
    for (long i = 0; i < rows; ++i) {
        const float inv = 1.0f / l[i];
        for (long c = 0; c < D; ++c) o[i * D + c] = Oacc[c / kP * kP * kP + i * kP + c % kP] * inv;
    }
}

Instance prepare(Problem& p) {
    Work w{attn_shape(p.shape), 0, p.in("Q").as<float>(), p.in("K").as<float>(), p.in("V").as<float>(),
           p.out("O").as<float>()};
    w.Dp = (w.a.D + 63) / 64 * 64;
    const int threads = omp_get_max_threads();
    const long per_thread = (workspace_floats(w.a.D, w.Dp) + 15) / 16 * 16;
    auto ws = std::shared_ptr<float[]>(new (std::align_val_t(64)) float[per_thread * threads],
                                       [](float* q) { ::operator delete[](q, std::align_val_t(64)); });
    auto fn = isa::pick_kernel<attend_block<simd::f16>, attend_block<simd::f8>>();
    Instance inst;
    inst.run = [=] {
        const long blocks = (w.a.S + kBr - 1) / kBr, tasks = w.a.B * w.a.H * blocks;
#pragma omp parallel num_threads(threads)
        {
            float* mine = ws.get() + per_thread * omp_get_thread_num();
            // Dynamic: with the causal mask, later query blocks have more keys.
#pragma omp for schedule(dynamic, 1)
            for (long t = 0; t < tasks; ++t) {
                // Largest blocks first (the last query blocks when causal).
                const long bh = t / blocks, qb = blocks - 1 - t % blocks;
                fn(w, bh, qb * kBr, mine);
            }
        }
    };
    return inst;
}

}  // namespace
}  // namespace mw::fusion

MW_REGISTER_VARIANT(attention_tiled_cpu, {
    .name = "tiled", .op = "attention", .lever = "fusion",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "FlashAttention on the CPU: 64x64 score tiles in L2, online softmax, SIMD micro-kernels "
                 "for QK^T and PV; no s x s buffer",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType dt) {
        // Q, O once; K and V re-read once per 64-query block (half of it with the mask).
        const auto a = mw::fusion::attn_shape(s);
        const double blocks = std::ceil(double(a.S) / 64.0) * (a.causal ? 0.5 : 1.0);
        return 4.0 * a.B * a.S * a.D * (2.0 * a.H + 2.0 * a.H * blocks);
    },
    .prepare = mw::fusion::prepare });
