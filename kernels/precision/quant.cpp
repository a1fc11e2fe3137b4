// Scalar quantizers and dequantizers for the precision lever (see quant.hpp
// for the formats, the effective-bits accounting and the error bound).
#include "kernels/precision/quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "harness/inputs.hpp"

namespace mw::precision {

std::string describe(const QuantSpec& q) {
    switch (q.format) {
        case Format::f32: return "fp32";
        case Format::bf16: return "bf16";
        case Format::f16: return "fp16";
        case Format::int8_channel: return "int8 per-channel (fp32 scale per row)";
        case Format::int8_tensor: return "int8 per-tensor (one fp32 scale)";
        case Format::int4:
            return "int4 g" + std::to_string(q.group) + (q.asym ? " asym (fp16 scale + fp16 zero-point)" : " sym (fp16 scale)");
    }
    return "?";
}

double effective_bits(const QuantSpec& q, std::int64_t n_in) {
    switch (q.format) {
        case Format::f32: return 32;
        case Format::bf16:
        case Format::f16: return 16;
        case Format::int8_channel: return 8 + 32.0 / double(n_in);
        case Format::int8_tensor: return 8;
        case Format::int4: return 4 + (q.asym ? 32.0 : 16.0) / q.group;
    }
    return 0;
}

std::int64_t padded_cols(const QuantSpec& q, std::int64_t n_in) {
    const std::int64_t unit = q.format == Format::int4 ? q.group : 32;
    return (n_in + unit - 1) / unit * unit;
}

double QMatrix::bytes() const {
    return double(payload.size_bytes()) + double(scales.size_bytes()) + double(zeros.size_bytes());
}

namespace {

// x rounded to an integer, to nearest with ties to even (rint in the default
// rounding mode), and clamped to [lo, hi] (integers, |lo|, |hi| < 2^21).
// Clamped first to [lo - 1/4, hi + 1/4], which rounds to [lo, hi] and changes
// no in-range result; then 1.5 * 2^23 added and taken away: the sum has no
// bits below the units, so the addition does the rounding. Plain arithmetic,
// which the compiler keeps as written (no -ffast-math) and vectorizes, where
// rint and nearbyint are a test and a branch or a call per element.
// A NaN (0 times the infinite inverse of a scale that underflowed to 0 in
// fp16) counts as 0.
inline int round_clamped(float x, float lo, float hi) {
    constexpr float kShift = 12582912.0f;  // 1.5 * 2^23
    x = x == x ? x : 0.0f;
    const float c = std::min(std::max(x, lo - 0.25f), hi + 0.25f);
    return int((c + kShift) - kShift);
}

// The least and the greatest of w[0, n), n >= 1, as a scan from the left
// finds them (the first of equal values: -0 or +0 where the least is a
// zero), in 4 chains: a scan's one chain of min and max waits on each
// comparison, and was most of the quantizer's time.
std::pair<float, float> min_max(const float* w, std::int64_t n) {
    float lo[4] = {w[0], w[0], w[0], w[0]}, hi[4] = {w[0], w[0], w[0], w[0]};
    std::int64_t j = 0;
    for (; j + 4 <= n; j += 4)
        for (int k = 0; k < 4; ++k) lo[k] = std::min(lo[k], w[j + k]), hi[k] = std::max(hi[k], w[j + k]);
    for (; j < n; ++j) lo[0] = std::min(lo[0], w[j]), hi[0] = std::max(hi[0], w[j]);
    float l = std::min(std::min(lo[0], lo[1]), std::min(lo[2], lo[3]));
    float h = std::max(std::max(hi[0], hi[1]), std::max(hi[2], hi[3]));
    // Equal values have equal bits but for the zeros: the scan's is the first.
    if (l == 0) l = *std::find(w, w + n, l);
    if (h == 0) h = *std::find(w, w + n, h);
    return {l, h};
}

void quantize_int8_row(const float* w, std::int64_t n, std::int8_t* q, float* scale) {
    float amax = 0;
    for (std::int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(w[j]));
    const float s = amax > 0 ? amax / 127.0f : 1.0f;
    const float inv = 1.0f / s;
    for (std::int64_t j = 0; j < n; ++j) q[j] = std::int8_t(round_clamped(w[j] * inv, -127, 127));
    *scale = s;
}

// One group of an int4 row: its n codes (0..15, 8 is a zero weight in the
// symmetric code) into q[0, n), its fp16 scale (and zero-point) into *s16
// (*z16).
void quantize_int4_group(const float* w, std::int64_t n, bool asym, std::uint16_t* s16, std::uint16_t* z16,
                         std::uint8_t* q) {
    const auto [lo, hi] = min_max(w, n);
    if (!asym) {
        const float amax = std::max(std::fabs(lo), std::fabs(hi));
        *s16 = f32_to_f16(amax > 0 ? amax / 7.0f : 1.0f);
        const float inv = 1.0f / f16_to_f32(*s16);
        for (std::int64_t j = 0; j < n; ++j) q[j] = std::uint8_t(round_clamped(w[j] * inv, -7, 7) + 8);
        return;
    }
    const float range = hi - lo;
    *s16 = f32_to_f16(range > 0 ? range / 15.0f : 1.0f);
    const float s = f16_to_f32(*s16);
    *z16 = f32_to_f16(-lo / s);
    const float z = f16_to_f32(*z16), inv = 1.0f / s;
    for (std::int64_t j = 0; j < n; ++j) q[j] = std::uint8_t(round_clamped(w[j] * inv + z, 0, 15));
}

// One row of int4 W (n_in weights) into `row` (groups x group / 2 bytes,
// padding nibbles already 8) and its groups' scales (and zero-points);
// `codes` holds one group's codes.
void quantize_int4_row(const QuantSpec& q, const float* w, std::int64_t n_in, std::int64_t groups,
                       std::uint8_t* row, std::uint16_t* scales, std::uint16_t* zeros, std::uint8_t* codes) {
    for (std::int64_t g = 0; g < groups; ++g) {
        const std::int64_t c0 = g * q.group;
        if (c0 >= n_in) {  // a whole padded group: scale 1, zero-point 8
            scales[g] = f32_to_f16(1.0f);
            if (q.asym) zeros[g] = f32_to_f16(8.0f);
            continue;
        }
        const std::int64_t n = std::min<std::int64_t>(q.group, n_in - c0);
        quantize_int4_group(w + c0, n, q.asym, scales + g, q.asym ? zeros + g : nullptr, codes);
        // Chunks of 32 columns, 16 bytes each: byte k holds column k (low
        // nibble) and column k + 16 (high); a part chunk's missing columns
        // are the padding's 8.
        const std::int64_t chunks = (n + 31) / 32;
        std::fill(codes + n, codes + chunks * 32, std::uint8_t(8));
        std::uint8_t* out = row + c0 / 2;
        for (std::int64_t c = 0; c < chunks; ++c)
            for (int k = 0; k < 16; ++k) out[c * 16 + k] = std::uint8_t(codes[c * 32 + k] | (codes[c * 32 + 16 + k] << 4));
    }
}

}  // namespace

QMatrix quantize(const QuantSpec& q, const float* W, std::int64_t n_out, std::int64_t n_in) {
    if (q.format == Format::int4 && (q.group <= 0 || q.group % 32 != 0))
        throw std::invalid_argument("int4 group size " + std::to_string(q.group) +
                                    " is not a positive multiple of 32 (the SIMD chunk); use 32, 64, 128, ...");
    QMatrix m;
    m.spec = q;
    m.n_out = n_out;
    m.n_in = n_in;
    m.ld = q.format == Format::f32 ? n_in : padded_cols(q, n_in);
    const std::size_t total = std::size_t(n_out * m.ld);
    switch (q.format) {
        case Format::f32:
            m.payload = Buffer::make("W_f32", DType::f32, total);
            std::memcpy(m.payload.data.get(), W, total * 4);
            break;
        case Format::bf16:
        case Format::f16: {
            const bool bf = q.format == Format::bf16;
            m.payload = Buffer::make(bf ? "W_bf16" : "W_f16", bf ? DType::bf16 : DType::f16, total);
            auto* p = m.payload.as<std::uint16_t>();
            std::fill(p, p + total, 0);
#pragma omp parallel for schedule(static)
            for (std::int64_t i = 0; i < n_out; ++i)
                for (std::int64_t j = 0; j < n_in; ++j) {
                    const float w = W[i * n_in + j];
                    p[i * m.ld + j] = bf ? f32_to_bf16(w) : f32_to_f16(w);
                }
            break;
        }
        case Format::int8_channel: {
            m.payload = Buffer::make("W_i8", DType::i8, total);
            m.scales = Buffer::make("scale_f32", DType::f32, std::size_t(n_out));
            std::memset(m.payload.data.get(), 0, total);
#pragma omp parallel for schedule(static)
            for (std::int64_t i = 0; i < n_out; ++i)
                quantize_int8_row(W + i * n_in, n_in, m.payload.as<std::int8_t>() + i * m.ld, m.scales.as<float>() + i);
            break;
        }
        case Format::int8_tensor: {
            m.payload = Buffer::make("W_i8", DType::i8, total);
            std::memset(m.payload.data.get(), 0, total);
            float amax = 0;
            for (std::int64_t k = 0; k < n_out * n_in; ++k) amax = std::max(amax, std::fabs(W[k]));
            m.tensor_scale = amax > 0 ? amax / 127.0f : 1.0f;
            const float inv = 1.0f / m.tensor_scale;
            auto* p = m.payload.as<std::int8_t>();
            for (std::int64_t i = 0; i < n_out; ++i)
                for (std::int64_t j = 0; j < n_in; ++j)
                    p[i * m.ld + j] = std::int8_t(round_clamped(W[i * n_in + j] * inv, -127, 127));
            break;
        }
        case Format::int4: {
            m.groups_per_row = m.ld / q.group;
            m.payload = Buffer::make("W_i4", DType::u8, total / 2);
            m.scales = Buffer::make("scale_f16", DType::f16, std::size_t(n_out * m.groups_per_row));
            if (q.asym) m.zeros = Buffer::make("zero_f16", DType::f16, std::size_t(n_out * m.groups_per_row));
            // Padding nibbles: 8 (a zero weight in the symmetric code); the
            // kernels multiply them by zero-padded activations either way.
            std::memset(m.payload.data.get(), 0x88, total / 2);
#pragma omp parallel
            {
                std::vector<std::uint8_t> codes(std::size_t(q.group));  // one group's, this thread's
#pragma omp for schedule(static)
                for (std::int64_t i = 0; i < n_out; ++i)
                    quantize_int4_row(q, W + i * n_in, n_in, m.groups_per_row,
                                      m.payload.as<std::uint8_t>() + i * (m.ld / 2),
                                      m.scales.as<std::uint16_t>() + i * m.groups_per_row,
                                      q.asym ? m.zeros.as<std::uint16_t>() + i * m.groups_per_row : nullptr,
                                      codes.data());
            }
            break;
        }
    }
    return m;
}

float dequant_at(const QMatrix& m, std::int64_t i, std::int64_t j) {
    const std::int64_t k = i * m.ld + j;
    switch (m.spec.format) {
        case Format::f32: return m.payload.as<float>()[k];
        case Format::bf16: return bf16_to_f32(m.payload.as<std::uint16_t>()[k]);
        case Format::f16: return f16_to_f32(m.payload.as<std::uint16_t>()[k]);
        case Format::int8_channel: return m.scales.as<float>()[i] * float(m.payload.as<std::int8_t>()[k]);
        case Format::int8_tensor: return m.tensor_scale * float(m.payload.as<std::int8_t>()[k]);
        case Format::int4: {
            const std::int64_t g = i * m.groups_per_row + j / m.spec.group;
            const float s = f16_to_f32(m.scales.as<std::uint16_t>()[g]);
            const float z = m.spec.asym ? f16_to_f32(m.zeros.as<std::uint16_t>()[g]) : 8.0f;
            const float q = float(nibble_at(m.payload.as<std::uint8_t>() + i * (m.ld / 2), j));
            return s * (q - z);
        }
    }
    return 0;
}

void dequantize_row(const QMatrix& m, std::int64_t row, float* out) {
    for (std::int64_t j = 0; j < m.n_in; ++j) out[j] = dequant_at(m, row, j);
}

double error_bound_at(const QMatrix& m, std::int64_t i, std::int64_t j, float w) {
    const double slack = 1.0 + 0x1.0p-6;
    switch (m.spec.format) {
        case Format::f32: return 0;
        case Format::bf16: return 0x1.0p-8 * std::fabs(w);
        case Format::f16: return 0x1.0p-11 * std::fabs(w) + 0x1.0p-25;  // + half the smallest subnormal
        case Format::int8_channel: return 0.5 * m.scales.as<float>()[i] * slack;
        case Format::int8_tensor: return 0.5 * m.tensor_scale * slack;
        case Format::int4: return 0.5 * f16_to_f32(m.scales.as<std::uint16_t>()[i * m.groups_per_row + j / m.spec.group]) * slack;
    }
    return 0;
}

std::string describe(const ActSpec& a) {
    switch (a.round) {
        case ActRound::none: return "x fp32";
        case ActRound::bf16: return "x bf16";
        case ActRound::int8: return "x int8 per block of " + std::to_string(a.block);
    }
    return "?";
}

void quantize_acts_int8(const float* x, std::int64_t n, int block, std::int8_t* q, float* d, std::int32_t* qsum) {
    for (std::int64_t k0 = 0, blk = 0; k0 < n; k0 += block, ++blk) {
        const std::int64_t k1 = std::min<std::int64_t>(n, k0 + block);
        float amax = 0;
        for (std::int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(x[k]));
        const float s = amax / 127.0f, inv = amax > 0 ? 1.0f / s : 0.0f;
        std::int32_t sum = 0;
        for (std::int64_t k = k0; k < k1; ++k) {
            q[k] = std::int8_t(round_clamped(x[k] * inv, -127, 127));
            sum += q[k];
        }
        d[blk] = s;
        qsum[blk] = sum;
    }
}

std::vector<double> rounded_acts(const ActSpec& a, const float* x, std::int64_t b, std::int64_t n) {
    std::vector<double> out(std::size_t(b * n));
    for (std::int64_t bb = 0; bb < b; ++bb) {
        const float* xr = x + bb * n;
        double* o = out.data() + bb * n;
        if (a.round == ActRound::int8) {
            if (a.block <= 0) throw std::invalid_argument("int8 activation block " + std::to_string(a.block) + " must be positive");
            const std::int64_t nblk = (n + a.block - 1) / a.block;
            std::vector<std::int8_t> q(static_cast<std::size_t>(n));
            std::vector<float> d(static_cast<std::size_t>(nblk));
            std::vector<std::int32_t> s(static_cast<std::size_t>(nblk));
            quantize_acts_int8(xr, n, a.block, q.data(), d.data(), s.data());
            for (std::int64_t k = 0; k < n; ++k) o[k] = double(d[k / a.block]) * q[k];
        } else {
            for (std::int64_t k = 0; k < n; ++k) o[k] = a.round == ActRound::bf16 ? bf16_to_f32(f32_to_bf16(xr[k])) : xr[k];
        }
    }
    return out;
}

std::vector<double> act_error_bounds(const ActSpec& a, const float* x, std::int64_t n) {
    std::vector<double> e(std::size_t(n), 0.0);
    for (std::int64_t k0 = 0; k0 < n; k0 += (a.block > 0 ? a.block : n)) {
        const std::int64_t k1 = a.block > 0 ? std::min<std::int64_t>(n, k0 + a.block) : n;
        double amax = 0;
        for (std::int64_t k = k0; k < k1; ++k) amax = std::max(amax, double(std::fabs(x[k])));
        for (std::int64_t k = k0; k < k1; ++k)
            e[k] = a.round == ActRound::int8 ? 0.5 * amax / 127 * (1 + 0x1.0p-10)
                 : a.round == ActRound::bf16 ? 0x1.0p-9 * std::fabs(x[k]) : 0.0;
    }
    return e;
}

}  // namespace mw::precision
