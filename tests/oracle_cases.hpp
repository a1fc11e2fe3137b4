// Shared by the lever suites that check every variant of their ops against
// the op's oracle (tests/fusion, tests/layout): one parameterized case per
// (variant, shape), a cached problem + oracle per (op, shape), and the check
// itself — the standard tolerance plus the 2x-the-naive-rung rule.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness/check.hpp"
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

inline void check_case(const Case& c) {
    std::string why;
    if (!mw::runnable_here(*c.variant, &why)) GTEST_SKIP() << c.variant->name << ": " << why;
    const mw::Op* op = mw::find_op(c.variant->op);
    ASSERT_NE(op, nullptr);
    Fixture& f = fixture_for(c.variant->op, c.shape);
    auto r = mw::check_variant(*op, *c.variant, f.problem, f.oracle);
    EXPECT_TRUE(r.correct) << r.message;
    mw::CheckResult cr;
    cr.rel_fro = r.rel_fro;
    mw::apply_baseline_rule(cr, f.naive_rel_fro, op->check.baseline_factor, mw::DType::f32,
                            op->check.reduction_length(c.shape));
    EXPECT_TRUE(cr.ok) << cr.message;
}

}  // namespace mw::test
