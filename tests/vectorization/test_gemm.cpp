// Every GEMM variant against the fp64 oracle: odd shapes first (1, 7, 33,
// 127, 129), then 1000 and non-square ones, including K = 1 and N = 1.
// CUDA variants run only where a GPU exists and are SKIPPED otherwise;
// cuda-emu variants run everywhere (the CUDA sources executed on the CPU).
#include <gtest/gtest.h>

#include <map>

#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"

namespace {

struct Case {
    const mw::Variant* variant;
    mw::Shape shape;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.variant->name << " (" << mw::to_string(c.variant->backend) << ") at " << c.shape.str(); }

std::vector<mw::Shape> shapes(bool big) {
    std::vector<mw::Shape> s;
    auto add = [&](std::int64_t m, std::int64_t n, std::int64_t k) { s.push_back({{{"m", m}, {"n", n}, {"k", k}}}); };
    for (int n : {1, 7, 33, 127, 129}) add(n, n, n);
    add(129, 7, 33);
    add(33, 257, 7);
    add(1, 257, 129);
    add(65, 77, 1);
    add(200, 1, 300);
    add(17, 515, 260);
    if (big) {
        add(1000, 1000, 1000);
        add(1000, 333, 517);
    }
    return s;
}

std::vector<Case> cases(mw::Backend b) {
    std::vector<Case> out;
    // The emulator executes each CUDA thread as a fiber: keep its shapes small.
    const bool big = b == mw::Backend::cpu;
    for (auto* v : mw::variants_of("gemm", b))
        for (auto& s : shapes(big)) out.push_back({v, s});
    return out;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
    const auto& s = info.param.shape;
    return info.param.variant->name + "_m" + std::to_string(s["m"]) + "_n" + std::to_string(s["n"]) + "_k" +
           std::to_string(s["k"]);
}

// One problem + oracle per shape, shared by all variants (the oracle is the
// expensive part at 1000^3).
struct Fixture {
    mw::Problem problem;
    std::vector<std::vector<double>> oracle;
    double naive_rel_fro = -1;
};

Fixture& fixture_for(const mw::Shape& s) {
    static std::map<std::string, Fixture> cache;
    auto it = cache.find(s.str());
    if (it != cache.end()) return it->second;
    const mw::Op* op = mw::find_op("gemm");
    Fixture f;
    f.problem = op->make_problem(s, mw::DType::f32, 20261122);
    f.oracle = op->oracle(f.problem);
    // The naive CPU rung's error, for the "no worse than 2x naive" rule.
    for (auto* v : mw::variants_of("gemm", mw::Backend::cpu))
        if (v->role == mw::Role::reference) f.naive_rel_fro = mw::check_variant(*op, *v, f.problem, f.oracle).rel_fro;
    return cache.emplace(s.str(), std::move(f)).first->second;
}

void check_case(const Case& c) {
    std::string why;
    if (!mw::runnable_here(*c.variant, &why)) GTEST_SKIP() << c.variant->name << ": " << why;
    const mw::Op* op = mw::find_op("gemm");
    Fixture& f = fixture_for(c.shape);
    auto r = mw::check_variant(*op, *c.variant, f.problem, f.oracle);
    EXPECT_TRUE(r.correct) << r.message;
    // Reordered sums may differ from naive, but not be much worse.
    mw::CheckResult cr;
    cr.rel_fro = r.rel_fro;
    mw::apply_baseline_rule(cr, f.naive_rel_fro, op->check.baseline_factor, mw::DType::f32, double(c.shape["k"]));
    EXPECT_TRUE(cr.ok) << cr.message;
}

class GemmCpu : public testing::TestWithParam<Case> {};
TEST_P(GemmCpu, MatchesOracle) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Variants, GemmCpu, testing::ValuesIn(cases(mw::Backend::cpu)), case_name);

class GemmCuda : public testing::TestWithParam<Case> {};
TEST_P(GemmCuda, MatchesOracle) {
    if (mw::gpu_count() == 0) GTEST_SKIP() << "no GPU: " << mw::gpu_absent_reason();
    check_case(GetParam());
}
INSTANTIATE_TEST_SUITE_P(Variants, GemmCuda, testing::ValuesIn(cases(mw::Backend::cuda)), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GemmCuda);

class GemmEmu : public testing::TestWithParam<Case> {};
TEST_P(GemmEmu, MatchesOracle) { check_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Variants, GemmEmu, testing::ValuesIn(cases(mw::Backend::cuda_emu)), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GemmEmu);

// The AVX2 fallback of the SIMD rungs must be correct too, not only the
// AVX-512 path this machine picks (MEMWALL_ISA=avx2 forces it).
TEST(GemmCpuIsa, Avx2FallbackMatchesOracle) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2+FMA";
    setenv("MEMWALL_ISA", "avx2", 1);
    for (auto* v : mw::variants_of("gemm", mw::Backend::cpu)) {
        if (v->role == mw::Role::vendor) continue;
        for (auto& s : shapes(false)) {
            Fixture& f = fixture_for(s);
            auto r = mw::check_variant(*mw::find_op("gemm"), *v, f.problem, f.oracle);
            EXPECT_TRUE(r.correct) << v->name << " at " << s.str() << ": " << r.message;
        }
    }
    unsetenv("MEMWALL_ISA");
}

}  // namespace
