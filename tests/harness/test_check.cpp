// The tolerance model: each rule must reject the failure it exists for and
// accept a sound reordering.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "harness/check.hpp"
#include "harness/inputs.hpp"

namespace {

using mw::Buffer;
using mw::DType;

// A dot-product-like problem: out[i] = sum_k x[i][k] * y[i][k] with L terms.
struct Sums {
    std::vector<double> exact;            // fp64 oracle
    std::vector<std::vector<float>> a, b;
};

Sums make_sums(int n, int L, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1, 1);
    Sums s;
    s.a.assign(n, std::vector<float>(L));
    s.b.assign(n, std::vector<float>(L));
    for (int i = 0; i < n; ++i) {
        double acc = 0;
        for (int k = 0; k < L; ++k) {
            s.a[i][k] = u(rng);
            s.b[i][k] = u(rng);
            acc += double(s.a[i][k]) * s.b[i][k];
        }
        s.exact.push_back(acc);
    }
    return s;
}

Buffer sequential_fp32(const Sums& s) {
    Buffer out = Buffer::make("out", DType::f32, s.exact.size(), {std::int64_t(s.exact.size())});
    for (std::size_t i = 0; i < s.exact.size(); ++i) {
        float acc = 0;
        for (std::size_t k = 0; k < s.a[i].size(); ++k) acc += s.a[i][k] * s.b[i][k];
        out.as<float>()[i] = acc;
    }
    return out;
}

// Pairwise/blocked summation in 16 interleaved partial sums, as a SIMD kernel does.
Buffer reordered_fp32(const Sums& s) {
    Buffer out = Buffer::make("out", DType::f32, s.exact.size());
    for (std::size_t i = 0; i < s.exact.size(); ++i) {
        float part[16] = {};
        for (std::size_t k = 0; k < s.a[i].size(); ++k) part[k % 16] += s.a[i][k] * s.b[i][k];
        float acc = 0;
        for (float p : part) acc += p;
        out.as<float>()[i] = acc;
    }
    return out;
}

constexpr int kN = 257, kL = 1024;

TEST(Tolerance, AcceptsSequentialFp32Sum) {
    auto s = make_sums(kN, kL, 1);
    auto r = mw::check_close(sequential_fp32(s), s.exact, DType::f32, kL);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_GT(r.rel_fro, 0.0);  // fp32 is not exact: the check is not vacuous
}

TEST(Tolerance, AcceptsCorrectlyReorderedSum) {
    auto s = make_sums(kN, kL, 2);
    auto naive = mw::check_close(sequential_fp32(s), s.exact, DType::f32, kL);
    auto r = mw::check_close(reordered_fp32(s), s.exact, DType::f32, kL);
    EXPECT_TRUE(r.ok) << r.message;
    mw::apply_baseline_rule(r, naive.rel_fro, 2.0, DType::f32, kL);
    EXPECT_TRUE(r.ok) << r.message;
}

TEST(Tolerance, RejectsAllZeroOutput) {
    auto s = make_sums(kN, kL, 3);
    Buffer zeros = Buffer::make("out", DType::f32, kN);
    std::fill_n(zeros.as<float>(), kN, 0.0f);
    auto r = mw::check_close(zeros, s.exact, DType::f32, kL);
    EXPECT_FALSE(r.ok);
    EXPECT_NEAR(r.rel_fro, 1.0, 1e-12);
}

TEST(Tolerance, RejectsAllZeroEvenWithHugeReductionLength) {
    // A loose element-wise tolerance (huge L) must not let zeros through:
    // the Frobenius floor is capped by the same rtol, which stays < 1 here.
    auto s = make_sums(33, 64, 4);
    Buffer zeros = Buffer::make("out", DType::f32, 33);
    std::fill_n(zeros.as<float>(), 33, 0.0f);
    EXPECT_FALSE(mw::check_close(zeros, s.exact, DType::f32, 1e6).ok);
}

TEST(Tolerance, RejectsSingleNaN) {
    auto s = make_sums(kN, kL, 5);
    Buffer out = sequential_fp32(s);
    out.as<float>()[100] = std::numeric_limits<float>::quiet_NaN();
    auto r = mw::check_close(out, s.exact, DType::f32, kL);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.nonfinite, 1u);
    ASSERT_FALSE(r.worst.empty());
    EXPECT_EQ(r.worst.front().index, 100u);
    EXPECT_NE(r.message.find("out[100]"), std::string::npos) << r.message;
}

TEST(Tolerance, RejectsInfWhereReferenceIsFinite) {
    auto s = make_sums(7, 16, 6);
    Buffer out = sequential_fp32(s);
    out.as<float>()[3] = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(mw::check_close(out, s.exact, DType::f32, 16).ok);
}

TEST(Tolerance, RejectsOneMissingTermInOneElement) {
    // A real bug: one product left out of one sum (an off-by-one in a tail loop).
    auto s = make_sums(kN, kL, 7);
    Buffer out = sequential_fp32(s);
    const int i = 200;
    out.as<float>()[i] -= s.a[i][kL - 1] * s.b[i][kL - 1];
    if (std::fabs(s.a[i][kL - 1] * s.b[i][kL - 1]) < 0.05f) GTEST_SKIP() << "term too small for this seed";
    auto r = mw::check_close(out, s.exact, DType::f32, kL);
    EXPECT_FALSE(r.ok);
    ASSERT_FALSE(r.worst.empty());
    EXPECT_EQ(r.worst.front().index, std::size_t(i));
}

TEST(Tolerance, RejectsHalfPrecisionArithmeticWhereFp32IsRequired) {
    auto s = make_sums(kN, kL, 8);
    Buffer out = Buffer::make("out", DType::f32, kN);
    for (int i = 0; i < kN; ++i) {
        _Float16 acc = 0;
        for (int k = 0; k < kL; ++k) acc += static_cast<_Float16>(s.a[i][k]) * static_cast<_Float16>(s.b[i][k]);
        out.as<float>()[i] = static_cast<float>(acc);
    }
    EXPECT_FALSE(mw::check_close(out, s.exact, DType::f32, kL).ok);
}

TEST(Tolerance, BaselineRuleRejectsMuchWorseReordering) {
    auto s = make_sums(kN, kL, 9);
    auto naive = mw::check_close(sequential_fp32(s), s.exact, DType::f32, kL);
    // The rule compares with the naive error, floored at u*sqrt(L) so that a
    // lucky naive run doesn't make the bar unreachable.
    const double bar = std::max(naive.rel_fro, mw::unit_roundoff(DType::f32) * std::sqrt(double(kL)));
    mw::CheckResult worse;
    worse.rel_fro = 3 * bar;
    mw::apply_baseline_rule(worse, naive.rel_fro, 2.0, DType::f32, kL);
    EXPECT_FALSE(worse.ok);
    mw::CheckResult similar;
    similar.rel_fro = 1.5 * bar;
    mw::apply_baseline_rule(similar, naive.rel_fro, 2.0, DType::f32, kL);
    EXPECT_TRUE(similar.ok) << similar.message;
}

TEST(Tolerance, DTypeDefaultsScale) {
    EXPECT_GT(mw::default_tolerance(DType::bf16, 64, 1).rtol, mw::default_tolerance(DType::f16, 64, 1).rtol);
    EXPECT_GT(mw::default_tolerance(DType::f16, 64, 1).rtol, mw::default_tolerance(DType::f32, 64, 1).rtol);
    EXPECT_NEAR(mw::default_tolerance(DType::f32, 400, 1).rtol / mw::default_tolerance(DType::f32, 100, 1).rtol, 2.0,
                1e-12);
}

TEST(ExactMode, AcceptsEqualRejectsOneDifference) {
    Buffer out = Buffer::make("tokens", DType::i32, 5);
    std::vector<double> ref = {1, 2, 3, 4, 5};
    for (int i = 0; i < 5; ++i) out.as<std::int32_t>()[i] = i + 1;
    EXPECT_TRUE(mw::check_exact(out, ref).ok);
    out.as<std::int32_t>()[4] = 6;
    auto r = mw::check_exact(out, ref);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.mismatches, 1u);
}

TEST(ElementName, UsesDims) {
    Buffer b = Buffer::make("C", DType::f32, 12, {3, 4});
    EXPECT_EQ(mw::element_name(b, 7), "C[1][3]");
}

TEST(Inputs, DeterministicAndSeedDependent) {
    Buffer a = Buffer::make("A", DType::f32, 1000), b = Buffer::make("A", DType::f32, 1000),
           c = Buffer::make("A", DType::f32, 1000);
    mw::fill_uniform(a, 42, -1, 1);
    mw::fill_uniform(b, 42, -1, 1);
    mw::fill_uniform(c, 43, -1, 1);
    EXPECT_EQ(0, std::memcmp(a.data.get(), b.data.get(), a.size_bytes()));
    EXPECT_NE(0, std::memcmp(a.data.get(), c.data.get(), a.size_bytes()));
    for (float v : a.span<float>()) {
        EXPECT_GE(v, -1.0f);
        EXPECT_LT(v, 1.0f);
    }
}

TEST(Inputs, Bf16AndF16RoundTrip) {
    for (float f : {1.0f, -2.5f, 0.15625f, 65504.0f}) {
        EXPECT_EQ(mw::f16_to_f32(mw::f32_to_f16(f)), f);
    }
    EXPECT_EQ(mw::bf16_to_f32(mw::f32_to_bf16(1.5f)), 1.5f);
    // Round to nearest even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 in bf16.
    EXPECT_EQ(mw::bf16_to_f32(mw::f32_to_bf16(1.0f + 0x1.0p-8f)), 1.0f);
}

}  // namespace
