// The acceptance rule against its own law: the accept op's pair counts
// under the distribution check (Pearson chi-square at alpha 1e-6, the
// probability that a correct rule fails one check), for the rule in
// kernels/speculative/speculate.hpp and, as negative controls, three wrong
// rules that the same check, at the same shape, must reject:
//   always_accept      every draft kept (the output follows the draft)
//   resample_from_p    at a rejection, draw from p instead of (p - q)+
//                      (tokens the draft likes are under-produced twice over)
//   product_no_min     the prefix tested against one uniform per round,
//                      u < prod_i p_i/q_i without the min: a token the draft
//                      under-proposes (p > q) lends its excess to the next
// plus the same one-uniform product form with the min, which is correct.
// Odd category counts first.
#include <gtest/gtest.h>

#include "wrong_rounds.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

#include "harness/check.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "reference/speculative/chain.hpp"

namespace sp = mw::speculative;
using spec_test::no_rollback;
using spec_test::off_by_one;

namespace {

int always_accept(int K, int V, const int*, const double*, const double* p, const double*, double r, int len, int* next,
                  int* keep) {
    *next = sp::draw(p + std::size_t(K) * V, V, r);
    *keep = len + 1 + K;
    return K;
}

int resample_from_p(int K, int V, const int* d, const double* q, const double* p, const double* u, double r, int len, int* next,
                    int* keep) {
    for (int i = 0; i < K; ++i)
        if (!(u[i] * q[std::size_t(i) * V + d[i]] < p[std::size_t(i) * V + d[i]])) {
            *next = sp::draw(p + std::size_t(i) * V, V, r);
            *keep = len + 1 + i;
            return i;
        }
    *next = sp::draw(p + std::size_t(K) * V, V, r);
    *keep = len + 1 + K;
    return K;
}

// One uniform for the whole prefix: keep drafts while u < the running
// product of the ratios (with or without clamping each at 1).
template <bool kMin>
int product_rule(int K, int V, const int* d, const double* q, const double* p, const double* u, double r, int len, int* next,
                 int* keep) {
    double prod = 1;
    std::vector<double> res(static_cast<std::size_t>(V));
    for (int i = 0; i < K; ++i) {
        const double ratio = p[std::size_t(i) * V + d[i]] / q[std::size_t(i) * V + d[i]];
        prod *= kMin ? std::min(1.0, ratio) : ratio;
        if (u[0] < prod) continue;
        for (int x = 0; x < V; ++x) res[std::size_t(x)] = std::max(0.0, p[std::size_t(i) * V + x] - q[std::size_t(i) * V + x]);
        *next = sp::draw(res.data(), V, r);
        *keep = len + 1 + i;
        return i;
    }
    *next = sp::draw(p + std::size_t(K) * V, V, r);
    *keep = len + 1 + K;
    return K;
}

// The law alone (RoundCheck::law_only: every round runs, whatever it
// decides), as the check sees the counts.
mw::CheckResult check_rule(sp::RoundFn f, int v, int k, std::int64_t samples, std::uint64_t call = 0) {
    const auto chain = sp::make_chain(v, 42);
    mw::Buffer counts = mw::Buffer::make("counts", mw::DType::i32, std::size_t(v * v), {v, v});
    std::fill(counts.as<std::int32_t>(), counts.as<std::int32_t>() + counts.count, 0);
    sp::sample_pairs(chain.P.data(), chain.Q.data(), v, k, samples, f, 42 + call, counts.as<std::int32_t>(),
                     sp::RoundCheck::law_only);
    return mw::check_distribution(counts, sp::pair_probs(chain.P.data(), v), mw::find_op("accept")->check.alpha);
}

// The samples counted when every round is held to the rule (the accept op's
// and the grader's loop).
std::int64_t samples_held_to_rule(sp::RoundFn f, int v, int k, std::int64_t samples) {
    const auto chain = sp::make_chain(v, 42);
    std::vector<std::int32_t> counts(std::size_t(v) * v, 0);
    sp::sample_pairs(chain.P.data(), chain.Q.data(), v, k, samples, f, 42, counts.data());
    std::int64_t n = 0;
    for (std::int32_t c : counts) n += c;
    return n;
}

TEST(AcceptChain, TablesAreDistributionsWithTheZerosThatMatter) {
    for (int v : {2, 3, 7, 8, 33}) {
        const auto c = sp::make_chain(v, 42);
        for (int x = 0; x < v; ++x) {
            double sp_ = 0, sq = 0;
            for (int y = 0; y < v; ++y) sp_ += c.P[std::size_t(x * v + y)], sq += c.Q[std::size_t(x * v + y)];
            EXPECT_NEAR(sp_, 1, 1e-12);
            EXPECT_NEAR(sq, 1, 1e-12);
            if (v > 2) {
                EXPECT_EQ(c.Q[std::size_t(x * v + (x + 1) % v)], 0) << "a token only the residual can produce";
                EXPECT_EQ(c.P[std::size_t(x * v + (x + 2) % v)], 0) << "a token the draft proposes and the target forbids";
            }
        }
    }
}

TEST(AcceptRule, FirstTokenLawIsTheTargetsExactly) {
    // The rule's defining identity, with no sampling: for one round,
    // P(first token = x) = q(x) min(1, p/q) + beta (p - q)+(x) / sum (p - q)+.
    const auto c = sp::make_chain(7, 3);
    const double* p = c.P.data();
    const double* q = c.Q.data();
    double beta = 0, pos = 0;
    for (int x = 0; x < 7; ++x) beta += std::max(0.0, q[x] - p[x]), pos += std::max(0.0, p[x] - q[x]);
    EXPECT_NEAR(beta, pos, 1e-12) << "the rejection mass is the residual's mass";
    for (int x = 0; x < 7; ++x) {
        const double kept = q[x] > 0 ? q[x] * std::min(1.0, p[x] / q[x]) : 0;
        EXPECT_NEAR(kept + beta * std::max(0.0, p[x] - q[x]) / pos, p[x], 1e-12) << x;
    }
}

TEST(AcceptRule, CorrectRulePassesOddShapes) {
    for (auto [v, k] : {std::pair{2, 1}, std::pair{3, 1}, std::pair{7, 2}, std::pair{8, 3}, std::pair{5, 8}}) {
        const auto r = check_rule(sp::speculative_round, v, k, 60000);
        EXPECT_TRUE(r.ok) << "v " << v << " k " << k << ": " << r.message;
    }
    const auto r = check_rule(product_rule<true>, 8, 3, 200000);
    EXPECT_TRUE(r.ok) << "the one-uniform product form with the min is also exact: " << r.message;
}

TEST(AcceptRule, TheSameCheckRejectsTheThreeWrongRules) {
    // The op's default shape: v 8, k 3, 200000 samples.
    const struct {
        const char* name;
        sp::RoundFn f;
    } wrong[] = {{"always_accept", always_accept}, {"resample_from_p", resample_from_p}, {"product_no_min", product_rule<false>}};
    for (const auto& w : wrong)
        for (std::uint64_t call : {0u, 1u}) {
            const auto r = check_rule(w.f, 8, 3, 200000, call);
            EXPECT_FALSE(r.ok) << w.name << " passed the check (call " << call << ")";
            // Rejected either by the chi-square test (p below alpha) or by a
            // token of probability 0 drawn (always_accept emits the draft's
            // token the target forbids).
            if (!r.stat_tests.empty()) EXPECT_LT(r.stat_tests[0].p_value, 1e-6) << w.name;
            else EXPECT_NE(r.message.find("probability 0"), std::string::npos) << w.name << ": " << r.message;
            std::printf("%s (call %d): %s\n", w.name, int(call), r.message.c_str());
        }
}

// Greedy on position-dependent chains: the rule gives the target's tokens
// for every k; a loop that forgets the rollback, or keeps one draft too
// many, does not.

TEST(AcceptGreedy, TargetsTokensForEveryKAndNotWithoutRollback) {
    for (int v : {2, 7, 8, 33})
        for (int steps : {1, 7, 64, 129}) {
            const int rows = steps + 8 + 2;
            const auto c = sp::make_chain(v, 9);
            const auto bias = sp::make_bias(rows, v, 9);
            const auto want = sp::greedy_oracle(c.P.data(), bias.data(), rows, v, steps);
            std::vector<std::int32_t> got(static_cast<std::size_t>(steps));
            for (int k = 1; k <= 8; ++k) {
                sp::greedy_tokens(c.P.data(), c.Q.data(), bias.data(), rows, v, k, steps, sp::speculative_round, got.data());
                EXPECT_EQ(std::vector<int>(got.begin(), got.end()), want) << "v " << v << " steps " << steps << " k " << k;
            }
        }
    const int v = 8, steps = 64, rows = steps + 3 + 2;
    const auto c = sp::make_chain(v, 42);
    const auto bias = sp::make_bias(rows, v, 42);
    const auto want = sp::greedy_oracle(c.P.data(), bias.data(), rows, v, steps);
    std::vector<std::int32_t> got(static_cast<std::size_t>(steps));
    for (sp::RoundFn f : {no_rollback, off_by_one}) {
        sp::greedy_tokens(c.P.data(), c.Q.data(), bias.data(), rows, v, 3, steps, f, got.data());
        EXPECT_NE(std::vector<int>(got.begin(), got.end()), want) << (f == no_rollback ? "no rollback" : "off by one");
    }
}

// Decisions: the count of drafts the rule keeps, read here without the rule
// (draft i kept while u_i q_i(d_i) < p_i(d_i)), on the same seeded rounds.
int accepted_prefix(int K, int V, const int* d, const double* q, const double* p, const double* u, double, int len, int* next,
                    int* keep) {
    int n = 0;
    while (n < K && u[n] * q[std::size_t(n) * V + d[n]] < p[std::size_t(n) * V + d[n]]) ++n;
    *next = 0;
    *keep = len + 1 + n;
    return n;
}

// No rule at all: no draft kept, the token drawn from the target's row.
int never_accepts(int, int V, const int*, const double*, const double* p, const double*, double r, int len, int* next,
                  int* keep) {
    *next = sp::draw(p, V, r);
    *keep = len + 1;
    return 0;
}

TEST(AcceptDecisions, TheRulesAcceptancesWhichTheLawAloneCannotSee) {
    for (auto [v, k] : {std::pair{2, 1}, std::pair{7, 2}, std::pair{8, 3}, std::pair{5, 8}}) {
        const auto c = sp::make_chain(v, 42);
        std::vector<std::int32_t> rule(2 * sp::kDecisionRounds), want(rule.size()), never(rule.size());
        sp::decide_rounds(c.P.data(), c.Q.data(), v, k, sp::speculative_round, 42, rule.data());
        sp::decide_rounds(c.P.data(), c.Q.data(), v, k, accepted_prefix, 42, want.data());
        EXPECT_EQ(rule, want) << "v " << v << " k " << k;
        // Rounds of several kinds: none kept, some kept (all k, where k is small).
        std::set<int> kinds;
        for (int i = 0; i < sp::kDecisionRounds; ++i) kinds.insert(rule[2 * i]);
        EXPECT_TRUE(kinds.count(0)) << "v " << v << " k " << k;
        EXPECT_GE(kinds.size(), std::size_t(std::min(k + 1, 3))) << "v " << v << " k " << k;
        if (k <= 3) {
            EXPECT_TRUE(kinds.count(k)) << "v " << v << " k " << k;
        }
        sp::decide_rounds(c.P.data(), c.Q.data(), v, k, never_accepts, 42, never.data());
        EXPECT_NE(never, rule) << "v " << v << " k " << k;
    }
    // Never accepting has the target's law: the distribution check alone
    // passes it, which is why the decisions are an output.
    EXPECT_TRUE(check_rule(never_accepts, 8, 3, 200000).ok);
}

// Held to the rule, the sampling loop runs every round of a right rule and
// stops at the first round a wrong one decides otherwise: a count the
// uniforms do not give (never_accepts, always_accept, the one-uniform
// product forms, exact in law or not) or a *keep that is not len + 1 + n
// (no_rollback, off_by_one). A wrong residual decides like the rule and is
// left to the law.
TEST(AcceptDecisions, EverySampledRoundIsHeldToTheRule) {
    for (auto [v, k] : {std::pair{2, 1}, std::pair{7, 2}, std::pair{8, 3}, std::pair{33, 4}}) {
        EXPECT_EQ(samples_held_to_rule(sp::speculative_round, v, k, 5000), 5000) << "v " << v << " k " << k;
        EXPECT_EQ(samples_held_to_rule(accepted_prefix, v, k, 5000), 5000) << "v " << v << " k " << k;
        EXPECT_EQ(samples_held_to_rule(resample_from_p, v, k, 5000), 5000) << "v " << v << " k " << k;
        const struct {
            const char* name;
            sp::RoundFn f;
        } wrong[] = {{"never_accepts", never_accepts}, {"always_accept", always_accept}, {"no_rollback", no_rollback},
                     {"off_by_one", off_by_one}, {"product_with_min", product_rule<true>}};
        for (const auto& w : wrong) {
            if (k == 1 && w.f == product_rule<true>) continue;  // one draft: the product is the draft's own test
            EXPECT_LT(samples_held_to_rule(w.f, v, k, 5000), 100) << w.name << " v " << v << " k " << k;
        }
    }
}

TEST(AcceptOp, RegisteredRungPassesThroughTheHarness) {
    const mw::Op* op = mw::find_op("accept");
    ASSERT_NE(op, nullptr);
    const mw::Shape s{{{"v", 8}, {"k", 3}, {"samples", 50000}, {"steps", 33}}};
    mw::Problem p = op->make_problem(s, mw::DType::f32, 7);
    const auto oracle = op->oracle(p);
    for (const auto* v : mw::variants_of("accept", mw::Backend::cpu)) {
        const auto r = mw::check_variant(*op, *v, p, oracle);
        EXPECT_TRUE(r.correct) << v->name << ": " << r.message;
    }
    EXPECT_FALSE(op->validate(mw::Shape{{{"v", 1}, {"k", 3}, {"samples", 10}, {"steps", 1}}}).empty());
    EXPECT_NE(op->validate(mw::Shape{{{"v", 8}, {"k", 17}, {"samples", 10}, {"steps", 1}}}).find("1..16"), std::string::npos);
    EXPECT_NE(op->validate(mw::Shape{{{"v", 8}, {"k", 0}, {"samples", 10}, {"steps", 1}}}).find("1..16"), std::string::npos);
    EXPECT_NE(op->validate(mw::Shape{{{"v", 8}, {"k", 3}, {"samples", 0}, {"steps", 1}}}).find("1..100000000"),
              std::string::npos);
}

}  // namespace
