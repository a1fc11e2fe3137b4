#include "harness/inputs.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "harness/splitmix.hpp"

namespace mw {

namespace {
double unit(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }  // [0,1)
}  // namespace

std::uint64_t mix_seed(std::uint64_t seed, std::string_view name) {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a of the name, then mixed with the seed
    for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return splitmix64(seed ^ splitmix64(h));
}

std::uint16_t f32_to_bf16(float f) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return static_cast<std::uint16_t>(u >> 16);
}
float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

std::uint16_t f32_to_f16(float f) {
    _Float16 h = static_cast<_Float16>(f);  // IEEE round-to-nearest-even
    return std::bit_cast<std::uint16_t>(h);
}
float f16_to_f32(std::uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }

double load_as_double(const Buffer& b, std::size_t i) {
    switch (b.dtype) {
        case DType::f32: return b.as<float>()[i];
        case DType::f64: return b.as<double>()[i];
        case DType::f16: return f16_to_f32(b.as<std::uint16_t>()[i]);
        case DType::bf16: return bf16_to_f32(b.as<std::uint16_t>()[i]);
        case DType::i8: return b.as<std::int8_t>()[i];
        case DType::u8: return b.as<std::uint8_t>()[i];
        case DType::i32: return b.as<std::int32_t>()[i];
        case DType::i4: {
            std::uint8_t byte = b.as<std::uint8_t>()[i / 2];
            int nib = (i % 2) ? (byte >> 4) : (byte & 0xF);
            return nib >= 8 ? nib - 16 : nib;  // two's-complement nibble, low nibble first
        }
    }
    return 0;
}

void store_from_double(Buffer& b, std::size_t i, double v) {
    switch (b.dtype) {
        case DType::f32: b.as<float>()[i] = static_cast<float>(v); return;
        case DType::f64: b.as<double>()[i] = v; return;
        case DType::f16: b.as<std::uint16_t>()[i] = f32_to_f16(static_cast<float>(v)); return;
        case DType::bf16: b.as<std::uint16_t>()[i] = f32_to_bf16(static_cast<float>(v)); return;
        case DType::i8: b.as<std::int8_t>()[i] = static_cast<std::int8_t>(std::lround(v)); return;
        case DType::u8: b.as<std::uint8_t>()[i] = static_cast<std::uint8_t>(std::lround(v)); return;
        case DType::i32: b.as<std::int32_t>()[i] = static_cast<std::int32_t>(std::lround(v)); return;
        case DType::i4: {
            int q = static_cast<int>(std::lround(v)) & 0xF;
            std::uint8_t& byte = b.as<std::uint8_t>()[i / 2];
            byte = (i % 2) ? static_cast<std::uint8_t>((byte & 0x0F) | (q << 4))
                           : static_cast<std::uint8_t>((byte & 0xF0) | q);
            return;
        }
    }
}

void fill_uniform(Buffer& b, std::uint64_t seed, double lo, double hi) {
    const std::uint64_t s = mix_seed(seed, b.name);
    const auto n = static_cast<std::int64_t>(b.count);
    if (b.dtype == DType::f32) {  // most inputs: store_from_double's own case, without its switch per element
        float* p = b.as<float>();
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(lo + (hi - lo) * unit(splitmix64(s + i)));
        return;
    }
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) store_from_double(b, i, lo + (hi - lo) * unit(splitmix64(s + i)));
}

void fill_normal(Buffer& b, std::uint64_t seed, double scale) {
    const std::uint64_t s = mix_seed(seed, b.name);
    const auto n = static_cast<std::int64_t>(b.count);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
        double u1 = unit(splitmix64(s + 2 * i)), u2 = unit(splitmix64(s + 2 * i + 1));
        double r = std::sqrt(-2.0 * std::log1p(-u1));
        store_from_double(b, i, scale * r * std::cos(2 * M_PI * u2));
    }
}

void poison(Buffer& b) {
    const bool is_float = b.dtype == DType::f32 || b.dtype == DType::f64 || b.dtype == DType::f16 ||
                          b.dtype == DType::bf16;
    // 0xFF bytes are a NaN in every float format; integers get 0x7F.. (an unlikely value).
    std::memset(b.data.get(), is_float ? 0xFF : 0x7F, b.size_bytes());
}

}  // namespace mw
