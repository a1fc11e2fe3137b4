// Helpers of the train_step suites (test_train_step.cpp: the CPU rungs;
// test_train_step_cuda.cpp: the CUDA rungs): shapes, a checked run, and the
// bit-for-bit comparison with store_all.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"

namespace mw::test {

inline mw::Shape train_step_shape(long layers, long tokens, long seq, long d, long heads, long kv, long d_ff,
                                  long every) {
    return {{{"layers", layers}, {"tokens", tokens}, {"seq", seq}, {"d_model", d}, {"heads", heads}, {"kv_heads", kv},
             {"d_ff", d_ff}, {"every", every}}};
}

inline const mw::Op& train_step_op() {
    const mw::Op* o = mw::find_op("train_step");
    if (!o) throw std::runtime_error("train_step is not registered");
    return *o;
}

// Outputs of one call of variant v (checked against the oracle), copied.
inline std::vector<std::vector<char>> run_checked(const mw::Variant& v, mw::Problem& p,
                                                  const std::vector<std::vector<double>>& oracle) {
    const auto r = mw::check_variant(train_step_op(), v, p, oracle);
    EXPECT_TRUE(r.correct) << v.name << " (" << mw::to_string(v.backend) << ") at " << p.shape.str() << ": "
                           << r.message;
    std::vector<std::vector<char>> out;
    for (const auto& b : p.outputs) out.emplace_back(b.as<char>(), b.as<char>() + b.size_bytes());
    return out;
}

inline void expect_same_bits(const std::vector<std::vector<char>>& a, const std::vector<std::vector<char>>& b,
                             const std::string& what) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t k = 0; k < a.size(); ++k)
        EXPECT_TRUE(a[k] == b[k]) << what << ": output " << k << " is not bit-identical to store_all's";
}

// A test name from a shape: its string with every non-alphanumeric as '_'.
inline std::string shape_test_name(const testing::TestParamInfo<mw::Shape>& info) {
    std::string n = info.param.str();
    for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return n;
}

}  // namespace mw::test
