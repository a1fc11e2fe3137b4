// The quantizers (kernels/precision/quant.hpp): dequantize(quantize(w))
// equals an independent scalar re-derivation exactly, stays within the stated
// per-weight bound, the effective-bits accounting says what it counts, and
// group sizes the kernels cannot use are refused with a clear message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "harness/inputs.hpp"
#include "kernels/precision/quant.hpp"

namespace {

using namespace mw::precision;

std::vector<float> weights(std::int64_t n_out, std::int64_t n_in, std::uint64_t seed) {
    mw::Buffer b = mw::Buffer::make("W", mw::DType::f32, std::size_t(n_out * n_in));
    mw::fill_normal(b, seed, 0.02);
    return {b.as<float>(), b.as<float>() + b.count};
}

// The textbook formulas, written again without the library's helpers.
float expect_int4(const float* w, std::int64_t n, std::int64_t j, bool asym) {
    float lo = *std::min_element(w, w + n), hi = *std::max_element(w, w + n);
    if (!asym) {
        const float amax = std::max(-lo, hi);
        const float s = mw::f16_to_f32(mw::f32_to_f16(amax > 0 ? amax / 7.0f : 1.0f));  // all-zero group: s = 1
        const float q = std::clamp(std::nearbyint(w[j] * (1.0f / s)), -7.0f, 7.0f);
        return s * ((q + 8.0f) - 8.0f);
    }
    const float s = mw::f16_to_f32(mw::f32_to_f16(hi > lo ? (hi - lo) / 15.0f : 1.0f));  // constant group: s = 1
    const float z = mw::f16_to_f32(mw::f32_to_f16(-lo / s));
    const float q = std::clamp(std::nearbyint(w[j] * (1.0f / s) + z), 0.0f, 15.0f);
    return s * (q - z);
}

class Int4RoundTrip : public testing::TestWithParam<std::tuple<int, bool, int>> {};
TEST_P(Int4RoundTrip, ExactAgainstScalarFormulaAndWithinBound) {
    const auto [G, asym, n_in] = GetParam();
    const std::int64_t n_out = 5;
    auto W = weights(n_out, n_in, 11);
    const QMatrix m = quantize({Format::int4, G, asym}, W.data(), n_out, n_in);
    std::vector<float> row(n_in);
    for (std::int64_t i = 0; i < n_out; ++i) {
        dequantize_row(m, i, row.data());
        for (std::int64_t j = 0; j < n_in; ++j) {
            const std::int64_t g0 = j / G * G, gn = std::min<std::int64_t>(G, n_in - g0);
            const float want = expect_int4(W.data() + i * n_in + g0, gn, j - g0, asym);
            ASSERT_EQ(row[j], want) << "W[" << i << "][" << j << "] (exact round trip)";
            ASSERT_LE(std::fabs(row[j] - W[i * n_in + j]), error_bound_at(m, i, j, W[i * n_in + j]))
                << "W[" << i << "][" << j << "] outside s/2";
        }
    }
}
INSTANTIATE_TEST_SUITE_P(Groups, Int4RoundTrip,
                         testing::Combine(testing::Values(32, 64, 128), testing::Bool(),
                                          testing::Values(1, 7, 33, 127, 129, 256)));

// Rows whose scale is exactly 1 (int4: largest magnitude 7, or a range of
// 15 from 0; int8: 127), so that w / s lands on halves: every tie rounds to
// the even neighbour (2.5 -> 2, -0.5 -> -0, 6.5 -> 6), as nearbyint rounds.
// The asymmetric rows' least weight is a zero of either sign, the first
// one's: the zero-point is -lo / s, and its fp16 bits keep lo's sign flipped.
TEST(Int4RoundTrip, TiesRoundToEvenAndTheFirstZeroSetsTheZeroPoint) {
    const std::vector<float> halves = {0.5f, 1.5f, 2.5f, 3.5f, -0.5f, -1.5f, -2.5f, 4.5f, 5.5f, 6.5f, -6.5f, 7.0f};
    for (bool asym : {false, true}) {
        for (float first_zero : {0.0f, -0.0f}) {
            std::vector<float> W(64);
            for (std::size_t j = 0; j < W.size(); ++j) {
                const float h = halves[j % halves.size()];
                W[j] = asym ? std::fabs(h) + 7.0f : h;  // asym: 7.5 .. 14, ties still
            }
            if (asym) {
                W[3] = first_zero, W[40] = -first_zero, W[50] = 15.0f;  // lo = the first zero, hi - lo = 15
                W[9] = 0.5f, W[20] = 2.5f;
            }
            const QMatrix m = quantize({Format::int4, 64, asym}, W.data(), 1, 64);
            for (std::int64_t j = 0; j < 64; ++j)
                ASSERT_EQ(dequant_at(m, 0, j), expect_int4(W.data(), 64, j, asym)) << "W[" << j << "] = " << W[j];
            if (asym) {
                const float lo = *std::min_element(W.begin(), W.end());  // the first of the least
                EXPECT_EQ(m.zeros.as<std::uint16_t>()[0], mw::f32_to_f16(-lo / 1.0f))
                    << "zero-point of a group whose first zero is " << (std::signbit(first_zero) ? "-0" : "+0");
            }
        }
    }
}

TEST(Int8RoundTrip, PerChannelTiesRoundToEven) {
    const std::vector<float> w = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 126.5f, -126.5f, -127.0f, 3.25f, 64.5f};
    const QMatrix m = quantize({Format::int8_channel}, w.data(), 1, std::int64_t(w.size()));
    for (std::size_t j = 0; j < w.size(); ++j)
        EXPECT_EQ(dequant_at(m, 0, std::int64_t(j)), std::nearbyint(w[j])) << "w = " << w[j];
}

TEST(Int8RoundTrip, PerChannelExactAndWithinBound) {
    for (std::int64_t n_in : {1, 7, 33, 127, 129}) {
        auto W = weights(3, n_in, 5);
        const QMatrix m = quantize({Format::int8_channel}, W.data(), 3, n_in);
        for (std::int64_t i = 0; i < 3; ++i) {
            float amax = 0;
            for (std::int64_t j = 0; j < n_in; ++j) amax = std::max(amax, std::fabs(W[i * n_in + j]));
            const float s = amax / 127.0f;
            for (std::int64_t j = 0; j < n_in; ++j) {
                const float w = W[i * n_in + j];
                const float want = s * std::clamp(std::nearbyint(w * (1.0f / s)), -127.0f, 127.0f);
                ASSERT_EQ(dequant_at(m, i, j), want);
                ASSERT_LE(std::fabs(dequant_at(m, i, j) - w), error_bound_at(m, i, j, w));
            }
        }
    }
}

TEST(HalfRoundTrip, Bf16AndFp16WithinHalfUlp) {
    auto W = weights(2, 129, 3);
    for (Format f : {Format::bf16, Format::f16}) {
        const QMatrix m = quantize({f}, W.data(), 2, 129);
        for (std::int64_t j = 0; j < 2 * 129; ++j) {
            const float w = W[j], got = dequant_at(m, j / 129, j % 129);
            ASSERT_EQ(got, f == Format::bf16 ? mw::bf16_to_f32(mw::f32_to_bf16(w)) : mw::f16_to_f32(mw::f32_to_f16(w)));
            ASSERT_LE(std::fabs(got - w), error_bound_at(m, j / 129, j % 129, w));
        }
    }
}

TEST(EffectiveBits, CountsPayloadAndPerGroupMetadata) {
    EXPECT_DOUBLE_EQ(effective_bits({Format::int4, 64, false}, 8192), 4.25);  // fp16 scale / 64
    EXPECT_DOUBLE_EQ(effective_bits({Format::int4, 64, true}, 8192), 4.5);    // + fp16 zero-point
    EXPECT_DOUBLE_EQ(effective_bits({Format::int4, 32, false}, 8192), 4.5);
    EXPECT_DOUBLE_EQ(effective_bits({Format::int4, 128, false}, 8192), 4.125);
    EXPECT_DOUBLE_EQ(effective_bits({Format::int8_channel}, 8192), 8 + 32.0 / 8192);
    EXPECT_DOUBLE_EQ(effective_bits({Format::bf16}, 8192), 16);
    // The stored bytes agree with the accounting when G divides n_in.
    auto W = weights(4, 256, 1);
    EXPECT_DOUBLE_EQ(quantize({Format::int4, 64, true}, W.data(), 4, 256).bytes(), 4 * 256 * 4.5 / 8);
}

TEST(GroupSize, NonMultipleOf32IsRefusedClearly) {
    auto W = weights(2, 100, 1);
    for (int g : {0, -32, 16, 48, 100}) {
        try {
            quantize({Format::int4, g, false}, W.data(), 2, 100);
            FAIL() << "group " << g << " accepted";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(std::to_string(g)), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
        }
    }
}

TEST(GroupSize, NonDividingGroupIsHandledWithAPartialLastGroup) {
    auto W = weights(1, 100, 9);  // groups of 64: [0, 64) and a partial [64, 100)
    const QMatrix m = quantize({Format::int4, 64, false}, W.data(), 1, 100);
    EXPECT_EQ(m.ld, 128);
    EXPECT_EQ(m.groups_per_row, 2);
    float amax = 0;
    for (int j = 64; j < 100; ++j) amax = std::max(amax, std::fabs(W[j]));
    EXPECT_EQ(mw::f16_to_f32(m.scales.as<std::uint16_t>()[1]), mw::f16_to_f32(mw::f32_to_f16(amax / 7.0f)));
}

}  // namespace
