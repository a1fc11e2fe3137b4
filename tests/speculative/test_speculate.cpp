// The speculate op: every rung's greedy tokens against the fp64 model
// (token-sequence rule) and bit-identical to target_only, for every draft
// and K = 1..8, odd lengths and batches first, on the trained model and on
// the trained model widened past the L3 (model 1); the cache rollback and the accepted prefix shown to
// matter (a loop without either produces other tokens); sampling at
// temperature 1 through the whole loop, the first token's law checked
// against the target's; the counters and their arithmetic.
#include <gtest/gtest.h>

#include <omp.h>

#include "wrong_rounds.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "harness/check.hpp"
#include "kernels/speculative/expected_tokens.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "kernels/model/sampling.hpp"
#include "model/checkpoint.hpp"
#include "reference/speculative/speculate.hpp"
#include "tests/oracle_cases.hpp"

namespace sp = mw::speculative;
using spec_test::no_rollback;
using spec_test::off_by_one;

namespace {

mw::Shape shape(int model, int batch, int prompt, int tokens, int k) {
    return {{{"model", model}, {"batch", batch}, {"prompt", prompt}, {"tokens", tokens}, {"k", k}}};
}

std::vector<std::int32_t> run_variant(const mw::Variant& v, mw::Problem& p) {
    auto inst = v.prepare(p);
    inst.run();
    const auto& o = p.out("tokens");
    return {o.as<std::int32_t>(), o.as<std::int32_t>() + o.count};
}

void every_rung(const mw::Shape& s) {
    mw::Problem p = mw::test::expect_every_cpu_rung_correct("speculate", s, 42, 3);
    const auto variants = mw::variants_of("speculate", mw::Backend::cpu);
    std::vector<std::int32_t> base;
    for (const auto* v : variants)
        if (v->name == "target_only") base = run_variant(*v, p);
    ASSERT_FALSE(base.empty());
    for (const auto* v : variants)
        EXPECT_EQ(run_variant(*v, p), base) << v->name << " at " << s.str() << ": not target_only's tokens";
}

class TrainedModel : public ::testing::TestWithParam<std::array<int, 4>> {};

TEST_P(TrainedModel, EveryRungIsTargetOnly) {
    const auto [batch, prompt, tokens, k] = GetParam();
    every_rung(shape(0, batch, prompt, tokens, k));
}

INSTANTIATE_TEST_SUITE_P(OddShapesFirst, TrainedModel,
                         ::testing::Values(std::array{1, 1, 1, 1}, std::array{1, 7, 2, 1}, std::array{3, 1, 33, 3},
                                           std::array{2, 7, 33, 8}, std::array{1, 16, 127, 4}, std::array{4, 33, 65, 5},
                                           std::array{16, 16, 17, 2}));

TEST(Speculate, EveryKFrom1To8KeepsTheTokens) {
    const mw::Op* op = mw::find_op("speculate");
    for (int k = 1; k <= 8; ++k) {
        const auto s = shape(0, 2, 9, 41, k);
        mw::Problem p = op->make_problem(s, mw::DType::f32, 5);
        std::map<std::string, std::vector<std::int32_t>> out;
        for (const auto* v : mw::variants_of("speculate", mw::Backend::cpu)) out[v->name] = run_variant(*v, p);
        for (const auto& [name, t] : out) EXPECT_EQ(t, out["target_only"]) << name << " at k " << k;
    }
}

TEST(Speculate, WidenedModelMatchesTheOracle) {
    // The memory-bound regime's model (the trained model widened past the
    // L3), checked against the trained model's fp64 tokens, few tokens.
    every_rung(shape(1, 2, 3, 7, 3));
    EXPECT_GE(sp::target_model(shape(1, 2, 3, 7, 3)).widening, 2);
}

TEST(Speculate, TheWideningFollowsTheL3) {
    const auto& trained = sp::target_model(shape(0, 1, 1, 1, 1)).config;  // 3.02 M parameters, 12 MB
    EXPECT_EQ(sp::memory_bound_widening(trained, 1 << 20), 2);           // 2x: 48 MB >= 4 MiB
    EXPECT_EQ(sp::memory_bound_widening(trained, 32 << 20), 4);          // 4x: 190 MB >= 128 MiB; 2x is not
    EXPECT_EQ(sp::memory_bound_widening(trained, 300.0 * (1 << 20)), 8);  // 8x (756 MB) falls short: the cap
    EXPECT_EQ(sp::memory_bound_widening(trained, 0), 4);                 // unknown L3
}

// A loop that does not roll its target cache back, or takes one draft too
// many, produces other tokens: the greedy check catches both.

TEST(Speculate, RollbackAndTheAcceptedPrefixMatter) {
    const auto s = shape(0, 1, 16, 48, 4);
    const auto& m = sp::target_model(s);
    const auto dc = sp::first_layers_config(m.config, 1);
    const auto dp = sp::first_layers_params(m.config, m.params->data(), 1);
    sp::Speculator plain(m.config, m.params->data(), {}, nullptr, nullptr, {}, 1, sp::max_len(s) + 64);
    sp::Speculator spec(m.config, m.params->data(), {}, &dc, dp.data(), {}, 1, sp::max_len(s) + 64);
    std::vector<int> prompt(16);
    for (int i = 0; i < 16; ++i) prompt[std::size_t(i)] = "The computer is "[i];
    std::vector<int> want(48), got(48);
    sp::SpecOptions o;
    o.K = 4;
    sp::Counts c;
    plain.generate(prompt.data(), 16, 48, want.data(), o, &c);
    spec.generate(prompt.data(), 16, 48, got.data(), o, &c);
    EXPECT_EQ(got, want);
    ASSERT_GT(c.rejected, 0) << "the test needs rejections";
    spec.set_round(off_by_one);
    spec.generate(prompt.data(), 16, 48, got.data(), o, &c);
    EXPECT_NE(got, want) << "an off-by-one in the accepted prefix went unnoticed";
    spec.set_round(no_rollback);
    try {
        spec.generate(prompt.data(), 16, 48, got.data(), o, &c);
        EXPECT_NE(got, want) << "a cache that is not rolled back went unnoticed";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("rolled back"), std::string::npos) << e.what();
    }
}

TEST(Speculate, SamplingKeepsTheTargetsLaw) {
    // Temperature 1 through the whole loop (INT4 draft, K = 4): the first
    // token of 1000 seeded generations against the target's softmax after
    // the prompt, with the distribution check (alpha 1e-6).
    const auto s = shape(0, 1, 12, 5, 4);
    const auto& m = sp::target_model(s);
    const mw::precision::QuantSpec int4{mw::precision::Format::int4, 32, false};
    sp::Speculator spec(m.config, m.params->data(), {}, &m.config, m.params->data(), int4, 1, sp::max_len(s));
    sp::Speculator plain(m.config, m.params->data(), {}, nullptr, nullptr, {}, 1, sp::max_len(s));
    std::vector<int> prompt(12);
    for (int i = 0; i < 12; ++i) prompt[std::size_t(i)] = "Love is the "[i];
    // The target's law of the first token: its logits after the prompt.
    mw::model::cpu::Decoder dec(m.config, m.params->data());
    const float* z = nullptr;
    for (int t : prompt) z = dec.step(t);
    const auto probs = mw::model::sampling_probs(z, m.config.vocab, 1.0, 0);
    const int N = 1000;
    mw::Buffer first = mw::Buffer::make("first", mw::DType::i32, N), first_plain = mw::Buffer::make("first_plain", mw::DType::i32, N);
    sp::SpecOptions o;
    o.K = 4, o.temperature = 1.0;
    std::vector<int> out(5);
    sp::Counts c, total;
    for (int n = 0; n < N; ++n) {
        o.seed = 1000 + std::uint64_t(n);
        spec.generate(prompt.data(), 12, 5, out.data(), o, &c);
        first.as<std::int32_t>()[n] = out[0];
        total.drafted += c.drafted, total.accepted += c.accepted;
        plain.generate(prompt.data(), 12, 5, out.data(), o, &c);
        first_plain.as<std::int32_t>()[n] = out[0];
    }
    const auto r = mw::check_distribution(first, probs, 1e-6);
    EXPECT_TRUE(r.ok) << r.message;
    const auto rp = mw::check_distribution(first_plain, probs, 1e-6);
    EXPECT_TRUE(rp.ok) << "the target alone: " << rp.message;
    EXPECT_GT(total.accepted, 0);
    EXPECT_LT(total.accepted, total.drafted) << "some drafts must be rejected for the test to test the residual";
}

// Sampled speculative decoding on the trained model, as `memwall generate
// --speculative D --temperature 0.8 --top-k 40` runs it: for every draft the
// command offers, the first and the second generated token of 1000 seeded
// generations, each against the target's own sampling law at that position
// (the second's: the first's law times the target's law after it, summed),
// by the distribution check at alpha 1e-6. Two wrong rules around the right
// loop must fail it: resampling from p (not the residual) at a rejection,
// and accepting every draft.
namespace wrong_rule {
int resample_from_p(int K, int V, const int* d, const double* q, const double* p, const double* u, double r, int len,
                    int* next, int* keep) {
    const int n = sp::speculative_round(K, V, d, q, p, u, r, len, next, keep);
    if (n < K) *next = sp::draw(p + std::size_t(n) * V, V, r);
    return n;
}
int always_accept(int K, int V, const int*, const double*, const double* p, const double*, double r, int len,
                  int* next, int* keep) {
    *next = sp::draw(p + std::size_t(K) * V, V, r);
    *keep = len + 1 + K;
    return K;
}
}  // namespace wrong_rule

struct PositionLaws {
    std::vector<double> first, second;
};

PositionLaws target_laws(const mw::model::Config& c, const float* params, const std::vector<int>& prompt, double T,
                         int top_k) {
    mw::model::cpu::Decoder dec(c, params);
    const float* z = nullptr;
    for (int t : prompt) z = dec.step(t);
    PositionLaws L;
    L.first = mw::model::sampling_probs(z, c.vocab, T, top_k);
    L.second.assign(std::size_t(c.vocab), 0.0);
    for (int t1 = 0; t1 < c.vocab; ++t1) {
        if (L.first[std::size_t(t1)] == 0) continue;
        dec.reset();
        for (int t : prompt) dec.step(t);
        const auto after = mw::model::sampling_probs(dec.step(t1), c.vocab, T, top_k);
        for (int t2 = 0; t2 < c.vocab; ++t2) L.second[std::size_t(t2)] += L.first[std::size_t(t1)] * after[std::size_t(t2)];
    }
    return L;
}

// "" when both positions follow their laws, else what the check said.
std::string sampled_law_holds(sp::Speculator& spec, const std::vector<int>& prompt, const PositionLaws& L, double T,
                              int top_k, int N) {
    mw::Buffer first = mw::Buffer::make("first", mw::DType::i32, std::size_t(N)),
               second = mw::Buffer::make("second", mw::DType::i32, std::size_t(N));
    std::vector<int> out(2);
    sp::Counts c;
    for (int n = 0; n < N; ++n) {
        spec.generate(prompt.data(), int(prompt.size()), 2, out.data(), {4, T, top_k, 5000 + std::uint64_t(n)}, &c);
        first.as<std::int32_t>()[n] = out[0], second.as<std::int32_t>()[n] = out[1];
    }
    const auto a = mw::check_distribution(first, L.first, 1e-6), b = mw::check_distribution(second, L.second, 1e-6);
    return a.ok && b.ok ? "" : (a.ok ? "" : "first token: " + a.message + " ") + (b.ok ? "" : "second token: " + b.message);
}

TEST(Speculate, SampledSpeculationKeepsTheTargetsLawAtEachPosition) {
    const auto s = shape(0, 1, 8, 2, 4);
    const auto& m = sp::target_model(s);
    const std::vector<int> prompt = {'L', 'o', 'v', 'e', ' ', 'i', 's', ' '};
    const double T = 0.8;
    const int top_k = 40, N = 1000;
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);  // a tiny model: one thread decodes it fastest
    const PositionLaws L = target_laws(m.config, m.params->data(), prompt, T, top_k);
    const auto& small = mw::model::draft_small();
    for (const std::string kind : {"small", "int4", "early_exit"}) {
        const sp::Draft d = sp::make_draft(kind, m.config, m.params->data(), &small.config, small.params.data());
        sp::Speculator spec(m.config, m.params->data(), {}, &d.config, d.params, d.format, 1, sp::max_len(s));
        EXPECT_EQ(sampled_law_holds(spec, prompt, L, T, top_k, N), "") << kind;
        if (kind != "small") continue;
        spec.set_round(wrong_rule::resample_from_p);
        const std::string from_p = sampled_law_holds(spec, prompt, L, T, top_k, N);
        EXPECT_NE(from_p, "") << "resampling from p went unnoticed";
        spec.set_round(wrong_rule::always_accept);
        const std::string always = sampled_law_holds(spec, prompt, L, T, top_k, N);
        EXPECT_NE(always, "") << "accepting every draft went unnoticed";
        std::printf("resample from p: %s\nalways accept: %s\n", from_p.c_str(), always.c_str());
    }
    omp_set_num_threads(threads);
}

TEST(Speculate, CountersAddUp) {
    const mw::Op* op = mw::find_op("speculate");
    const auto s = shape(0, 4, 16, 40, 4);
    mw::Problem p = op->make_problem(s, mw::DType::f32, 42);
    for (const auto* v : mw::variants_of("speculate", mw::Backend::cpu)) {
        auto inst = v->prepare(p);
        inst.run();
        const auto k = inst.counters();
        EXPECT_GT(k.at("target_step_ms"), 0) << v->name;
        if (v->name == "target_only") {
            EXPECT_EQ(k.at("tokens_per_pass"), 1);
            EXPECT_EQ(k.at("target_passes"), 40) << "one pass per token for the whole batch";
            continue;
        }
        const double drafted = k.at("drafted"), accepted = k.at("accepted");
        EXPECT_GE(drafted, accepted) << v->name;
        EXPECT_GE(k.at("alpha"), 0);
        EXPECT_LE(k.at("alpha"), 1);
        // Every round emits its accepted drafts plus one token: the
        // accepted count and the rounds give the tokens (an overshoot at
        // the end of a sequence is cut, not emitted twice).
        EXPECT_GE(accepted + k.at("target_passes"), 40) << v->name;
        EXPECT_LT(k.at("target_passes"), 40) << v->name << ": speculation must save target passes";
        EXPECT_NEAR(k.at("predicted_tokens_per_pass"), mw::speculative::expected_tokens(k.at("alpha"), 4), 1e-12);
        EXPECT_GT(k.at("predicted_speedup"), 0);
        EXPECT_GT(k.at("draft_ms"), 0);
        EXPECT_GT(k.at("verify_ms"), 0);
    }
}

TEST(Speculate, BadShapesAreRefusedWithTheValidRange) {
    const mw::Op* op = mw::find_op("speculate");
    EXPECT_NE(op->validate(shape(2, 1, 1, 1, 1)).find("valid: 0"), std::string::npos);
    EXPECT_NE(op->validate(shape(0, 1, 1, 1, 17)).find("1..16"), std::string::npos);
    EXPECT_NE(op->validate(shape(0, 1, 1000, 1100, 4)).find("2048"), std::string::npos);
    EXPECT_TRUE(op->validate(shape(0, 1, 16, 64, 4)).empty());
}

TEST(Speculate, SelfDraftIsTheTargetsFirstLayers) {
    const auto s = shape(0, 1, 4, 4, 1);
    const auto& m = sp::target_model(s);
    EXPECT_THROW(sp::first_layers_config(m.config, 0), std::invalid_argument);
    EXPECT_THROW(sp::first_layers_config(m.config, m.config.layers + 1), std::invalid_argument);
    // All layers: the same parameters.
    const auto all = sp::first_layers_params(m.config, m.params->data(), m.config.layers);
    EXPECT_EQ(all, *m.params);
    const auto one = sp::first_layers_params(m.config, m.params->data(), 1);
    EXPECT_EQ(one.size(), mw::model::param_count(sp::first_layers_config(m.config, 1)));
    EXPECT_TRUE(std::equal(one.end() - m.config.d_model, one.end(), m.params->end() - m.config.d_model)) << "the final norm";
}

}  // namespace
