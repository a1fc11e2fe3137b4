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
// error ~2 ulp on [-87, 88], inputs clamped to that range, so exp(-inf) returns
// ~1e-38, not 0: callers that mask use a select). GELU is the tanh form,
// evaluated as x * sigmoid(2u) = x / (1 + exp(-2u)) — the same function as
// 0.5 x (1 + tanh u) without the cancellation of 1 + tanh(u) for x << 0;
// the division is a reciprocal estimate refined by one Newton step.
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
template <class V> MW_SIMD_INLINE V splat(float x) { return V{} + x; }
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

// 1/d to ~1 ulp without a divide: the 14-bit (AVX-512) or 12-bit (AVX2)
// reciprocal estimate plus one Newton step, 3 instructions on the FMA ports
// instead of a divider with a throughput of one vector per ~10 cycles.
template <class V> MW_SIMD_INLINE V recip(V d) {
    V r;
    if constexpr (sizeof(V) == 64) r = __builtin_ia32_rcp14ps512_mask(d, d, 0xFFFF);
    else r = __builtin_ia32_rcpps256(d);
    return r * (2.0f - d * r);
}

// exp(x), ~2 ulp; x clamped to [-87.3, 88] so the result stays a normal,
// finite float. x = n ln2 + r with n = round(x / ln 2), |r| <= ln2 / 2
// (Cody-Waite: ln 2 split in two so r is exact to ~1 ulp); exp(r) is a
// degree-6 polynomial fitted to relative error (1.6 ulp in fp32 Horner).
// AVX-512 multiplies by 2^n with one vscalefps; AVX2 builds 2^n in the
// exponent field. 13 vector instructions per 16 floats on AVX-512.
template <class V> MW_SIMD_INLINE V exp(V x) {
    using I = typename Traits<V>::I;
    x = vmin(vmax(x, splat<V>(-87.3f)), splat<V>(88.0f));
    // n = round(x / ln 2) by the 1.5*2^23 trick (exact for |n| < 2^22).
    const V magic = splat<V>(12582912.0f);
    const V n = (x * 1.44269504088896341f + magic) - magic;
    V r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    V p = splat<V>(1.383684459142387e-3f);
    p = p * r + 8.374815806746483e-3f;
    p = p * r + 4.166822507977486e-2f;
    p = p * r + 1.666641980409622e-1f;
    p = p * r + 4.999999105930328e-1f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    if constexpr (sizeof(V) == 64) {
        return __builtin_ia32_scalefps512_mask(p, n, p, 0xFFFF, 4);
    } else {
        const I e = (__builtin_convertvector(n, I) + 127) << 23;
        V scale;
        std::memcpy(&scale, &e, sizeof scale);
        return p * scale;
    }
}

// tanh-GELU as x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
template <class V> MW_SIMD_INLINE V gelu(V x) {
    const V u = (x * x * 0.044715f + 1.0f) * x * 0.7978845608028654f;
    return x * recip(exp(u * -2.0f) + 1.0f);
}

// Scalar twins for the tails of rows (same formulas, libm exp).
inline float gelu_scalar(float x) {
    const float u = (x * x * 0.044715f + 1.0f) * x * 0.7978845608028654f;
    return x / (std::exp(-2.0f * u) + 1.0f);
}

}  // namespace mw::fusion::simd
