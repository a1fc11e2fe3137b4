// The fusion lever's SIMD math (kernels/fusion/simd.hpp) against libm, on
// both ISAs: exp within a few ulp over its clamped range and finite outside
// it, GELU within a few ulp of the tanh formula in double, and the
// interleaved forms (exp_n, gelu_n over N vectors) bit-identical to one
// vector at a time, since the rungs mix them (main loop and tail).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "kernels/fusion/simd.hpp"

namespace {

namespace simd = mw::fusion::simd;

// exp (Gelu = false) or GELU (by a divide when Div) over n floats, one
// vector at a time (mode 0) or eight interleaved (mode 1); n a multiple of
// 8 vectors.
template <bool Gelu, class V, bool Div = false> MW_SIMD_INLINE void apply_rows(const float* x, float* y, long n, int mode) {
    constexpr int W = simd::width<V>;
    for (long i = 0; i < n; i += 8 * W) {
        V v[8];
        for (int k = 0; k < 8; ++k) v[k] = simd::load<V>(x + i + k * W);
        if (mode == 1) {
            if constexpr (Gelu) simd::gelu_n_as<8, Div>(v);
            else simd::exp_n<8>(v);
        } else {
            for (int k = 0; k < 8; ++k) {
                if constexpr (Gelu) simd::gelu_n_as<1, Div>(&v[k]);
                else v[k] = simd::exp(v[k]);
            }
        }
        for (int k = 0; k < 8; ++k) simd::store(y + i + k * W, v[k]);
    }
}

using Fn = void (*)(const float*, float*, long, int);

struct IsaCase {
    const char* name;
    Fn exp, gelu;
    bool (*has)();
};
void PrintTo(const IsaCase& c, std::ostream* os) { *os << c.name; }

const IsaCase kIsas[] = {
    {"avx512", mw::isa::on_avx512<apply_rows<false, simd::f16>>, mw::isa::on_avx512<apply_rows<true, simd::f16>>,
     mw::isa::has_avx512},
    // GELU by a true divide, the form bias_gelu_ln's fused rung takes where it is the faster
    {"avx512_divide", mw::isa::on_avx512<apply_rows<false, simd::f16>>,
     mw::isa::on_avx512<apply_rows<true, simd::f16, true>>, mw::isa::has_avx512},
    {"avx2", mw::isa::on_avx2<apply_rows<false, simd::f8>>, mw::isa::on_avx2<apply_rows<true, simd::f8>>,
     mw::isa::has_avx2},
};

// n points spread over [lo, hi] (a multiple of 128: 8 AVX-512 vectors).
std::vector<float> sweep(float lo, float hi, long n) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) x[std::size_t(i)] = lo + (hi - lo) * float(i) / float(n - 1);
    return x;
}

// |a - b| in units of b's ulp (b in double, the exact value).
double ulps(float a, double b) {
    const double ulp = std::ldexp(1.0, std::ilogb(float(b)) - 23);
    return std::abs(double(a) - b) / ulp;
}

// The largest ulps(y[i], exact(x[i])) - allowed(x[i]) over a sweep, and
// where: `allowed` is what rounding the function's inner argument costs any
// fp32 evaluation (0 for exp itself).
template <class Exact, class Allowed>
std::pair<double, float> worst_ulps(const std::vector<float>& x, const std::vector<float>& y, Exact exact,
                                    Allowed allowed) {
    std::pair<double, float> w{0.0, 0.0f};
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double e = exact(double(x[i]));
        if (e == 0) continue;  // no ulp at 0
        if (const double u = ulps(y[i], e) - allowed(double(x[i])); u > w.first) w = {u, x[i]};
    }
    return w;
}

class SimdMath : public ::testing::TestWithParam<IsaCase> {
protected:
    void SetUp() override {
        if (!GetParam().has()) GTEST_SKIP() << "this CPU has no " << GetParam().name;
    }
};

TEST_P(SimdMath, ExpWithinFourUlpOverItsRange) {
    auto x = sweep(-87.0f, 87.0f, 128 * 1000);
    std::vector<float> y(x.size());
    GetParam().exp(x.data(), y.data(), long(x.size()), 0);
    const auto [worst, at] = worst_ulps(x, y, [](double v) { return std::exp(v); }, [](double) { return 0.0; });
    EXPECT_LE(worst, 4.0) << "at x = " << at;
}

TEST_P(SimdMath, ExpOutsideItsRangeStaysFiniteAndNanStaysNan) {
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> x(128, 0.0f);
    const float probe[] = {-inf, -1e30f, -200.0f, -87.3f, 87.3f, 200.0f, 1e30f, inf};
    for (int i = 0; i < 8; ++i) x[std::size_t(i)] = probe[i];
    x[9] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> y(x.size());
    GetParam().exp(x.data(), y.data(), long(x.size()), 0);
    for (int i = 0; i < 4; ++i) {  // the low side: tiny, non-negative, no NaN
        EXPECT_GE(y[std::size_t(i)], 0.0f) << probe[i];
        EXPECT_LT(y[std::size_t(i)], 1e-37f) << probe[i];
    }
    for (int i = 4; i < 8; ++i) {  // the high side: large and finite (never inf: 1 + exp stays finite)
        EXPECT_TRUE(std::isfinite(y[std::size_t(i)])) << probe[i];
        EXPECT_GT(y[std::size_t(i)], 1e37f) << probe[i];
    }
    EXPECT_FLOAT_EQ(y[8], 1.0f);
    EXPECT_TRUE(std::isnan(y[9])) << "exp(NaN) is NaN on every ISA, got " << y[9];
}

TEST_P(SimdMath, GeluWithinFourUlpOfTheTanhFormBeyondItsArgumentsRounding) {
    auto x = sweep(-9.0f, 9.0f, 128 * 1000);
    std::vector<float> y(x.size());
    GetParam().gelu(x.data(), y.data(), long(x.size()), 0);
    // x * sigmoid(z), z = 2 sqrt(2/pi) (x + 0.044715 x^3), in double (1 + tanh
    // would cancel for x << 0). The fp32 z takes five roundings (up to half
    // an ulp each: 2.5 ulps of z), and exp(-z) turns a relative error e of z
    // into |z| e of the result: allow 3|z| ulps for it.
    auto z = [](double v) { return 2 * std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v); };
    const auto [worst, at] = worst_ulps(
        x, y, [&](double v) { return v / (1.0 + std::exp(-z(v))); }, [&](double v) { return 3 * std::abs(z(v)); });
    EXPECT_LE(worst, 4.0) << "at x = " << at;
    // Far tails: x itself above, (-)0 below, nothing NaN.
    std::vector<float> t(128, 0.0f), yt(128);
    t[0] = 100.0f, t[1] = -100.0f, t[2] = 5000.0f, t[3] = -5000.0f;
    GetParam().gelu(t.data(), yt.data(), 128, 0);
    EXPECT_FLOAT_EQ(yt[0], 100.0f);
    EXPECT_FLOAT_EQ(yt[2], 5000.0f);
    EXPECT_LE(std::abs(yt[1]), 1e-30f);
    EXPECT_LE(std::abs(yt[3]), 1e-30f);
}

TEST_P(SimdMath, InterleavedFormsAreBitIdentical) {
    auto x = sweep(-60.0f, 60.0f, 128 * 97);
    std::vector<float> one(x.size()), eight(x.size());
    for (auto fn : {GetParam().exp, GetParam().gelu}) {
        fn(x.data(), one.data(), long(x.size()), 0);
        fn(x.data(), eight.data(), long(x.size()), 1);
        for (std::size_t i = 0; i < x.size(); ++i)
            ASSERT_EQ(one[i], eight[i]) << (fn == GetParam().exp ? "exp" : "gelu") << " at x = " << x[i];
    }
}

INSTANTIATE_TEST_SUITE_P(BothIsas, SimdMath, ::testing::ValuesIn(kIsas),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
