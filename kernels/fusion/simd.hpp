// SIMD building blocks shared by the CPU rungs of the fusion lever.
//
// The project is compiled without -march, so every kernel is written once as
// a template over a GCC vector type (16 floats = one AVX-512 register, 8 =
// one AVX2 register) and instantiated inside two small wrappers that carry
// a target attribute (harness/isa.hpp writes them):
//
//   template <class V> MW_SIMD_INLINE void row_kernel(...);        // generic
//   auto fn = isa::pick_kernel<row_kernel<simd::f16>, row_kernel<simd::f8>>();
//
// The template has no target of its own and is force-inlined into the
// wrapper, so GCC lowers the vector arithmetic with the wrapper's ISA (and
// contracts a*b+c into an FMA). Intrinsics could not be used here: an
// intrinsic may only be inlined into a function that already has its target.
// pick_kernel chooses at run time (simd::pick()); MEMWALL_ISA=avx2 forces
// the fallback.
//
// Math: exp is a fitted degree-6 polynomial after a 2^n range reduction (max
// error ~2 ulp on [-87.3, 87.3], inputs clamped to that range, so exp(-inf)
// returns ~1e-38, not 0: callers that mask use a select; exp(NaN) is NaN). GELU is the tanh form,
// evaluated as x * sigmoid(2u) = x / (1 + 2^(-2u log2 e)) — the same function as
// 0.5 x (1 + tanh u) without the cancellation of 1 + tanh(u) for x << 0;
// its power of two is exp2_n's shorter chain (log2 e folded into GELU's
// constants, a degree-5 polynomial), and its division a reciprocal estimate
// refined by one Newton step on AVX-512 and a divide on AVX2 (gelu_n says
// why).
#pragma once

// immintrin.h is included for its side effect: its target pragmas make GCC
// declare the AVX-512/AVX2 builtins used below (they are declared lazily).
#include <immintrin.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "harness/isa.hpp"

// Vector types cross no ABI boundary here (everything is inlined into its
// wrapper), so GCC's note about their calling convention is noise.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace mw::fusion::simd {

typedef float f16 __attribute__((vector_size(64)));
typedef float f8 __attribute__((vector_size(32)));
typedef int i16 __attribute__((vector_size(64)));
typedef int i8 __attribute__((vector_size(32)));

template <class V> struct Traits;
template <> struct Traits<f16> { using I = i16; static constexpr int W = 16; };
template <> struct Traits<f8> { using I = i8; static constexpr int W = 8; };
template <class V> constexpr int width = Traits<V>::W;

// The run-time choice (harness/isa.hpp; MEMWALL_ISA=avx2 forces the fallback).
using isa::Isa;
using isa::pick;

// Unaligned load/store through memcpy (GCC emits one vmovups).
template <class V> MW_SIMD_INLINE V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
template <class V> MW_SIMD_INLINE void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }
// Non-temporal store of one full vector to a sizeof(V)-aligned address.
// GCC builtins, not intrinsics: a builtin's ISA is checked where it is
// expanded (inside the targeted wrapper), an intrinsic's where it is called.
template <class V> MW_SIMD_INLINE void stream(float* p, V v) {
    if constexpr (sizeof(V) == 64) __builtin_ia32_movntps512(p, v);
    else __builtin_ia32_movntps256(p, v);
}
// x in every lane, broadcast as its bits: 0 + b is b for every integer, so
// GCC keeps only the broadcast, straight from memory where x is there (one
// load uop). V{} + x, the obvious spelling, is not x for x = -0: GCC keeps a
// scalar add and a register broadcast on port 5, which in a micro-kernel's
// inner loop sits beside the FMAs ({x, x, ...} is built lane by lane).
template <class V> MW_SIMD_INLINE V splat(float x) {
    using I = typename Traits<V>::I;
    int bits;
    std::memcpy(&bits, &x, sizeof bits);
    const I lanes = I{} + bits;
    V v;
    std::memcpy(&v, &lanes, sizeof v);
    return v;
}
// One vmaxps/vminps (a select `a > b ? a : b` costs a compare and a blend).
// Like the instructions, they return b when either operand is NaN.
template <class V> MW_SIMD_INLINE V vmax(V a, V b) {
    if constexpr (sizeof(V) == 64) return __builtin_ia32_maxps512_mask(a, b, a, 0xFFFF, 4);
    else return __builtin_ia32_maxps256(a, b);
}
template <class V> MW_SIMD_INLINE V vmin(V a, V b) {
    if constexpr (sizeof(V) == 64) return __builtin_ia32_minps512_mask(a, b, a, 0xFFFF, 4);
    else return __builtin_ia32_minps256(a, b);
}

// Whether any lane of a exceeds the matching lane of t (a compare into a
// mask and one test: no horizontal reduction).
template <class V> MW_SIMD_INLINE bool any_gt(V a, V t) {
    if constexpr (sizeof(V) == 64) return __builtin_ia32_cmpps512_mask(a, t, 30 /* _CMP_GT_OQ */, 0xFFFF, 4) != 0;
    else return __builtin_ia32_movmskps256(__builtin_ia32_cmpps256(a, t, 30)) != 0;
}

// Horizontal sum / max. The vector is copied to an array first: subscripting
// it (v[i]) would make it addressable, and GCC would then keep a loop's
// accumulator in memory — a store-to-load round trip on every iteration.
template <class V> MW_SIMD_INLINE float hsum(V v) {
    float a[width<V>];
    std::memcpy(a, &v, sizeof v);
    float s = 0;
    for (int i = 0; i < width<V>; ++i) s += a[i];
    return s;
}
template <class V> MW_SIMD_INLINE float hmax(V v) {
    float a[width<V>];
    std::memcpy(a, &v, sizeof v);
    float m = a[0];
    for (int i = 1; i < width<V>; ++i) m = a[i] > m ? a[i] : m;
    return m;
}

// 1/d to ~1 ulp without a divide, AVX-512 only: the 14-bit reciprocal
// estimate plus one Newton step, 3 instructions on the FMA ports instead of
// a zmm divider with a throughput of one vector per ~10 cycles. (AVX2 code
// divides: gelu_n says why.)
template <class V> MW_SIMD_INLINE V recip(V d) {
    static_assert(sizeof(V) == 64, "recip is AVX-512's; AVX2 code divides (gelu_n)");
    const V r = __builtin_ia32_rcp14ps512_mask(d, d, 0xFFFF);
    return r * (2.0f - d * r);
}

// x clamped to [-87.3, 87.3], NaN kept: a vmaxps and a vminps with x
// second (they return their second operand when one is NaN). One vrangeps
// (the smaller magnitude of x and 87.3, with x's sign) would save an
// instruction, but turns NaN into 87.3, and exp(NaN) into 8e37.
template <class V> MW_SIMD_INLINE V clamp_exp_arg(V x) { return vmin(splat<V>(87.3f), vmax(splat<V>(-87.3f), x)); }

constexpr double kLog2e = 1.4426950408889634;  // log2(e), rounded to float where a kernel uses it

// exp(x), ~2 ulp; x clamped to [-87.3, 87.3] so the result stays a normal,
// finite float. x = n ln2 + r with n = round(x / ln 2), |r| <= ln2 / 2
// (Cody-Waite: ln 2 split in two so r is exact to ~1 ulp); exp(r) is a
// degree-6 polynomial fitted to relative error, evaluated by Estrin's
// scheme (over 2^24 points of the range: 1.4 ulp at worst; Horner's 1.0).
// AVX-512 multiplies by 2^n with one vscalefps; AVX2 builds 2^n in the
// exponent field. 14 vector instructions per 16 floats on AVX-512.
//
// exp_n and gelu_n take N independent vectors and advance all of them one
// step at a time. Each is a chain of dependent instructions (exp's ~15,
// ~40 cycles of latency on Zen 3; GELU adds its argument before and its
// division after); written one vector after another, the scheduler holds only
// a few such chains and the FMA ports wait on latency. Interleaved in
// program order, N chains are in flight from the start. exp and gelu are
// the N = 1 case.
template <int N, class V> MW_SIMD_INLINE void exp_n(V* x) {
    using I = typename Traits<V>::I;
    const V magic = splat<V>(12582912.0f);  // n = round(x / ln 2) by the 1.5*2^23 trick (exact for |n| < 2^22)
    V t[N], n[N], r[N], p[N];
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) x[k] = clamp_exp_arg(x[k]);
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) t[k] = x[k] * float(kLog2e) + magic;
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) n[k] = t[k] - magic;
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) r[k] = x[k] - n[k] * 0.693359375f;
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) r[k] = r[k] - n[k] * -2.12194440e-4f;
    // The polynomial by Estrin's scheme in r^2: ~15 cycles of latency where
    // Horner's six dependent FMAs take ~24, for one instruction more. GELU's
    // chain is bound by latency on AVX2 cores (gelu_n).
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) {
        const V r2 = r[k] * r[k];
        const V p01 = r[k] + 1.0f;
        const V p23 = splat<V>(1.666641980409622e-1f) * r[k] + 4.999999105930328e-1f;
        const V p45 = splat<V>(8.374815806746483e-3f) * r[k] + 4.166822507977486e-2f;
        const V p6 = splat<V>(1.383684459142387e-3f) * r2 + p45;
        p[k] = (p6 * r2 + p23) * r2 + p01;
    }
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) {
        if constexpr (sizeof(V) == 64) {
            x[k] = __builtin_ia32_scalefps512_mask(p[k], n[k], p[k], 0xFFFF, 4);
        } else {
            // t = 1.5 * 2^23 + n holds n in its low mantissa bits (two's
            // complement for n < 0), and 1.5 * 2^23's own bits all shift out
            // past bit 31: (bits(t) << 23) + (127 << 23) is 2^n's bit
            // pattern, two integer ops instead of a float-to-int convert.
            I e;
            std::memcpy(&e, &t[k], sizeof e);
            e = (e << 23) + (127 << 23);
            V scale;
            std::memcpy(&scale, &e, sizeof scale);
            x[k] = p[k] * scale;
        }
    }
}
template <class V> MW_SIMD_INLINE V exp(V x) {
    exp_n<1>(&x);
    return x;
}

// 2^y for GELU, N vectors in place, y clamped to [-126, 126] (NaN kept):
// y = n + f with n = round(y), |f| <= 1/2 exact, and 2^f a degree-5
// polynomial (minimax in relative error: ~1.8 half-ulps of truncation where
// exp's degree 6 has ~0.3). Shorter than exp_n's chain: no Cody-Waite
// reduction (two FMAs) and a round instruction where exp has the 1.5*2^23
// add and subtract, one FMA fewer in the polynomial: ~22 cycles of latency
// where exp_n's chain has ~39 (Zen 3's latencies). For GELU it is as good
// as exp: GELU's argument carries a few roundings whose cost grows with |y|
// (the test allows for them), and 2^y's own error stays within them (the
// test's worst case over [-9, 9] moved from 2.24 to 2.26 ulps on AVX2).
// 2^n is AVX-512's vscalefps, and on AVX2 the exponent field built from n
// converted to an integer.
template <int N, class V> MW_SIMD_INLINE void exp2_n(V* y) {
    using I = typename Traits<V>::I;
    V n[N], f[N], p[N];
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) y[k] = vmin(splat<V>(126.0f), vmax(splat<V>(-126.0f), y[k]));
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) {  // to nearest, no precision exception
        if constexpr (sizeof(V) == 64) n[k] = __builtin_ia32_rndscaleps_mask(y[k], 8, y[k], 0xFFFF, 4);
        else n[k] = __builtin_ia32_roundps256(y[k], 8);
    }
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) f[k] = y[k] - n[k];
    // 2^f = 1 + c1 f + ... + c5 f^5 by Estrin's scheme in f^2; c1 = ln 2,
    // c_k = a_k (ln 2)^k from a minimax fit of exp(r) = 1 + r + a_2 r^2 +
    // ... + a_5 r^5 on |r| <= ln2 / 2 (Lawson's iteration in long double).
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) {
        const V f2 = f[k] * f[k];
        const V p01 = splat<V>(0.693147180559945309f) * f[k] + 1.0f;
        const V p23 = splat<V>(0.0555056004983599f) * f[k] + 0.240222814071529f;
        const V p45 = splat<V>(0.00133002700192108f) * f[k] + 0.00966972255760298f;
        p[k] = (p45 * f2 + p23) * f2 + p01;
    }
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) {
        if constexpr (sizeof(V) == 64) {
            y[k] = __builtin_ia32_scalefps512_mask(p[k], n[k], p[k], 0xFFFF, 4);
        } else {
            I e = __builtin_convertvector(n[k], I);  // exact: |n| <= 126
            e = (e + 127) << 23;
            V scale;
            std::memcpy(&scale, &e, sizeof scale);
            y[k] = p[k] * scale;
        }
    }
}

// tanh-GELU as x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), on N
// independent vectors in place: x / (1 + 2^y) with y = -2u log2 e. The cubic
// and log2 e are folded into two constants: y = (x^2 (0.044715 K) + K) x
// with K = -2 sqrt(2/pi) log2 e, one FMA and two multiplies.
constexpr double kMinus2SqrtTwoOverPi = -1.5957691216057308;  // -2 sqrt(2/pi)
constexpr float kMinus2SqrtTwoOverPiLog2e = float(kMinus2SqrtTwoOverPi * kLog2e);
constexpr float kCubicTimesMinus2SqrtTwoOverPiLog2e = float(0.044715 * kMinus2SqrtTwoOverPi * kLog2e);
// Divide: 1 / (1 + 2^y) as a true divide; else, with AVX-512, as recip's
// estimate and Newton step. AVX2 always divides. gelu_n: not Divide.
template <int N, bool Divide, class V> MW_SIMD_INLINE void gelu_n_as(V* x) {
    V e[N];
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k)
        e[k] = (x[k] * x[k] * kCubicTimesMinus2SqrtTwoOverPiLog2e + kMinus2SqrtTwoOverPiLog2e) * x[k];
    exp2_n<N>(e);
#pragma GCC unroll 8
    for (int k = 0; k < N; ++k) {
        // AVX-512 by default: the reciprocal estimate and a Newton step
        // (recip); a zmm divide issues once per ~10 cycles on Intel's cores.
        // Zen 4's divider is faster than that, and there the divide frees
        // three FMA-pipe ops per vector: bias_gelu_ln's fused rung times both
        // once per process and takes the faster (its header). AVX2: a true
        // divide, which Zen 3 issues once per ~3.5 cycles per ymm, off the
        // FMA ports and with a shorter latency than recip's four steps;
        // GELU's chain is bound by latency there (the fused kernel's header
        // has the Zen 3's figures).
        if constexpr (sizeof(V) == 64 && !Divide) x[k] = x[k] * recip(e[k] + 1.0f);
        else x[k] = x[k] / (e[k] + 1.0f);
    }
}
template <int N, class V> MW_SIMD_INLINE void gelu_n(V* x) { gelu_n_as<N, false>(x); }
template <class V> MW_SIMD_INLINE V gelu(V x) {
    gelu_n<1>(&x);
    return x;
}

// Scalar twins for the tails of rows (same formulas, libm's exp2).
inline float gelu_scalar(float x) {
    return x / (std::exp2((x * x * kCubicTimesMinus2SqrtTwoOverPiLog2e + kMinus2SqrtTwoOverPiLog2e) * x) + 1.0f);
}

}  // namespace mw::fusion::simd
