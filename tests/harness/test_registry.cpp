// The registry and run planning: names resolve, bad requests are refused with
// the valid choices named.
#include <gtest/gtest.h>

#include "harness/onednn.hpp"
#include "harness/registry.hpp"
#include "harness/gpu.hpp"
#include "harness/runner.hpp"
#include "harness/unbuilt.hpp"

namespace {

std::string usage_error(const mw::RunRequest& req) {
    try {
        mw::plan_runs(req);
    } catch (const mw::UsageError& e) {
        return e.what();
    }
    return "";
}

TEST(Registry, GemmLadderIsComplete) {
    const mw::Op* op = mw::find_op("gemm");
    ASSERT_NE(op, nullptr);
    EXPECT_EQ(op->lever, "vectorization");
    auto cpu = mw::variants_of("gemm", mw::Backend::cpu);
    int references = 0, vendors = 0;
    for (auto* v : cpu) {
        references += v->role == mw::Role::reference;
        vendors += v->role == mw::Role::vendor;
        EXPECT_FALSE(v->rationale.empty()) << v->name;
        EXPECT_TRUE(v->prepare) << v->name;
    }
    EXPECT_EQ(references, 1);
    EXPECT_EQ(vendors, mw::onednn::kBuilt ? 2 : 1);  // OpenBLAS, and oneDNN when built with its headers
    EXPECT_GE(cpu.size(), 6u);
}

TEST(Registry, LeverAndOpResolve) {
    mw::RunRequest req;
    req.targets = {"vectorization"};
    auto plans = mw::plan_runs(req);
    ASSERT_EQ(plans.size(), 1u);
    EXPECT_EQ(plans[0].op->name, "gemm");
    EXPECT_EQ(plans[0].shape.str(), "k=1024,m=1024,n=1024");
}

TEST(Registry, UnknownNamesAreRefusedWithChoices) {
    mw::RunRequest req;
    req.targets = {"vectorisation"};
    auto msg = usage_error(req);
    EXPECT_NE(msg.find("'vectorisation'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("vectorization"), std::string::npos) << msg;

    req.targets = {"gemm"};
    req.variants = {"fastest"};
    msg = usage_error(req);
    EXPECT_NE(msg.find("'fastest'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("naive"), std::string::npos) << msg;
}

// A rung whose source is here but whose dependency the build lacks (as the
// expert-parallel rungs without MPI) says what it needs when asked for.
MW_REGISTER_UNBUILT(test_gemm_needs_a_library, {.op = "gemm", .name = "needs_a_library",
                                                .why = "it needs libexample, which CMake did not find"});

TEST(Registry, AVariantNotInThisBuildSaysWhatItNeeds) {
    mw::RunRequest req;
    req.targets = {"gemm"};
    req.variants = {"needs_a_library"};
    const std::string msg = usage_error(req);
    EXPECT_NE(msg.find("'needs_a_library' is not in this build: it needs libexample"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("unknown variant"), std::string::npos) << msg;
    req.variants = {"naive"};  // the rest of the op is unaffected
    EXPECT_EQ(usage_error(req), "");
    req.targets = {"softmax"};  // another op's name of that rung is unknown there
    req.variants = {"needs_a_library"};
    EXPECT_NE(usage_error(req).find("unknown variant"), std::string::npos);
#ifndef MEMWALL_HAVE_MPI
    req.targets = {"moe_ffn"};
    req.variants = {"expert_parallel"};
    EXPECT_NE(usage_error(req).find("needs MPI"), std::string::npos) << usage_error(req);
#endif
}

TEST(Registry, BadShapesAreRefused) {
    const std::vector<std::string> axes = {"m", "n", "k"};
    mw::Shape base{{{"m", 4}, {"n", 4}, {"k", 4}}};
    for (const char* bad : {"m=0", "m=-3", "m=abc", "m=", "=5", "q=5", "m=5x", "m", ""})
        EXPECT_THROW(mw::parse_shape(bad, base, axes), mw::UsageError) << bad;
    auto s = mw::parse_shape("m=7,k=129", base, axes);
    EXPECT_EQ(s["m"], 7);
    EXPECT_EQ(s["n"], 4);
    EXPECT_EQ(s["k"], 129);
}

TEST(Registry, FlagAxesMayBeZeroButNotNegative) {
    const std::vector<std::string> axes = {"s", "causal"};
    mw::Shape base{{{"s", 4}, {"causal", 1}}};
    EXPECT_EQ(mw::parse_shape("causal=0", base, axes, {"causal"})["causal"], 0);
    EXPECT_THROW(mw::parse_shape("causal=-1", base, axes, {"causal"}), mw::UsageError);
    EXPECT_THROW(mw::parse_shape("s=0", base, axes, {"causal"}), mw::UsageError);
    EXPECT_THROW(mw::parse_shape("causal=0", base, axes), mw::UsageError);  // not declared a flag
}

TEST(Registry, UnsupportedDtypeIsRefused) {
    mw::RunRequest req;
    req.targets = {"gemm"};
    req.dtype = mw::DType::i4;
    auto msg = usage_error(req);
    EXPECT_NE(msg.find("'i4'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32"), std::string::npos) << msg;
}

TEST(Registry, CudaBackendWithoutGpuIsRefused) {
    if (mw::gpu_count() > 0) GTEST_SKIP() << "a GPU is present";
    mw::RunRequest req;
    req.targets = {"gemm"};
    req.backend = mw::Backend::cuda;
    auto msg = usage_error(req);
    EXPECT_NE(msg.find("GPU"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
}

}  // namespace
