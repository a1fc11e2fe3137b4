// decode_step on the committed trained model (and seeded models for other
// kv_heads): every rung against the fp64 oracle (int8 against its contract,
// the fp64 model with its cache rounded), odd contexts and batches first;
// paged bit-identical to contiguous; the batched decoder against one
// decoder per sequence; bad shapes refused with the value named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "harness/check.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "kernels/model/model_cpu.hpp"
#include "reference/kv_cache/generate.hpp"
#include "model/model.hpp"

namespace {

mw::Shape shape(std::int64_t ctx, std::int64_t batch, std::int64_t kv_heads) {
    return {{{"ctx", ctx}, {"batch", batch}, {"kv_heads", kv_heads}}};
}

struct Case {
    int ctx, batch, kv_heads;
};
class DecodeStep : public ::testing::TestWithParam<Case> {};

TEST_P(DecodeStep, EveryRungMatchesItsOracle) {
    const auto c = GetParam();
    const mw::Op* op = mw::find_op("decode_step");
    ASSERT_NE(op, nullptr);
    const auto s = shape(c.ctx, c.batch, c.kv_heads);
    ASSERT_EQ(op->validate(s), "");
    mw::Problem p = op->make_problem(s, mw::DType::f32, 42);
    const auto oracle = op->oracle(p);
    const auto variants = mw::variants_of("decode_step", mw::Backend::cpu);
    ASSERT_EQ(variants.size(), 4u);
    std::vector<std::vector<float>> out;
    for (const auto* v : variants) {
        const auto r = mw::check_variant(*op, *v, p, v->contract_oracle ? v->contract_oracle(p) : oracle);
        EXPECT_TRUE(r.correct) << v->name << " at " << s.str() << ": " << r.message;
        const auto& y = p.out("logits");
        out.emplace_back(y.as<float>(), y.as<float>() + y.count);
    }
    // paged (rung 3) reproduces cache (rung 1) bit for bit.
    ASSERT_EQ(variants[1]->name, "cache");
    ASSERT_EQ(variants[3]->name, "paged");
    EXPECT_EQ(variants[3]->identical_to, "cache");
    EXPECT_EQ(0, std::memcmp(out[1].data(), out[3].data(), out[1].size() * sizeof(float))) << s.str();
}

INSTANTIATE_TEST_SUITE_P(OddShapesFirst, DecodeStep,
                         ::testing::Values(Case{1, 1, 4}, Case{7, 3, 4}, Case{33, 1, 1}, Case{17, 2, 8},
                                           Case{129, 1, 4}, Case{300, 2, 2}));

TEST(DecodeStepOp, Int8CacheDiffersFromExactButKeepsItsContract) {
    const mw::Op* op = mw::find_op("decode_step");
    const auto s = shape(64, 1, 4);
    mw::Problem p = op->make_problem(s, mw::DType::f32, 42);
    const auto exact = op->oracle(p);
    const auto contract = mw::kv_cache::decode_step_int8_oracle(p);
    double diff = 0;
    for (std::size_t i = 0; i < exact[0].size(); ++i) diff = std::max(diff, std::fabs(exact[0][i] - contract[0][i]));
    EXPECT_GT(diff, 1e-4) << "the contract oracle must see the cache's rounding";
    EXPECT_LT(diff, 0.5) << "int8 per position and head should move logits only slightly";
}

TEST(DecodeStepOp, UnitsFlopsAndRefusals) {
    const mw::Op* op = mw::find_op("decode_step");
    const auto s = shape(100, 3, 4);
    EXPECT_EQ(op->unit.name, "tokens");
    EXPECT_EQ(op->unit.per_call(s), 3);
    const auto& c = mw::kv_cache::default_model().config;
    EXPECT_DOUBLE_EQ(op->flops(s), 3 * (mw::model::forward_flops(c, 101) - mw::model::forward_flops(c, 100)));
    const auto* ref = mw::variants_of("decode_step", mw::Backend::cpu).front();
    ASSERT_EQ(ref->name, "recompute");
    EXPECT_DOUBLE_EQ(ref->executed_flops(s), 3 * mw::model::forward_flops(c, 101));
    EXPECT_NE(op->validate(shape(100, 1, 3)).find("kv_heads = 3"), std::string::npos);
    EXPECT_NE(op->validate(shape(0, 1, 4)).find("ctx = 0"), std::string::npos);
    EXPECT_NE(op->validate(shape(8, 0, 4)).find("batch = 0"), std::string::npos);
}

TEST(DecodeStepOp, CountersReportTheCacheFormula) {
    const mw::Op* op = mw::find_op("decode_step");
    const auto s = shape(40, 2, 4);
    mw::Problem p = op->make_problem(s, mw::DType::f32, 42);
    const auto& c = mw::kv_cache::default_model().config;
    const double f32 = 2.0 * c.layers * c.kv_dim() * 4, i8 = 2.0 * c.layers * (c.kv_dim() + 4.0 * c.kv_heads);
    for (const auto* v : mw::variants_of("decode_step", mw::Backend::cpu)) {
        if (v->name == "recompute") continue;
        auto inst = v->prepare(p);
        inst.run();
        const auto k = inst.counters();
        // cache: a slot of ctx + 1 = 41 positions per sequence; paged: 3 blocks of 16.
        const double want = v->name == "cache" ? 2 * 41 * f32 : v->name == "cache_int8" ? 2 * 41 * i8 : 2 * 48 * f32;
        EXPECT_DOUBLE_EQ(k.at("kv_cache_bytes"), want) << v->name;
        EXPECT_DOUBLE_EQ(k.at("kv_used_bytes"), 2 * 41 * (v->name == "cache_int8" ? i8 : f32)) << v->name;
    }
}

// The batched step (several sequences in one call) against one single-
// sequence decoder per sequence: the same logits up to the GEMV's order.
TEST(Decoder, BatchedStepMatchesOneDecoderPerSequence) {
    const auto& m = mw::kv_cache::default_model();
    const auto& c = m.config;
    const int B = 3, lens[B] = {5, 1, 20};
    mw::kv_cache::PagedStore store({c.layers, c.kv_heads, c.head_dim()}, B, 8);
    mw::model::cpu::Decoder batched(c, m.params.data(), {}, store, c.max_seq);
    std::vector<std::unique_ptr<mw::model::cpu::Decoder>> single;
    for (int b = 0; b < B; ++b) single.push_back(std::make_unique<mw::model::cpu::Decoder>(c, m.params.data()));
    const std::string text = mw::kv_cache::kPromptText;
    std::vector<std::vector<float>> last(B);
    for (int b = 0; b < B; ++b) {
        ASSERT_TRUE(store.open(b, 64) && store.grow(b, lens[b] + 1));
        std::vector<int> seq(std::size_t(lens[b]), b), pos, tok;
        for (int i = 0; i < lens[b]; ++i) pos.push_back(i), tok.push_back((unsigned char)text[std::size_t(b * 11 + i)]);
        batched.step(lens[b], seq.data(), pos.data(), tok.data());  // a prompt as one step
        const float* z = nullptr;
        for (int t : tok) z = single[std::size_t(b)]->step(t);
        ASSERT_NE(z, nullptr);
    }
    // One step for all three sequences at once, each at its own position.
    int seq[B] = {0, 1, 2}, pos[B], tok[B] = {'a', 'b', 'c'};
    for (int b = 0; b < B; ++b) pos[b] = lens[b];
    const float* zb = batched.step(B, seq, pos, tok);
    for (int b = 0; b < B; ++b) {
        const float* zs = single[std::size_t(b)]->step(tok[b]);
        for (int v = 0; v < c.vocab; ++v)
            ASSERT_NEAR(zb[b * c.vocab + v], zs[v], 1e-4 * (1 + std::fabs(zs[v]))) << "sequence " << b << " token " << v;
    }
    EXPECT_THROW(batched.step(1, seq, &lens[2], tok), std::out_of_range) << "past the grown capacity: 21 positions";
    int bad = 300;
    EXPECT_THROW(batched.step(1, seq, pos, &bad), std::invalid_argument);
}

}  // namespace
