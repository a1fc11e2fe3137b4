// Run-time ISA choice for the CPU kernels, in one place.
//
// The project is compiled without -march, so a SIMD kernel is compiled once
// per ISA inside a function carrying MW_TARGET_AVX512 or MW_TARGET_AVX2, and
// the caller picks one at run time with mw::isa::pick(). Setting the
// environment variable MEMWALL_ISA=avx2 forces the AVX2 path, so the tests
// check both paths on an AVX-512 machine. The environment is read on every
// call (tests set it at run time), which costs nothing next to a kernel.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

// One feature set per ISA for every kernel: what the SIMD rungs use between
// them (AVX-512 F/VL/DQ/BW; FMA; F16C for the half-precision weights).
#define MW_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma,f16c")))
#define MW_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
// The AVX-512 set plus one dot-product extension, for kernels that need it
// (the precision lever's integer- and bf16-dot rungs); callers check
// has_avx512_vnni() / has_avx512_bf16() and otherwise take their AVX2 path.
#define MW_TARGET_AVX512_VNNI __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512vnni,fma,f16c")))
#define MW_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512bf16,fma,f16c")))
// The AVX2 set plus AVX-VNNI (the 256-bit vpdpbusd of cores without
// AVX-512: calibrate's int8 peak there); callers check has_avx2_vnni().
#define MW_TARGET_AVX2_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

// A kernel template with no target of its own, always inlined into the
// function that has one (pick_kernel below).
#define MW_SIMD_INLINE __attribute__((always_inline)) inline

namespace mw::isa {

enum class Isa { avx512, avx2 };

inline bool has_avx512() {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}
inline bool has_avx2() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

inline bool has_avx512_vnni() { return has_avx512() && __builtin_cpu_supports("avx512vnni"); }
inline bool has_avx512_bf16() { return has_avx512() && __builtin_cpu_supports("avx512bf16"); }
inline bool has_avx2_vnni() { return has_avx2() && __builtin_cpu_supports("avxvnni"); }

// AVX-512 where present, unless MEMWALL_ISA=avx2; else AVX2. Throws if the
// CPU has neither feature set.
// Whether MEMWALL_ISA=avx2 asks for the AVX2 path; an unknown value throws,
// naming it and the choices.
inline bool avx2_forced() {
    const char* force = std::getenv("MEMWALL_ISA");
    if (force && *force && std::string_view(force) != "avx2" && std::string_view(force) != "avx512")
        throw std::invalid_argument(std::string("MEMWALL_ISA='") + force + "' is not an ISA; choices: avx512, avx2");
    return force && std::string_view(force) == "avx2";
}

inline Isa pick() {
    if (!avx2_forced() && has_avx512()) return Isa::avx512;
    if (has_avx2()) return Isa::avx2;
    throw std::runtime_error("memwall: this CPU has neither AVX-512 (F, VL, DQ, BW) nor AVX2+FMA+F16C");
}

// One kernel, compiled once per ISA. The kernel is a template over its vector
// type, force-inlined and with no target of its own (kernels/fusion/simd.hpp);
// on_avx512<K> / on_avx2<K> is instantiation K inlined into a function that
// carries MW_TARGET_AVX512 / MW_TARGET_AVX2, so GCC compiles K's vector code
// for that ISA, and pick_kernel<K512, K256>() is the one pick() chooses:
//
//   template <class V> MW_SIMD_INLINE void row(const float* x, float* y, long n);
//   auto fn = isa::pick_kernel<row<simd::f16>, row<simd::f8>>();  // 16 or 8 lanes
//   fn(x, y, n);
namespace detail {
template <auto K, class F = decltype(K)> struct Compiled;
template <auto K, class R, class... A> struct Compiled<K, R (*)(A...)> {
    MW_TARGET_AVX512 static R avx512(A... a) { return K(static_cast<A&&>(a)...); }
    MW_TARGET_AVX2 static R avx2(A... a) { return K(static_cast<A&&>(a)...); }
};
}  // namespace detail
template <auto K> inline constexpr auto on_avx512 = &detail::Compiled<K>::avx512;
template <auto K> inline constexpr auto on_avx2 = &detail::Compiled<K>::avx2;
template <auto K512, auto K256> auto pick_kernel() { return pick() == Isa::avx512 ? on_avx512<K512> : on_avx2<K256>; }

}  // namespace mw::isa
