// Seeded, deterministic inputs: the same (seed, buffer name, index) gives the
// same value on every run, thread count and backend, because each element is a
// hash of its index rather than a step of a sequential generator.
#pragma once

#include <cstdint>
#include <string_view>

#include "harness/registry.hpp"

namespace mw {

std::uint64_t mix_seed(std::uint64_t seed, std::string_view stream_name);
// Uniform in [lo, hi), rounded to the buffer's dtype (f32, f64, f16, bf16, i8, i32).
void fill_uniform(Buffer& b, std::uint64_t seed, double lo, double hi);
// Standard normal (Box-Muller on the hashed pair), times `scale`.
void fill_normal(Buffer& b, std::uint64_t seed, double scale = 1.0);
// Fill with NaN (floats) or 0x7F..(integers): what a variant must overwrite.
void poison(Buffer& b);

// Element access as double, for checking and oracles.
double load_as_double(const Buffer& b, std::size_t i);
void store_from_double(Buffer& b, std::size_t i, double v);

// Round-trip conversions used by fp16/bf16 storage.
std::uint16_t f32_to_bf16(float f);   // round to nearest even
float bf16_to_f32(std::uint16_t h);
std::uint16_t f32_to_f16(float f);    // round to nearest even
float f16_to_f32(std::uint16_t h);

}  // namespace mw
