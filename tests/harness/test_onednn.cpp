// The oneDNN vendor rungs (harness/onednn.hpp): the library loads in a build
// made with its headers, and each rung records which of oneDNN's kernels it
// runs. Their correctness against the oracle, at the odd shapes, is in the
// ops' own oracle suites (tests/vectorization, tests/fusion), which hold
// every CPU variant.
#include <gtest/gtest.h>

#include "harness/check.hpp"
#include "harness/onednn.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"

namespace {

const mw::Variant* onednn_rung(const std::string& op) {
    for (auto* v : mw::variants_of(op, mw::Backend::cpu))
        if (v->name == "onednn") return v;
    return nullptr;
}

TEST(OneDnn, LoadsInABuildWithItsHeaders) {
    std::string why;
    if (!mw::onednn::kBuilt) {
        EXPECT_FALSE(mw::onednn::available(&why));
        EXPECT_NE(why.find("libdnnl-dev"), std::string::npos) << why;  // says what to install
        GTEST_SKIP() << "built without oneDNN's headers";
    }
    ASSERT_TRUE(mw::onednn::available(&why)) << why;
    EXPECT_EQ(mw::onednn::version().rfind("oneDNN 2.", 0), 0u) << mw::onednn::version();
}

// A rung whose descriptor oneDNN cannot serve with a JIT kernel falls back to
// its reference code ("ref:any"), an order of magnitude slower: the row's
// path must say which ran, and on an AVX2 machine it must not be the
// reference code.
TEST(OneDnn, RungsRunAndNameTheKernelOneDnnPicked) {
    if (!mw::onednn::kBuilt) GTEST_SKIP() << "built without oneDNN's headers";
    const std::vector<std::pair<std::string, mw::Shape>> cases = {
        {"gemm", {{{"m", 33}, {"n", 129}, {"k", 127}}}},
        {"softmax", {{{"rows", 7}, {"cols", 129}}}},
        {"bias_gelu_ln", {{{"rows", 7}, {"hidden", 129}}}},
    };
    for (auto& [op_name, s] : cases) {
        SCOPED_TRACE(op_name);
        const mw::Variant* v = onednn_rung(op_name);
        ASSERT_NE(v, nullptr);
        EXPECT_EQ(v->role, mw::Role::vendor);
        const mw::Op* op = mw::find_op(op_name);
        mw::Problem p = op->make_problem(s, mw::DType::f32, 7);
        mw::Instance inst = v->prepare(p);
        EXPECT_FALSE(inst.path.empty());
        if (__builtin_cpu_supports("avx2")) {
            EXPECT_EQ(inst.path.find("ref"), std::string::npos) << inst.path;
        }
        const auto r = mw::check_variant(*op, *v, p, op->oracle(p));
        EXPECT_TRUE(r.correct) << r.message;
    }
}

}  // namespace
