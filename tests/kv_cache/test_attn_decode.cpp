// The KV-cache lever's attn_decode op: every rung against the fp64 oracle at
// odd shapes first (MHA, GQA, MQA; contexts across the split rung's 256-row
// blocks; an MQA group wider than the split rung's 64-head slice), and the
// byte models the lesson rests on.
#include <gtest/gtest.h>

#include <cctype>

#include "harness/check.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"

namespace {

mw::Shape shape(long b, long heads, long kv, long ctx, long hd) {
    return {{{"b", b}, {"heads", heads}, {"kv_heads", kv}, {"ctx", ctx}, {"hd", hd}}};
}

class AttnDecode : public ::testing::TestWithParam<mw::Shape> {};

TEST_P(AttnDecode, EveryRungMatchesTheOracle) {
    const mw::Op* op = mw::find_op("attn_decode");
    ASSERT_NE(op, nullptr);
    mw::Problem p = op->make_problem(GetParam(), mw::DType::f32, 7);
    const auto oracle = op->oracle(p);
    const auto variants = mw::variants_of("attn_decode", mw::Backend::cpu);
    ASSERT_GE(variants.size(), 2u);
    for (const auto* v : variants) {
        const auto r = mw::check_variant(*op, *v, p, oracle);
        EXPECT_TRUE(r.correct) << v->name << " at " << GetParam().str() << ": " << r.message;
    }
}

INSTANTIATE_TEST_SUITE_P(OddShapesFirst, AttnDecode,
                         ::testing::Values(shape(1, 1, 1, 1, 1), shape(1, 3, 1, 7, 7), shape(2, 4, 2, 33, 33),
                                           shape(1, 6, 3, 257, 16), shape(3, 8, 8, 129, 32),
                                           shape(1, 128, 1, 300, 8), shape(2, 32, 8, 1024, 128)),
                         [](const testing::TestParamInfo<mw::Shape>& info) {
                             std::string n = info.param.str();
                             for (char& c : n)
                                 if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                             return n;
                         });

TEST(AttnDecodeOp, GroupingDividesTheSplitRungsBytes) {
    const auto s = shape(4, 32, 8, 16384, 128);
    const mw::Op* op = mw::find_op("attn_decode");
    const auto vs = mw::variants_of("attn_decode", mw::Backend::cpu);
    ASSERT_EQ(vs[0]->name, "naive");
    ASSERT_EQ(vs[1]->name, "split");
    EXPECT_DOUBLE_EQ(vs[0]->bytes(s, mw::DType::f32), 4 * vs[1]->bytes(s, mw::DType::f32));  // G = 4
    // Intensity heads / (2 kv_heads): 2 FLOP/B for GQA 32/8.
    EXPECT_NEAR(op->flops(s) / vs[1]->bytes(s, mw::DType::f32), 2.0, 1e-12);
    EXPECT_NE(op->validate(shape(1, 6, 4, 8, 8)).find("kv_heads = 4"), std::string::npos);
}

}  // namespace
