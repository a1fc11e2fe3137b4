// cuda-emu: CUDA's built-in vector types (dim3, uint3, float4, ...) and the
// 16-bit float types (__half, __nv_bfloat16) for host-compiled kernels.
//
// The emulator defines its own types instead of including the toolkit's
// vector_types.h / cuda_fp16.h so that the cuda-emu backend builds on
// machines without a CUDA toolkit (students without a GPU). Alignments match
// CUDA's, so a float4 load is a 16-byte access in both backends; the fp16 and
// bf16 conversions round to nearest even, bit-exact with the device's _rn
// conversions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

// --- vector types ------------------------------------------------------------
// CUDA aligns 2-vectors to their size and 3-vectors like their scalar;
// 4-vectors of 4-byte scalars to 16 bytes.
#define MW_EMU_VEC2(T, N, A) \
    struct __attribute__((aligned(A))) N##2 { T x, y; }; \
    inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define MW_EMU_VEC3(T, N) \
    struct N##3 { T x, y, z; }; \
    inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }
#define MW_EMU_VEC4(T, N, A) \
    struct __attribute__((aligned(A))) N##4 { T x, y, z, w; }; \
    inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
#define MW_EMU_VEC(T, N, A2, A4) MW_EMU_VEC2(T, N, A2) MW_EMU_VEC3(T, N) MW_EMU_VEC4(T, N, A4)

MW_EMU_VEC(signed char, char, 2, 4)
MW_EMU_VEC(unsigned char, uchar, 2, 4)
MW_EMU_VEC(short, short, 4, 8)
MW_EMU_VEC(unsigned short, ushort, 4, 8)
MW_EMU_VEC(int, int, 8, 16)
MW_EMU_VEC(unsigned int, uint, 8, 16)
MW_EMU_VEC(long long, longlong, 16, 16)
MW_EMU_VEC(unsigned long long, ulonglong, 16, 16)
MW_EMU_VEC(float, float, 8, 16)
MW_EMU_VEC(double, double, 16, 16)
#undef MW_EMU_VEC
#undef MW_EMU_VEC2
#undef MW_EMU_VEC3
#undef MW_EMU_VEC4

struct dim3 {
    unsigned int x = 1, y = 1, z = 1;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

// --- fp16 / bf16 ---------------------------------------------------------------
namespace mw::emu::detail {

inline std::uint32_t f32_bits(float f) { std::uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_f32(std::uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// IEEE binary16, round to nearest even, subnormals and overflow to inf kept.
inline std::uint16_t f32_to_f16(float f) {
    std::uint32_t x = f32_bits(f);
    std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
    std::uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)  // inf or NaN (keep NaN quiet and non-zero)
        return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
    if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds above 65504 -> inf
    if (ax < 0x38800000u) {                       // below 2^-14: subnormal half
        // Add 0.5 (as float) so the FPU does the RNE shift for us.
        float r = bits_f32(ax) + 0.5f;
        return sign | static_cast<std::uint16_t>(f32_bits(r) - 0x3f000000u);
    }
    std::uint32_t odd = (ax >> 13) & 1u;
    ax += 0xc8000fffu + odd;  // rebias exponent (-112 << 23) and round to even
    return sign | static_cast<std::uint16_t>(ax >> 13);
}

inline float f16_to_f32(std::uint16_t h) {
    std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float
        float v = static_cast<float>(man) * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

inline std::uint16_t f32_to_bf16(float f) {
    std::uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
    return static_cast<std::uint16_t>(x >> 16);
}
inline float bf16_to_f32(std::uint16_t b) { return bits_f32(static_cast<std::uint32_t>(b) << 16); }

}  // namespace mw::emu::detail

struct __half_raw { unsigned short x; };

// Arithmetic goes through float and rounds once, which is what the device's
// __hadd/__hmul do (float has enough bits that the double rounding is exact).
struct __half {
    unsigned short __x = 0;
    __half() = default;
    __half(__half_raw r) : __x(r.x) {}
    __half(float f) : __x(mw::emu::detail::f32_to_f16(f)) {}
    __half(double d) : __half(static_cast<float>(d)) {}
    __half(int i) : __half(static_cast<float>(i)) {}
    operator float() const { return mw::emu::detail::f16_to_f32(__x); }
    operator __half_raw() const { return {__x}; }
};

struct __nv_bfloat16_raw { unsigned short x; };

struct __nv_bfloat16 {
    unsigned short __x = 0;
    __nv_bfloat16() = default;
    __nv_bfloat16(__nv_bfloat16_raw r) : __x(r.x) {}
    __nv_bfloat16(float f) : __x(mw::emu::detail::f32_to_bf16(f)) {}
    __nv_bfloat16(double d) : __nv_bfloat16(static_cast<float>(d)) {}
    __nv_bfloat16(int i) : __nv_bfloat16(static_cast<float>(i)) {}
    operator float() const { return mw::emu::detail::bf16_to_f32(__x); }
    operator __nv_bfloat16_raw() const { return {__x}; }
};

struct __attribute__((aligned(4))) __half2 { __half x, y; };
struct __attribute__((aligned(4))) __nv_bfloat162 { __nv_bfloat16 x, y; };
using half = __half;
using half2 = __half2;
using nv_bfloat16 = __nv_bfloat16;
using nv_bfloat162 = __nv_bfloat162;

#define MW_EMU_HALF_OPS(H)                                                                   \
    inline H operator+(H a, H b) { return H(float(a) + float(b)); }                          \
    inline H operator-(H a, H b) { return H(float(a) - float(b)); }                          \
    inline H operator*(H a, H b) { return H(float(a) * float(b)); }                          \
    inline H operator/(H a, H b) { return H(float(a) / float(b)); }                          \
    inline H operator-(H a) { H r = a; r.__x ^= 0x8000u; return r; }                         \
    inline H& operator+=(H& a, H b) { return a = a + b; }                                    \
    inline H& operator-=(H& a, H b) { return a = a - b; }                                    \
    inline H& operator*=(H& a, H b) { return a = a * b; }                                    \
    inline H& operator/=(H& a, H b) { return a = a / b; }                                    \
    inline bool operator==(H a, H b) { return float(a) == float(b); }                        \
    inline bool operator!=(H a, H b) { return float(a) != float(b); }                        \
    inline bool operator<(H a, H b) { return float(a) < float(b); }                          \
    inline bool operator>(H a, H b) { return float(a) > float(b); }                          \
    inline bool operator<=(H a, H b) { return float(a) <= float(b); }                        \
    inline bool operator>=(H a, H b) { return float(a) >= float(b); }
MW_EMU_HALF_OPS(__half)
MW_EMU_HALF_OPS(__nv_bfloat16)
#undef MW_EMU_HALF_OPS

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return float(h); }
inline __half __ushort_as_half(unsigned short u) { return __half(__half_raw{u}); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half2 __floats2half2_rn(float a, float b) { return {__half(a), __half(b)}; }
inline __half2 __float2half2_rn(float a) { return {__half(a), __half(a)}; }
inline __half2 __halves2half2(__half a, __half b) { return {a, b}; }
inline float2 __half22float2(__half2 h) { return {float(h.x), float(h.y)}; }
inline float __low2float(__half2 h) { return float(h.x); }
inline float __high2float(__half2 h) { return float(h.y); }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline __half __hadd(__half a, __half b) { return a + b; }
inline __half __hsub(__half a, __half b) { return a - b; }
inline __half __hmul(__half a, __half b) { return a * b; }
inline __half __hdiv(__half a, __half b) { return a / b; }
inline __half __hneg(__half a) { return -a; }
inline __half __habs(__half a) { a.__x &= 0x7fffu; return a; }
inline __half __hfma(__half a, __half b, __half c) { return __half(std::fma(float(a), float(b), float(c))); }
inline __half __hmax(__half a, __half b) { return float(a) >= float(b) ? a : b; }
inline __half __hmin(__half a, __half b) { return float(a) <= float(b) ? a : b; }
inline __half2 __hadd2(__half2 a, __half2 b) { return {a.x + b.x, a.y + b.y}; }
inline __half2 __hmul2(__half2 a, __half2 b) { return {a.x * b.x, a.y * b.y}; }
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return float(b); }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16(__nv_bfloat16_raw{u}); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__nv_bfloat16(a), __nv_bfloat16(b)}; }
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return {__nv_bfloat16(a), __nv_bfloat16(a)}; }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {float(h.x), float(h.y)}; }
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return a + b; }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return a * b; }
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
    return __nv_bfloat16(std::fma(float(a), float(b), float(c)));
}
inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) >= float(b) ? a : b; }
inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) <= float(b) ? a : b; }
