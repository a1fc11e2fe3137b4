// Every GEMM variant against the fp64 oracle: odd shapes first (1, 7, 33,
// 127, 129), then 1000 and non-square ones, including K = 1, N = 1 and an N
// just past one column block of the packed rungs.
// CUDA variants run only where a GPU exists and are SKIPPED otherwise;
// cuda-emu variants run everywhere (the CUDA sources executed on the CPU).
#include <gtest/gtest.h>

#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "tests/oracle_cases.hpp"

namespace {

using mw::test::Case;
using mw::test::check_case;
using mw::test::fixture_for;
using mw::test::Fixture;

// The emulator executes each CUDA thread as a fiber: keep its shapes small.
std::vector<mw::Shape> shapes(const std::string& /*op*/, bool emu) {
    std::vector<mw::Shape> s;
    auto add = [&](std::int64_t m, std::int64_t n, std::int64_t k) { s.push_back({{{"m", m}, {"n", n}, {"k", k}}}); };
    for (int n : {1, 7, 33, 127, 129}) add(n, n, n);
    add(129, 7, 33);
    add(33, 257, 7);
    add(1, 257, 129);
    add(65, 77, 1);
    add(200, 1, 300);
    add(17, 515, 260);
    if (!emu) {
        add(1000, 1000, 1000);
        add(1000, 333, 517);
        add(65, 1057, 300);  // N past one NC block (1024) of rungs 3-4, by 33 columns: a second, ragged block
        add(13, 70, 1537);   // rung 4's K in three slices of at most 768 (C summed over slices), 6-row tiles + 1 row
    }
    return s;
}

// Every variant against the oracle, and (check_case) no worse than 2x the
// naive rung's error: reordered sums may differ from naive, not be much worse.
std::vector<Case> cases(mw::Backend b) { return mw::test::cases({"gemm"}, b, shapes); }
MW_ORACLE_SUITES(Gemm, MatchesOracle, cases, check_case);

// The AVX2 fallback of the SIMD rungs must be correct too, not only the
// AVX-512 path this machine picks (MEMWALL_ISA=avx2 forces it).
TEST(GemmCpuIsa, Avx2FallbackMatchesOracle) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2+FMA";
    // Every rung once on the default ISA first: a rung that kept the ISA it
    // chose on its first call would then mix AVX-512 tiles with AVX2 panels.
    Fixture& warm = fixture_for("gemm", {{{"m", 33}, {"n", 70}, {"k", 129}}});
    for (auto* v : mw::variants_of("gemm", mw::Backend::cpu))
        if (v->role != mw::Role::vendor)
            EXPECT_TRUE(mw::check_variant(*mw::find_op("gemm"), *v, warm.problem, warm.oracle).correct) << v->name;
    setenv("MEMWALL_ISA", "avx2", 1);
    for (auto* v : mw::variants_of("gemm", mw::Backend::cpu)) {
        if (v->role == mw::Role::vendor) continue;
        auto avx2_shapes = shapes("gemm", true);
        avx2_shapes.push_back({{{"m", 65}, {"n", 1057}, {"k", 300}}});  // two column blocks, the second ragged
        avx2_shapes.push_back({{{"m", 13}, {"n", 70}, {"k", 1537}}});   // rung 4: four K slices of at most 512, ragged tiles
        for (auto& s : avx2_shapes) {
            Fixture& f = fixture_for("gemm", s);
            auto r = mw::check_variant(*mw::find_op("gemm"), *v, f.problem, f.oracle);
            EXPECT_TRUE(r.correct) << v->name << " at " << s.str() << ": " << r.message;
        }
    }
    unsetenv("MEMWALL_ISA");
}

}  // namespace
