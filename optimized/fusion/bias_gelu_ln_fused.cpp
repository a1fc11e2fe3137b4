// bias_gelu_ln, fusion lever, rung 2 (CPU): one pass per row.
//
// Change from rung 1: the five passes become one loop over rows. A row
// (hidden*4 bytes: 16 KiB at hidden = 4096) is read from DRAM once, turned
// into GELU(x + bias) in a per-thread buffer that stays in L1 (its mean and
// variance summed on the way), then normalized from that buffer straight
// into y with non-temporal stores (no read-for-ownership of y's
// lines; plain stores when a row is not vector-aligned).
// Expected effect: bytes drop from 8 sweeps of the activation to 2 (read x,
// write y) plus the parameters — 64 MiB instead of 256 MiB at 2048 x 4096 —
// so a DRAM-bound time ~4x shorter than rung 1's; FLOPs unchanged. No
// temporaries: the extra memory is two rows per thread.
// GELU is a chain of ~15 dependent vector instructions: eight of them are
// interleaved (simd::gelu_n) so the FMA ports are not left waiting on one
// chain's latency; on the 2-core Xeon that took a row from ~34 to ~28 cycles
// per 16 floats.
// A row's mean is needed before any of it can be written, so row by row the
// core alternates a read phase (GELU, x streaming in) with a write phase
// (normalize, y streaming out), and each phase leaves half of the memory
// path idle. The rows are software-pipelined instead: row r is normalized
// step by step while row r + 1's GELU is computed into a second buffer, so
// reads and writes flow together (two row buffers per thread). Recorded on
// the 2-core Xeon of results/xeon-260m-kvm-2c at 16384 x 4096, 2 threads
// (fusion-cpu.*): 23.3 ms before, 22.0 ms after.
// Between two rows the pipeline used to stop for the variance: a second pass
// over the row's buffer (from L1, but a load, a subtract and an FMA per
// vector: 768 instructions at hidden = 4096 with AVX-512, more than the
// core's reorder window, so no load of the next row could issue until it
// was done) and a chain of dependent adds, a square root and a divide. The
// variance is now summed in the GELU pass itself, as squared deviations from
// a shift (the mean of the row's first step: 128 values with AVX-512, 32
// with AVX2; shifted_stats says why that loses little to cancellation), and
// the pipeline runs on from row to row.
// On an AVX2 core the row is bound by GELU's chain rather than by DRAM: on
// the 2-core Zen 3 of results/epyc-zen3-kvm-2c one thread took the same
// time a row with the rows in cache as from DRAM (~19 cycles per 8 floats,
// about twice what the FMA ports need), and eight chains instead of four
// were slower (spills). simd's AVX2 GELU is shaped for that: fewer steps in
// the chain (the cubic folded into its constant, 2^n from integer bits, a
// divide instead of recip's four steps, exp's polynomial by Estrin): there
// `memwall run bias_gelu_ln --variant fused --threads 1 --shape
// rows=128,hidden=4096`, old and new binaries in turn, gave a best of
// 0.39-0.42 ms before and 0.36 ms after in the quiet runs (the host's noise
// that day was as large as the change). Two threads from DRAM were still
// bound by the row's work (16384 x 4096: 22.6 ms, 88% of the triad roof).
// Then GELU's power of two left exp for simd::exp2_n (log2 e folded into
// GELU's constants, no Cody-Waite step, a round instruction, a degree-5
// polynomial: ~22 cycles of latency instead of ~39): the same command gave
// 0.28 ms, and the row's work now fits under the memory path's time
// (fusion-cpu.* of results/epyc-zen3-kvm-2c has the 2-thread record).
// On AVX-512, GELU's 1 / (1 + 2^y) was the reciprocal estimate and a Newton
// step (simd::recip), chosen for Intel's cores, whose zmm divide issues once
// per ~10 cycles; that is three more ops per vector on the FMA pipes than a
// divide. On the 2-core Zen 4 EPYC of results/epyc-kvm-2c two threads from
// DRAM are bound by the row's arithmetic rather than by memory (one thread
// streams 16.9 GB/s, two about twice that), and a true divide made the rung
// 9-10% faster in each of 6 interleaved rounds in one process (16384 x
// 4096: 14.96-15.97 ms against 16.59-17.47). Which form wins depends on the
// core's divider, so both are timed once per process on 16 rows in L2
// (gelu_divides, kernels/fusion/bias_gelu_ln.hpp; MEMWALL_GELU=divide or
// estimate forces one), and the row's `path` names the one that ran.
// Numerics: the mean as the reference's; the variance one-pass with a shift
// where the reference takes two passes (two passes only for rows shorter
// than one step); a polynomial 2^y (simd::exp2_n) inside GELU, and a true
// divide or the refined reciprocal estimate after it.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/fusion/bias_gelu_ln.hpp"
#include "kernels/fusion/simd.hpp"
#include "reference/fusion/fusion.hpp"

namespace mw::fusion {
namespace {

// Vectors per GELU step, chains interleaved (simd::gelu_n): eight in
// AVX-512's 32 registers, four in AVX2's 16.
template <class V> constexpr int kChains = simd::width<V> == 16 ? 8 : 4;

// GELU(x + bias) for [j0, j1) of a row into buf (j0, j1 multiples of a
// step), its sum added to s; when Q, its deviations from c are summed
// instead, and their squares added to *q. DIV: GELU divides (gelu_divides).
template <class V, bool DIV, bool Q = false>
MW_SIMD_INLINE void gelu_steps(const float* x, const float* bias, float* buf, long j0, long j1, V& s, V* q = nullptr,
                               V c = V{}) {
    constexpr int W = simd::width<V>, N = kChains<V>;
    for (long j = j0; j < j1; j += N * W) {
        // 4 KiB ahead (into the next row near the end): the loads of one
        // step are too few to hide DRAM latency behind GELU's arithmetic.
        // Past the last row the address points at nothing; a prefetch never
        // faults, and the address is formed as an integer, not a pointer
        // past its array.
#pragma GCC unroll 8
        for (int k = 0; k < N * W; k += 16)
            __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(x + j) + 4 * (1024 + k)),
                               0, 3);
        V g[N];
#pragma GCC unroll 8
        for (int k = 0; k < N; ++k) g[k] = simd::load<V>(x + j + k * W) + simd::load<V>(bias + j + k * W);
        simd::gelu_n_as<N, DIV>(g);
#pragma GCC unroll 8
        for (int k = 0; k < N; ++k) simd::store(buf + j + k * W, g[k]);
        if constexpr (Q) {  // from here on, g is the deviation from c
            V d[N];
#pragma GCC unroll 8
            for (int k = 0; k < N; ++k) {
                g[k] -= c;
                d[k] = g[k] * g[k];
            }
#pragma GCC unroll 8
            for (int w = N / 2; w >= 1; w /= 2)
#pragma GCC unroll 8
                for (int k = 0; k < w; ++k) d[k] += d[k + w];
            *q += d[0];
        }
#pragma GCC unroll 8
        for (int w = N / 2; w >= 1; w /= 2)  // a tree: log2 N dependent adds
#pragma GCC unroll 8
            for (int k = 0; k < w; ++k) g[k] += g[k + w];
        s += g[0];  // one accumulator: a step is long enough that its add never waits
    }
}

// A row's sum (when Q: of its deviations from the row's shift) and, when Q,
// its sum of squared deviations.
struct RowSums {
    float sum, dev2;
};

// The rest of a row's GELU after its whole steps, from j0 (single vectors,
// then scalars), added to the sums of the steps (s, and q when Q: sums of
// deviations from c and of their squares).
template <class V, bool DIV, bool Q = false>
MW_SIMD_INLINE RowSums gelu_rest(const float* x, const float* bias, float* buf, long j0, long H, V s, V q = V{},
                                 float c = 0) {
    constexpr int W = simd::width<V>;
    const long Hv = H - H % W;
    const V cv = simd::splat<V>(c);
    long j = j0;
    for (; j < Hv; j += W) {
        V g = simd::load<V>(x + j) + simd::load<V>(bias + j);
        simd::gelu_n_as<1, DIV>(&g);
        simd::store(buf + j, g);
        const V d = Q ? g - cv : g;
        s += d;
        if constexpr (Q) q += d * d;
    }
    float tail = 0, tail_q = 0;
    for (; j < H; ++j) {
        const float g = buf[j] = simd::gelu_scalar(x[j] + bias[j]), d = Q ? g - c : g;
        tail += d;
        if constexpr (Q) tail_q += d * d;
    }
    return {simd::hsum(s) + tail, Q ? simd::hsum(q) + tail_q : 0.0f};
}

// Mean and 1/std of a row of GELU values in buf (L1), two-pass like the
// reference: for rows shorter than one step.
template <class V>
MW_SIMD_INLINE void row_stats(const float* buf, long H, float sum, float* mean_out, float* rstd_out) {
    constexpr int W = simd::width<V>;
    const long Hv = H - H % W;
    const float mean = sum / float(H);
    V q{}, q2{};
    long j = 0;
    for (; j + 2 * W <= Hv; j += 2 * W) {
        const V d = simd::load<V>(buf + j) - mean, d2 = simd::load<V>(buf + j + W) - mean;
        q += d * d;
        q2 += d2 * d2;
    }
    for (; j < Hv; j += W) {
        const V d = simd::load<V>(buf + j) - mean;
        q += d * d;
    }
    float tail = 0;
    for (j = Hv; j < H; ++j) tail += (buf[j] - mean) * (buf[j] - mean);
    *mean_out = mean;
    *rstd_out = 1.0f / std::sqrt((simd::hsum(q + q2) + tail) / float(H) + kLnEps);
}

// Mean and 1/std from a row's sums of deviations from a shift c, and of
// their squares: with e = sum / H, the mean is c + e and the variance
// q / H - e^2. c is the mean of the row's first step of m values
// (begin_row), so m e^2 <= H var (those values are part of the row's
// spread): the subtraction cancels at most log2(1 + H / m) bits of the
// variance (5 at H = 4096 with AVX-512's m = 128, 7 with AVX2's 32), where
// E[g^2] - mean^2 with no shift would lose everything to a large mean; and
// the mean's own rounding enters only as e's, a deviation's.
MW_SIMD_INLINE void shifted_stats(float sum, float q, float c, long H, float* mean_out, float* rstd_out) {
    const float e = sum / float(H);
    *mean_out = c + e;
    *rstd_out = 1.0f / std::sqrt(std::max(0.0f, q / float(H) - e * e) + kLnEps);
}

// A row's first step of GELU into buf, and the shift for its variance: the
// mean of that step's values. Returns the shift; s and q are set to the
// step's sums of deviations from it and of their squares.
template <class V, bool DIV>
MW_SIMD_INLINE float begin_row(const float* x, const float* bias, float* buf, V& s, V& q) {
    constexpr int W = simd::width<V>, N = kChains<V>;
    V sum{};
    gelu_steps<V, DIV>(x, bias, buf, 0, N * W, sum);
    const float c = simd::hsum(sum) / float(N * W);
    const V cv = simd::splat<V>(c);
    s = q = V{};
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) {
        const V d = simd::load<V>(buf + k * W) - cv;
        s += d;
        q += d * d;
    }
    return c;
}

// y[j0, j1) = (buf - mean) * rstd * gamma + beta; j1 = H takes the scalar
// tail too. Non-temporal stores when `nt`: y's lines are not read for
// ownership first and do not evict x's.
template <class V>
MW_SIMD_INLINE void normalize(const float* buf, const float* gamma, const float* beta, float* y, long j0, long j1,
                              long H, float mean, float rstd, bool nt) {
    constexpr int W = simd::width<V>;
    const long jv = std::min(j1, H - H % W);
    long j = j0;
    for (; j < jv; j += W) {
        const V v = (simd::load<V>(buf + j) - mean) * rstd * simd::load<V>(gamma + j) + simd::load<V>(beta + j);
        if (nt) simd::stream(y + j, v);
        else simd::store(y + j, v);
    }
    if (j1 == H)
        for (; j < H; ++j) y[j] = (buf[j] - mean) * rstd * gamma[j] + beta[j];
}

// GELU(x + bias) of a whole row into buf, with its mean and 1/std (one
// pass with a shift where the row has whole steps, else two).
template <class V, bool DIV>
MW_SIMD_INLINE void gelu_row(const float* xr, const float* bias, float* buf, long H, float* m, float* rs) {
    constexpr int W = simd::width<V>, step = kChains<V> * W;
    const long Hs = (H - H % W) / step * step;
    if (Hs == 0) {
        V s{};
        row_stats<V>(buf, H, gelu_rest<V, DIV>(xr, bias, buf, 0, H, s).sum, m, rs);
        return;
    }
    V s{}, q{};
    const float c = begin_row<V, DIV>(xr, bias, buf, s, q);
    gelu_steps<V, DIV, true>(xr, bias, buf, step, Hs, s, &q, simd::splat<V>(c));
    const RowSums t = gelu_rest<V, DIV, true>(xr, bias, buf, Hs, H, s, q, c);
    shifted_stats(t.sum, t.dev2, c, H, m, rs);
}

// Rows [0, R) of x into y, software-pipelined across rows (the header says
// why): row r is normalized into y step by step while row r + 1's GELU is
// computed into the other buffer. bufs[1] may be null when R is 1.
template <class V, bool DIV>
MW_SIMD_INLINE void fused_rows(const float* x, const float* bias, const float* gamma, const float* beta,
                               float* const bufs[2], float* y, long R, long H) {
    constexpr int W = simd::width<V>, step = kChains<V> * W;
    const long Hs = (H - H % W) / step * step;  // the part in whole steps
    if (R <= 0) return;
    float mean[2], rstd[2];
    gelu_row<V, DIV>(x, bias, bufs[0], H, &mean[0], &rstd[0]);
    for (long r = 0; r < R; ++r) {
        const int cur = r % 2, nxt = 1 - cur;
        float* yr = y + r * H;
        const bool nt = reinterpret_cast<std::uintptr_t>(yr) % sizeof(V) == 0;
        if (r + 1 == R) {
            normalize<V>(bufs[cur], gamma, beta, yr, 0, H, H, mean[cur], rstd[cur], nt);
            break;
        }
        const float* xn = x + (r + 1) * H;
        if (Hs == 0) {
            normalize<V>(bufs[cur], gamma, beta, yr, 0, H, H, mean[cur], rstd[cur], nt);
            gelu_row<V, DIV>(xn, bias, bufs[nxt], H, &mean[nxt], &rstd[nxt]);
            continue;
        }
        V s{}, q{};
        const float c = begin_row<V, DIV>(xn, bias, bufs[nxt], s, q);
        normalize<V>(bufs[cur], gamma, beta, yr, 0, step, H, mean[cur], rstd[cur], nt);
        const V cv = simd::splat<V>(c);
        for (long j = step; j < Hs; j += step) {
            gelu_steps<V, DIV, true>(xn, bias, bufs[nxt], j, j + step, s, &q, cv);
            normalize<V>(bufs[cur], gamma, beta, yr, j, j + step, H, mean[cur], rstd[cur], nt);
        }
        normalize<V>(bufs[cur], gamma, beta, yr, Hs, H, H, mean[cur], rstd[cur], nt);
        const RowSums t = gelu_rest<V, DIV, true>(xn, bias, bufs[nxt], Hs, H, s, q, c);
        shifted_stats(t.sum, t.dev2, c, H, &mean[nxt], &rstd[nxt]);
    }
}

using Rows = void (*)(const float*, const float*, const float*, const float*, float* const[2], float*, long, long);

// Best of 9 alternating trials of each AVX-512 form over 16 rows of 4096
// (256 KiB in, 256 KiB out: in L2 after the first trial, so the rows'
// arithmetic is what is timed): whether the divide is the faster here.
bool divide_measured_faster() {
    constexpr long R = 16, H = 4096;
    std::vector<float> x(R * H), y(R * H), bias(H, 0.0f), gamma(H, 1.0f), beta(H, 0.0f), buf(2 * H);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 2654435761u % 2001) - 1000) / 250.0f;  // [-4, 4]
    float* const bufs[2] = {buf.data(), buf.data() + H};
    const Rows forms[2] = {isa::on_avx512<fused_rows<simd::f16, false>>, isa::on_avx512<fused_rows<simd::f16, true>>};
    double best[2] = {1e30, 1e30};
    for (int trial = 0; trial < 9; ++trial)
        for (int f = 0; f < 2; ++f) {
            const auto t0 = std::chrono::steady_clock::now();
            forms[f](x.data(), bias.data(), gamma.data(), beta.data(), bufs, y.data(), R, H);
            best[f] = std::min(best[f], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
    _mm_sfence();
    return best[1] < best[0];
}

Instance prepare(Problem& p) {
    const long R = p.shape["rows"], H = p.shape["hidden"];
    const float* x = p.in("x").as<float>();
    const float* bias = p.in("bias").as<float>();
    const float* gamma = p.in("gamma").as<float>();
    const float* beta = p.in("beta").as<float>();
    float* y = p.out("y").as<float>();
    const int threads = omp_get_max_threads();
    // Two 64-byte aligned row buffers per thread: each vector load from a
    // buffer sits in one cache line.
    const long stride = (H + 15) / 16 * 16;
    auto bufs = std::shared_ptr<float[]>(new (std::align_val_t(64)) float[2 * stride * threads],
                                         [](float* q) { ::operator delete[](q, std::align_val_t(64)); });
    const bool wide = isa::pick() == isa::Isa::avx512, divide = !wide || gelu_divides();
    const Rows rows = !wide ? isa::on_avx2<fused_rows<simd::f8, true>>
                      : divide ? isa::on_avx512<fused_rows<simd::f16, true>>
                               : isa::on_avx512<fused_rows<simd::f16, false>>;
    Instance inst;
    inst.path = !wide ? "avx2 (GELU divides)"
                : divide ? "avx512 (GELU divides)" : "avx512 (GELU by reciprocal estimate + Newton step)";
    inst.run = [=] {
#pragma omp parallel num_threads(threads)
        {
            // One contiguous range of rows per thread, pipelined through.
            const int t = omp_get_thread_num(), n = omp_get_num_threads();
            const long r0 = R * t / n, r1 = R * (t + 1) / n;
            float* mine[2] = {bufs.get() + 2 * stride * t, bufs.get() + (2 * t + 1) * stride};
            rows(x + r0 * H, bias, gamma, beta, mine, y + r0 * H, r1 - r0, H);
            _mm_sfence();  // make this thread's streaming stores visible before the call returns
        }
    };
    return inst;
}

}  // namespace

bool gelu_divides() {
    const char* e = std::getenv("MEMWALL_GELU");
    const std::string want = e ? e : "";
    if (want == "divide") return true;
    if (want == "estimate") return false;
    if (!want.empty())
        throw std::invalid_argument("MEMWALL_GELU=" + want + ": unknown GELU form (choices: divide, estimate; unset: the faster here)");
    static const bool faster = divide_measured_faster();
    return faster;
}

void bias_gelu_ln_rows(const float* x, const float* bias, const float* gamma, const float* beta, float* y, long R,
                       long H, float* buf) {
    // Row by row (one buffer): y may be x, and the caller's strips are short.
    auto rows = isa::pick_kernel<fused_rows<simd::f16, false>, fused_rows<simd::f8, true>>();
    float* const bufs[2] = {buf, nullptr};
    for (long r = 0; r < R; ++r) rows(x + r * H, bias, gamma, beta, bufs, y + r * H, 1, H);
    _mm_sfence();
}
}  // namespace mw::fusion

MW_REGISTER_VARIANT(bias_gelu_ln_fused_cpu, {
    .name = "fused", .op = "bias_gelu_ln", .lever = "fusion",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 2,
    .rationale = "one pass per row: x read once, the row kept in L1 through GELU, mean and variance, "
                 "y streamed out: 2 DRAM sweeps instead of 8",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * (2.0 * double(s["rows"]) * s["hidden"] + 3.0 * s["hidden"]);
    },
    .prepare = mw::fusion::prepare });
