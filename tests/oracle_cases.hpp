// Shared by the lever suites that check every variant of their ops against
// the op's oracle (tests/vectorization, tests/fusion, tests/layout,
// tests/precision): one parameterized case per (variant, shape), a cached
// problem + oracle per (op, shape), the check itself — the standard tolerance
// plus the 2x-the-naive-rung rule — and MW_ORACLE_SUITES, which makes the
// CPU, CUDA and cuda-emu suites of any op from its shapes.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"

namespace mw::test {

struct Case {
    const mw::Variant* variant;
    mw::Shape shape;
};

inline void PrintTo(const Case& c, std::ostream* os) {
    *os << c.variant->op << "/" << c.variant->name << " (" << mw::to_string(c.variant->backend) << ") at "
        << c.shape.str();
}

inline mw::Shape shape(std::initializer_list<std::pair<const std::string, std::int64_t>> axes) { return {axes}; }

// Every variant of `ops` on backend b, at shapes(op, emulated).
inline std::vector<Case> cases(const std::vector<std::string>& ops, mw::Backend b,
                               const std::function<std::vector<mw::Shape>(const std::string&, bool)>& shapes) {
    std::vector<Case> out;
    for (auto& op : ops)
        for (auto* v : mw::variants_of(op, b))
            for (auto& s : shapes(op, b == mw::Backend::cuda_emu)) out.push_back({v, s});
    return out;
}

inline std::string case_name(const testing::TestParamInfo<Case>& info) {
    std::string n = info.param.variant->op + "_" + info.param.variant->name;
    for (auto& [k, v] : info.param.shape.axes) n += "_" + k + std::to_string(v);
    return n;
}

struct Fixture {
    mw::Problem problem;
    std::vector<std::vector<double>> oracle;
    double naive_rel_fro = -1;
};

// One problem, its oracle and the naive rung's error per (op, shape).
inline Fixture& fixture_for(const std::string& op_name, const mw::Shape& s) {
    static std::map<std::string, Fixture> cache;
    const std::string key = op_name + "/" + s.str();
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    const mw::Op* op = mw::find_op(op_name);
    Fixture f;
    f.problem = op->make_problem(s, mw::DType::f32, 20261122);
    f.oracle = op->oracle(f.problem);
    for (auto* v : mw::variants_of(op_name, mw::Backend::cpu))
        if (v->role == mw::Role::reference) f.naive_rel_fro = mw::check_variant(*op, *v, f.problem, f.oracle).rel_fro;
    return cache.emplace(key, std::move(f)).first->second;
}

// Every CPU variant of op `op_name` (at least `min_variants`) checked against
// the oracle on one problem of shape s; the problem, for the caller's own
// checks of the same outputs.
inline mw::Problem expect_every_cpu_rung_correct(const std::string& op_name, const mw::Shape& s, std::uint64_t seed,
                                                 std::size_t min_variants) {
    const mw::Op* op = mw::find_op(op_name);
    if (!op) {
        ADD_FAILURE() << "no op " << op_name;
        return {};
    }
    mw::Problem p = op->make_problem(s, mw::DType::f32, seed);
    const auto oracle = op->oracle(p);
    const auto variants = mw::variants_of(op_name, mw::Backend::cpu);
    EXPECT_GE(variants.size(), min_variants) << op_name;
    for (const auto* v : variants) {
        const auto r = mw::check_variant(*op, *v, p, oracle);
        EXPECT_TRUE(r.correct) << v->name << " at " << s.str() << ": " << r.message;
    }
    return p;
}

inline void check_case(const Case& c) {
    std::string why;
    if (!mw::runnable_here(*c.variant, &why)) GTEST_SKIP() << c.variant->name << ": " << why;
    const mw::Op* op = mw::find_op(c.variant->op);
    ASSERT_NE(op, nullptr);
    Fixture& f = fixture_for(c.variant->op, c.shape);
    auto r = mw::check_variant(*op, *c.variant, f.problem, f.oracle);
    EXPECT_TRUE(r.correct) << r.message;
    if (c.variant->contract_oracle) return;  // judged by its contract, not against naive's error (as memwall run)
    mw::CheckResult cr;
    cr.rel_fro = r.rel_fro;
    mw::apply_baseline_rule(cr, f.naive_rel_fro, op->check.baseline_factor, mw::DType::f32,
                            op->check.reduction_length(c.shape));
    EXPECT_TRUE(cr.ok) << cr.message;
}

}  // namespace mw::test

// Three parameterized suites over cases_of(backend) (any callable
// mw::Backend -> std::vector<mw::test::Case>), each case checked by
// check(case):
//   Name##Cpu   the CPU variants;
//   Name##Cuda  the CUDA variants, SKIPPED (never passed) without a GPU;
//   Name##Emu   the same CUDA sources run on the CPU by cuda-emu (keep their
//               shapes small: every CUDA thread is a fiber). The ASan stage
//               of scripts/test.sh runs every test whose name has "Emu".
// An empty suite (no variants on that backend in this build) is allowed.
// `(check)(...)`: the parentheses keep argument-dependent lookup from also
// finding mw::test::check_case when a suite passes its own check.
#define MW_ORACLE_SUITES(Name, Test, cases_of, check)                                                     \
    class Name##Cpu : public testing::TestWithParam<mw::test::Case> {};                                  \
    TEST_P(Name##Cpu, Test) { (check)(GetParam()); }                                                       \
    INSTANTIATE_TEST_SUITE_P(Variants, Name##Cpu, testing::ValuesIn(cases_of(mw::Backend::cpu)),         \
                             mw::test::case_name);                                                        \
    GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Name##Cpu);                                             \
    class Name##Cuda : public testing::TestWithParam<mw::test::Case> {};                                 \
    TEST_P(Name##Cuda, Test) {                                                                            \
        if (mw::gpu_count() == 0) GTEST_SKIP() << "no GPU: " << mw::gpu_absent_reason();                  \
        (check)(GetParam());                                                                                \
    }                                                                                                     \
    INSTANTIATE_TEST_SUITE_P(Variants, Name##Cuda, testing::ValuesIn(cases_of(mw::Backend::cuda)),       \
                             mw::test::case_name);                                                        \
    GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Name##Cuda);                                            \
    class Name##Emu : public testing::TestWithParam<mw::test::Case> {};                                  \
    TEST_P(Name##Emu, Test) { (check)(GetParam()); }                                                       \
    INSTANTIATE_TEST_SUITE_P(Variants, Name##Emu, testing::ValuesIn(cases_of(mw::Backend::cuda_emu)),    \
                             mw::test::case_name);                                                        \
    GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Name##Emu)
