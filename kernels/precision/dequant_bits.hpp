// Bit-level decoders of the precision lever's weight formats, written once
// for the host, for nvcc's device code and for the cuda-emu backend (which has
// no cuda_fp16.h to lean on). Every function is exact: it returns the same
// float as the CPU path's conversion (harness/inputs.cpp, quant.cpp), bit for
// bit — tests/precision/test_gemv_q_cuda.cpp compares all 65536 patterns.
//
// Why bit tricks instead of conversion instructions: on sm_80 / sm_90 the
// int-to-float and half-to-float conversion instructions issue at a fraction
// of the FMA rate (CUDA C++ Programming Guide, arithmetic instruction
// throughput), and a 4-bit GEMV would need one per weight, two per byte of
// DRAM traffic. The tricks below use only full-rate integer and fp32
// add/multiply instructions:
//   - bf16 is the top half of an fp32: shift or mask, nothing else;
//   - fp16: move exponent+mantissa into fp32's position and multiply by
//     2^112 (rebias 15 -> 127); the multiply also normalizes subnormals;
//   - a byte b (0..255) OR-ed into the mantissa of 2^23 is the float 2^23 + b
//     exactly, so one subtraction gives b - offset: int8 (offset 128 after
//     flipping the sign bit), int4 (offset 8 for the symmetric code).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MW_PREC_HD __host__ __device__ __forceinline__
#else
#define MW_PREC_HD inline
#endif

namespace mw::precision::bits {

MW_PREC_HD float f32_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

MW_PREC_HD std::uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
#endif
}

// --- 16-bit floats; `w` packs two, element 2k in the low half (little endian) ---
MW_PREC_HD float bf16_lo(std::uint32_t w) { return f32_from_bits(w << 16); }
MW_PREC_HD float bf16_hi(std::uint32_t w) { return f32_from_bits(w & 0xFFFF0000u); }

// IEEE binary16 -> fp32, exact for every pattern: normals, subnormals (the
// product of an fp32 subnormal and 2^112 is exact; nvcc keeps subnormals
// unless built with -ftz=true / --use_fast_math, which memwall never is),
// signed zeros, infinities and NaNs (payload kept).
MW_PREC_HD float f16_to_f32(std::uint32_t h) {
    const float mag = f32_from_bits((h & 0x7FFFu) << 13) * 0x1.0p112f;
    std::uint32_t u = bits_of(mag);
    if ((h & 0x7C00u) == 0x7C00u) u |= 0x7F800000u;  // inf / NaN: exponent all ones
    return f32_from_bits(u | ((h & 0x8000u) << 16));
}
MW_PREC_HD float f16_lo(std::uint32_t w) { return f16_to_f32(w & 0xFFFFu); }
MW_PREC_HD float f16_hi(std::uint32_t w) { return f16_to_f32(w >> 16); }

// --- small integers through the 2^23 trick --------------------------------------
constexpr float kMagic = 8388608.0f;  // 2^23: one unit in the last place is 1.0

// 2^23 + (byte i of w), exactly. On the GPU a single PRMT builds the word.
MW_PREC_HD float magic_byte(std::uint32_t w, int i) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | unsigned(i)));
#else
    return f32_from_bits(0x4B000000u | ((w >> (8 * i)) & 0xFFu));
#endif
}

// Byte i of w read as an int8, as a float: flip the sign bit (b + 128 in
// 0..255), then subtract 2^23 + 128. Exact.
MW_PREC_HD float int8_at(std::uint32_t w, int i) { return magic_byte(w ^ 0x80808080u, i) - (kMagic + 128.0f); }

}  // namespace mw::precision::bits
