// The machinery shared by the CPU GEMV rungs 1-4 (optimized/precision/
// gemv_q_*.cpp): how rows are dealt to threads, how small batches reuse a row
// while it is hot, and the one loop that walks a row in 32-weight chunks.
// What differs between rungs is only the *decoder*: how 32 stored weights
// become two 16-lane (AVX-512) or four 8-lane (AVX2) fp32 vectors, and what
// scale / zero-point each group of weights carries. That decode is the lesson;
// each rung file defines its own.
//
// Per output row r and batch item bb the loop computes
//     y[bb][r] = rs * sum_g s_g * (sum_{j in g} q_j x_j  -  z_g * sum_{j in g} x_j)
// so the scale is applied once per group and the zero-point once per group
// through the precomputed group sums of x — never per weight. (fp32/bf16/fp16:
// one group per row, s = 1, z = 0; int8: rs = the row's scale.)
//
// Threads: rows are cut into tiles of at most ~512 KiB of stored weights and
// dealt out dynamically (a core slowed by a neighbour takes fewer tiles); each
// tile is one sequential stream, which the hardware prefetcher follows. Batch
// items are taken 4 at a time while the tile sits in L2, so DRAM sees W once
// for any b. Above b ~ 64 at n_in = 8192 the activations no longer fit in L2
// and come from L3 once per tile: this rung does not block n_in, the GEMM of
// the vectorization lever does.
//
// ISA: AVX-512 when the CPU has it, else AVX2+FMA+F16C; MEMWALL_ISA=avx2
// forces the fallback (tests run both).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/isa.hpp"
#include "harness/registry.hpp"
#include "kernels/precision/quant.hpp"
#include "reference/precision/gemv_q.hpp"

// GCC 12 warns that the intrinsics headers' own __Y temporaries "may be used
// uninitialized" once these templates are inlined: a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"


namespace mw::precision::cpu {

using isa::Isa;
// AVX-512 unless absent or MEMWALL_ISA=avx2 (harness/isa.hpp).
inline Isa select_isa() { return isa::pick(); }

// Everything a row loop reads.
struct Args {
    const QMatrix* m = nullptr;
    const float* x = nullptr;     // [b][ldx], zero-padded up to ldx
    std::int64_t ldx = 0;         // multiple of 32 (and of the int4 group)
    const float* xsum = nullptr;  // [b][groups]: sum of x over each group (grouped decoders)
    std::int64_t groups = 0;
    float* y = nullptr;           // [b][n_out]
};

// --- the row loops, one per ISA ------------------------------------------------
// Software prefetch distance along the weight stream (the next rows follow
// contiguously within a tile). The decoding rungs spend several instructions
// per weight byte, which leaves too few loads in flight for the hardware
// prefetcher alone to cover DRAM latency; prefetching 4 KiB ahead lets their
// reads overlap the decode. (fp32's loop is all loads: it hardly needs it.)
constexpr std::int64_t kPrefetchBytes = 4096;

// D: decoder, constructed per row, with
//   const char* at(std::int64_t j)     // address of weight j's storage (prefetch)
//   static constexpr bool grouped;     // scale/zero-point per group (int4)
//   std::int64_t group;                // weights per group (multiple of 32)
//   void decode(std::int64_t j, V w[]) // weights j..j+31 as fp32 vectors (zero past n_in)
//   float scale(g), zero(g);           // grouped decoders only
//   float row_scale;                   // 1 except int8
MW_TARGET_AVX512 inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }
MW_TARGET_AVX2 inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

template <class D, int NB>
MW_TARGET_AVX512 void rows_avx512(const Args& a, std::int64_t r0, std::int64_t r1, std::int64_t b0) {
    const QMatrix& m = *a.m;
    for (std::int64_t r = r0; r < r1; ++r) {
        const D d(m, r);
        __m512 acc[NB];
        float corr[NB];
        for (int bb = 0; bb < NB; ++bb) acc[bb] = _mm512_setzero_ps(), corr[bb] = 0;
        for (std::int64_t g0 = 0, g = 0; g0 < a.ldx; g0 += d.group, ++g) {
            __m512 ga[NB][2];
            for (int bb = 0; bb < NB; ++bb) ga[bb][0] = ga[bb][1] = _mm512_setzero_ps();
            const std::int64_t g1 = std::min(g0 + d.group, a.ldx);
            for (std::int64_t j = g0; j < g1; j += 32) {
                __builtin_prefetch(d.at(j) + kPrefetchBytes, 0, 3);
                __m512 w[2];
                d.decode(j, w);
                for (int bb = 0; bb < NB; ++bb) {
                    const float* xp = a.x + (b0 + bb) * a.ldx + j;
                    ga[bb][0] = _mm512_fmadd_ps(w[0], _mm512_loadu_ps(xp), ga[bb][0]);
                    ga[bb][1] = _mm512_fmadd_ps(w[1], _mm512_loadu_ps(xp + 16), ga[bb][1]);
                }
            }
            if constexpr (D::grouped) {
                const float s = d.scale(g), sz = s * d.zero(g);
                for (int bb = 0; bb < NB; ++bb) {
                    acc[bb] = _mm512_fmadd_ps(_mm512_add_ps(ga[bb][0], ga[bb][1]), _mm512_set1_ps(s), acc[bb]);
                    corr[bb] += sz * a.xsum[(b0 + bb) * a.groups + g];
                }
            } else {
                for (int bb = 0; bb < NB; ++bb) acc[bb] = _mm512_add_ps(acc[bb], _mm512_add_ps(ga[bb][0], ga[bb][1]));
            }
        }
        for (int bb = 0; bb < NB; ++bb) a.y[(b0 + bb) * m.n_out + r] = d.row_scale * hsum(acc[bb]) - corr[bb];
    }
}

template <class D, int NB>
MW_TARGET_AVX2 void rows_avx2(const Args& a, std::int64_t r0, std::int64_t r1, std::int64_t b0) {
    const QMatrix& m = *a.m;
    for (std::int64_t r = r0; r < r1; ++r) {
        const D d(m, r);
        __m256 acc[NB];
        float corr[NB];
        for (int bb = 0; bb < NB; ++bb) acc[bb] = _mm256_setzero_ps(), corr[bb] = 0;
        for (std::int64_t g0 = 0, g = 0; g0 < a.ldx; g0 += d.group, ++g) {
            __m256 ga[NB][2];
            for (int bb = 0; bb < NB; ++bb) ga[bb][0] = ga[bb][1] = _mm256_setzero_ps();
            const std::int64_t g1 = std::min(g0 + d.group, a.ldx);
            for (std::int64_t j = g0; j < g1; j += 32) {
                __builtin_prefetch(d.at(j) + kPrefetchBytes, 0, 3);
                __m256 w[4];
                d.decode(j, w);
                for (int bb = 0; bb < NB; ++bb) {
                    const float* xp = a.x + (b0 + bb) * a.ldx + j;
                    for (int k = 0; k < 4; ++k)
                        ga[bb][k & 1] = _mm256_fmadd_ps(w[k], _mm256_loadu_ps(xp + 8 * k), ga[bb][k & 1]);
                }
            }
            if constexpr (D::grouped) {
                const float s = d.scale(g), sz = s * d.zero(g);
                for (int bb = 0; bb < NB; ++bb) {
                    acc[bb] = _mm256_fmadd_ps(_mm256_add_ps(ga[bb][0], ga[bb][1]), _mm256_set1_ps(s), acc[bb]);
                    corr[bb] += sz * a.xsum[(b0 + bb) * a.groups + g];
                }
            } else {
                for (int bb = 0; bb < NB; ++bb) acc[bb] = _mm256_add_ps(acc[bb], _mm256_add_ps(ga[bb][0], ga[bb][1]));
            }
        }
        for (int bb = 0; bb < NB; ++bb) a.y[(b0 + bb) * m.n_out + r] = d.row_scale * hsum(acc[bb]) - corr[bb];
    }
}

// Rows [r0, r1) for every batch item, 4 items at a time while the rows are hot.
template <class D512, class D256>
void rows_all_batches(Isa isa, const Args& a, std::int64_t b, std::int64_t r0, std::int64_t r1) {
    for (std::int64_t b0 = 0; b0 < b;) {
        const std::int64_t left = b - b0;
        const int nb = left >= 4 ? 4 : left >= 2 ? 2 : 1;
        if (isa == Isa::avx512) {
            if (nb == 4) rows_avx512<D512, 4>(a, r0, r1, b0);
            else if (nb == 2) rows_avx512<D512, 2>(a, r0, r1, b0);
            else rows_avx512<D512, 1>(a, r0, r1, b0);
        } else {
            if (nb == 4) rows_avx2<D256, 4>(a, r0, r1, b0);
            else if (nb == 2) rows_avx2<D256, 2>(a, r0, r1, b0);
            else rows_avx2<D256, 1>(a, r0, r1, b0);
        }
        b0 += nb;
    }
}

// --- one call, and prepare: quantize (untimed), then the timed call ---------------
// The timed call pads x into a scratch buffer when rows are padded (odd
// n_in) and computes the group sums of x for grouped formats: b * n_in
// floats, noise next to W. gemv_call is also what other code calls through
// kernels/precision/gemv.hpp (the model stack's decoder).
template <class D512, class D256>
void gemv_call(const QMatrix& m, const float* x, std::int64_t b, float* y, std::vector<float>& xpad,
               std::vector<float>& xsum) {
    const QuantSpec spec = m.spec;
    const std::int64_t n_out = m.n_out, n_in = m.n_in;
    const std::int64_t ldx = padded_cols(spec.format == Format::f32 ? QuantSpec{Format::bf16} : spec, n_in);
    const bool pad = ldx != n_in, grouped = D512::grouped;
    const std::int64_t groups = grouped ? ldx / spec.group : 0;
    // Row tiles of ~512 KiB of stored weights: long sequential streams,
    // small enough to stay in L2 while the batch blocks reuse them.
    const double row_bytes = double(n_in) * effective_bits(spec, n_in) / 8;
    const std::int64_t tile = std::max<std::int64_t>(1, std::int64_t((512 << 10) / row_bytes));
    const float* xs = x;
    if (pad) {
        // Only the first n_in of each padded row are ever written: the padding stays zero.
        if (xpad.size() != std::size_t(b * ldx)) xpad.assign(std::size_t(b * ldx), 0.0f);
        for (std::int64_t bb = 0; bb < b; ++bb)
            std::memcpy(xpad.data() + bb * ldx, x + bb * n_in, std::size_t(n_in) * sizeof(float));
        xs = xpad.data();
    }
    xsum.resize(std::size_t(b * groups));
    for (std::int64_t bb = 0; bb < b && grouped; ++bb)
        for (std::int64_t g = 0; g < groups; ++g) {
            float s = 0;
            for (std::int64_t j = g * spec.group; j < (g + 1) * spec.group; ++j) s += xs[bb * ldx + j];
            xsum[std::size_t(bb * groups + g)] = s;
        }
    const Isa isa = select_isa();
    const Args a{&m, xs, ldx, xsum.data(), groups, y};
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t r0 = 0; r0 < n_out; r0 += tile)
        rows_all_batches<D512, D256>(isa, a, b, r0, std::min(n_out, r0 + tile));
}

// fp32 reads the problem's W in place (no copy); every other format is
// quantized from it here, outside the timed region.
template <class D512, class D256>
std::function<Instance(Problem&)> gemv_prepare(QuantSpec spec) {
    return [spec](Problem& p) {
        const std::int64_t n_out = p.shape["n_out"], n_in = p.shape["n_in"], b = p.shape["b"];
        auto m = std::make_shared<QMatrix>();
        if (spec.format == Format::f32) {
            m->spec = spec, m->n_out = n_out, m->n_in = n_in, m->ld = n_in;
            m->payload = p.in("W");  // shares storage: no copy
        } else {
            *m = quantize(spec, p.in("W").as<float>(), n_out, n_in);
        }
        const std::int64_t ldx = padded_cols(spec.format == Format::f32 ? QuantSpec{Format::bf16} : spec, n_in);
        const std::int64_t groups = D512::grouped ? ldx / spec.group : 0;
        // Scratch sized once here, so the timed calls do not allocate.
        auto xpad = std::make_shared<std::vector<float>>(ldx != n_in ? std::size_t(b * ldx) : 0, 0.0f);
        auto xsum = std::make_shared<std::vector<float>>(std::size_t(b * groups), 0.0f);
        const float* x = p.in("x").as<float>();
        float* y = p.out("y").as<float>();
        // The packed weights (Buffers) and the scratch vectors come through
        // the heap tracker: no workspace_bytes to declare.
        Instance inst;
        inst.run = [=] { gemv_call<D512, D256>(*m, x, b, y, *xpad, *xsum); };
        return inst;
    };
}

}  // namespace mw::precision::cpu
