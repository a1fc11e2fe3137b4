// The KV-cache lever's generate op on the committed trained model: every rung
// against the fp64 oracle under the token-sequence rule, odd lengths first;
// the cache rung's counters and the reference's executed FLOPs; a length past
// the model's context refused with the numbers named.
#include <gtest/gtest.h>

#include "harness/check.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "kernels/model/model_cpu.hpp"
#include "reference/kv_cache/generate.hpp"
#include "model/model.hpp"

namespace {

mw::Shape shape(std::int64_t prompt, std::int64_t tokens) { return {{{"prompt", prompt}, {"tokens", tokens}}}; }

class Generate : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(Generate, EveryRungMatchesTheOracle) {
    const auto [prompt, tokens] = GetParam();
    const mw::Op* op = mw::find_op("generate");
    ASSERT_NE(op, nullptr);
    const auto s = shape(prompt, tokens);
    mw::Problem p = op->make_problem(s, mw::DType::f32, 42);
    const auto oracle = op->oracle(p);
    const auto variants = mw::variants_of("generate", mw::Backend::cpu);
    ASSERT_GE(variants.size(), 2u);
    for (const auto* v : variants) {
        const auto r = mw::check_variant(*op, *v, p, oracle);
        EXPECT_TRUE(r.correct) << v->name << " at " << s.str() << ": " << r.message;
    }
}

INSTANTIATE_TEST_SUITE_P(OddLengthsFirst, Generate,
                         ::testing::Values(std::pair{1, 1}, std::pair{7, 33}, std::pair{1, 127}, std::pair{33, 129},
                                           std::pair{64, 192}, std::pair{16, 256}));

TEST(GenerateOp, CountersAndExecutedFlops) {
    const mw::Op* op = mw::find_op("generate");
    const auto s = shape(16, 32);
    mw::Problem p = op->make_problem(s, mw::DType::f32, 42);
    const auto& c = mw::kv_cache::default_model().config;
    for (const auto* v : mw::variants_of("generate", mw::Backend::cpu)) {
        auto inst = v->prepare(p);
        inst.run();
        ASSERT_TRUE(inst.counters) << v->name;
        const auto k = inst.counters();
        EXPECT_GT(k.at("ttft_ms"), 0) << v->name;
        EXPECT_GT(k.at("itl_p99_ms"), 0) << v->name;
        EXPECT_GE(k.at("itl_p99_ms"), k.at("itl_p50_ms")) << v->name;
        // What the store holds at the end: a contiguous slot reserves all
        // prompt + tokens positions; the paged store the blocks of the
        // prompt + tokens - 1 positions fed; recompute keeps nothing.
        const double f32 = 2.0 * c.layers * c.kv_dim() * 4, i8 = 2.0 * c.layers * (c.kv_dim() + 4.0 * c.kv_heads);
        const double kv = v->name == "cache" ? 48 * f32 : v->name == "cache_int8" ? 48 * i8
                        : v->name == "paged" ? 48 * f32 /* ceil(47 / 16) = 3 blocks of 16 */ : 0.0;
        EXPECT_EQ(k.at("kv_cache_bytes"), kv) << v->name;
    }
    // Recompute executes a forward over n positions for each n in [16, 48).
    const auto* ref = mw::variants_of("generate", mw::Backend::cpu).front();
    ASSERT_EQ(ref->name, "recompute");
    double sum = 0;
    for (int n = 16; n < 48; ++n) sum += mw::kv_cache::forward_flops(n);
    EXPECT_DOUBLE_EQ(ref->executed_flops(s), sum);
    EXPECT_GT(ref->executed_flops(s), 10 * op->flops(s));
    EXPECT_EQ(op->unit.name, "tokens");
    EXPECT_EQ(op->unit.per_call(s), 32);
}

TEST(GenerateOp, LongerThan2048PositionsIsRefused) {
    const mw::Op* op = mw::find_op("generate");
    const std::string e = op->validate(shape(2000, 49));
    EXPECT_NE(e.find("2049"), std::string::npos) << e;
    EXPECT_NE(e.find("2048"), std::string::npos) << e;
    EXPECT_EQ(op->validate(shape(2000, 48)), "");
    EXPECT_NE(op->validate(shape(0, 8)).find("prompt = 0"), std::string::npos);
}

}  // namespace

namespace {

// The committed default model: the fp32 training step's forward pass over a
// full 256-token window matches the fp64 oracle's logits under the standard
// tolerance model (reduction length: every block's MLP, d_ff x layers).
TEST(DefaultModel, Fp32ForwardMatchesTheOracle) {
    const auto& m = mw::kv_cache::default_model();
    const auto& c = m.config;
    const int T = c.max_seq;
    std::vector<int> tokens(static_cast<std::size_t>(T)), targets(tokens.size());
    const std::string text = mw::kv_cache::kPromptText;
    for (int t = 0; t < T; ++t)
        tokens[std::size_t(t)] = (unsigned char)text[std::size_t(t) % text.size()],
        targets[std::size_t(t)] = (unsigned char)text[std::size_t(t + 1) % text.size()];
    const std::vector<double> p64(m.params.begin(), m.params.end());
    std::vector<double> ref;
    const double loss64 = mw::model::ref_loss(c, p64.data(), tokens.data(), targets.data(), T, &ref);
    mw::model::cpu::TrainStep step(c, 1, T);
    mw::Buffer z = mw::Buffer::make("logits", mw::DType::f32, ref.size(), {T, c.vocab});
    const double loss32 = step.forward(m.params.data(), tokens.data(), targets.data(), z.as<float>());
    const auto r = mw::check_close(z, ref, mw::DType::f32, double(c.d_ff) * c.layers);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_NEAR(loss32, loss64, 1e-5 * loss64);
    EXPECT_LT(loss64, 2.0) << "the default model should predict its own English prompt well";
}

}  // namespace
