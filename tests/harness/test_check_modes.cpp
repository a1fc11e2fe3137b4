// The check modes of whole-workload ops: token sequences (exact, except for
// divergence at a near-tie) and distributions (a chi-square test), each with
// the negative control it exists for; and per-output modes in one op.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "harness/check.hpp"
#include "harness/inputs.hpp"

#if __has_include(<boost/math/distributions/chi_squared.hpp>)
#include <boost/math/distributions/chi_squared.hpp>
#define MW_HAVE_BOOST_MATH 1
#endif

namespace {

using mw::Buffer;
using mw::DType;

// ------------------------------------------------------------ token sequences

// Two sequences of 10 steps. Every step's top-2 margin is large (0.5) except
// step 4 of row 0 and step 6 of row 1, which are near-ties.
constexpr std::int64_t kRows = 2, kSteps = 10;
constexpr double kThreshold = 1e-4;

struct Tokens {
    std::vector<double> ids, margins;
    std::vector<double> oracle() const { return mw::token_oracle(ids, margins); }
    Buffer buffer() const {  // a candidate that reproduces the oracle
        Buffer b = Buffer::make("tokens", DType::i32, ids.size(), {kRows, kSteps});
        for (std::size_t i = 0; i < ids.size(); ++i) b.as<std::int32_t>()[i] = std::int32_t(ids[i]);
        return b;
    }
};

Tokens make_tokens() {
    Tokens t;
    for (std::int64_t i = 0; i < kRows * kSteps; ++i) {
        t.ids.push_back(double((i * 7919) % 50257));
        t.margins.push_back(0.5);
    }
    t.margins[0 * kSteps + 4] = 1e-7;
    t.margins[1 * kSteps + 6] = 0.0;  // an exact tie in fp64
    return t;
}

// Diverges from step `from` of `row` on: a different token there and after.
void diverge(Buffer& b, std::int64_t row, std::int64_t from) {
    for (std::int64_t t = from; t < kSteps; ++t) b.as<std::int32_t>()[row * kSteps + t] += 1 + int(t);
}

TEST(TokenSequence, IdenticalSequencePasses) {
    const Tokens t = make_tokens();
    auto r = mw::check_token_sequence(t.buffer(), t.oracle(), kThreshold);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.near_ties, 0u);
    EXPECT_TRUE(r.note.empty());
}

TEST(TokenSequence, DivergingAtALargeMarginStepFailsNamingStepTokensAndMargin) {
    const Tokens t = make_tokens();
    Buffer b = t.buffer();
    diverge(b, 0, 2);
    auto r = mw::check_token_sequence(b, t.oracle(), kThreshold);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.near_ties, 0u);
    EXPECT_NE(r.message.find("tokens[0][2]"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("step 2"), std::string::npos) << r.message;
    const std::string got = std::to_string(std::int64_t(t.ids[2]) + 3), want = std::to_string(std::int64_t(t.ids[2]));
    EXPECT_NE(r.message.find("token " + got + ", oracle " + want), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("margin is 0.5"), std::string::npos) << r.message;
}

TEST(TokenSequence, DivergingAtANearTiePassesAndCountsOneNearTie) {
    const Tokens t = make_tokens();
    Buffer b = t.buffer();
    diverge(b, 0, 4);  // every later token of row 0 differs too: legitimately another path
    auto r = mw::check_token_sequence(b, t.oracle(), kThreshold);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.near_ties, 1u);
    EXPECT_NE(r.note.find("tokens[0][4]"), std::string::npos) << r.note;
    EXPECT_NE(r.note.find("step 4"), std::string::npos) << r.note;
}

TEST(TokenSequence, ANearTieInOneSequenceExcusesNoOther) {
    const Tokens t = make_tokens();
    Buffer b = t.buffer();
    diverge(b, 0, 4);  // near-tie: accepted
    diverge(b, 1, 3);  // row 1's near-tie is at step 6, not 3: fails
    auto r = mw::check_token_sequence(b, t.oracle(), kThreshold);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.near_ties, 1u);
    EXPECT_NE(r.message.find("tokens[1][3]"), std::string::npos) << r.message;
}

TEST(TokenSequence, AnExactTieIsANearTie) {
    const Tokens t = make_tokens();
    Buffer b = t.buffer();
    diverge(b, 1, 6);
    auto r = mw::check_token_sequence(b, t.oracle(), kThreshold);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.near_ties, 1u);
}

TEST(TokenSequence, DivergingBeforeTheNearTieStepFails) {
    // The near-tie at step 4 excuses a divergence at step 4, not one before it.
    const Tokens t = make_tokens();
    Buffer b = t.buffer();
    diverge(b, 0, 3);
    EXPECT_FALSE(mw::check_token_sequence(b, t.oracle(), kThreshold).ok);
}

TEST(TokenSequence, UnwrittenTokensFailEvenAfterANearTie) {
    const Tokens t = make_tokens();
    Buffer b = t.buffer();
    diverge(b, 0, 4);
    b.as<std::int32_t>()[9] = 0x7F7F7F7F;  // what poison() leaves: the variant stopped writing
    auto r = mw::check_token_sequence(b, t.oracle(), kThreshold);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find("never written"), std::string::npos) << r.message;
}

TEST(TokenSequence, AnOracleWithoutMarginsIsRefused) {
    const Tokens t = make_tokens();
    auto r = mw::check_token_sequence(t.buffer(), t.ids, kThreshold);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find("token_oracle"), std::string::npos) << r.message;
}

TEST(TokenSequence, NearTieThresholdFollowsTheToleranceModel) {
    mw::CheckSpec spec;
    // 16 u sqrt(L) with u at least fp32's; a bf16 problem's wider rounding wins.
    EXPECT_DOUBLE_EQ(mw::near_tie_threshold(spec, DType::f32, 4096), 16 * 0x1.0p-24 * 64);
    EXPECT_DOUBLE_EQ(mw::near_tie_threshold(spec, DType::i32, 4096), 16 * 0x1.0p-24 * 64);
    EXPECT_DOUBLE_EQ(mw::near_tie_threshold(spec, DType::bf16, 4096), 16 * 0x1.0p-8 * 64);
    spec.logit_scale = 10;
    spec.tolerance_scale = 2;
    EXPECT_DOUBLE_EQ(mw::near_tie_threshold(spec, DType::f32, 4096), 16 * 0x1.0p-24 * 64 * 20);
}

// ------------------------------------------------------------ distributions

TEST(ChiSquare, SurvivalFunctionMatchesClosedForms) {
    for (double x : {0.1, 1.0, 3.0, 10.0, 50.0, 200.0}) {
        // dof 2: exp(-x/2); dof 1: erfc(sqrt(x/2)); relative accuracy in the far tail too.
        EXPECT_NEAR(mw::chi_square_sf(x, 2) / std::exp(-x / 2), 1.0, 1e-10) << x;
        EXPECT_NEAR(mw::chi_square_sf(x, 1) / std::erfc(std::sqrt(x / 2)), 1.0, 1e-9) << x;
    }
    EXPECT_DOUBLE_EQ(mw::chi_square_sf(0, 5), 1.0);
    // Q(a, x) for integer a: exp(-x) sum_{k<a} x^k / k!.
    const double x = 7.5;
    double sum = 0, term = 1;
    for (int k = 0; k < 4; ++k) sum += term, term *= x / (k + 1);
    EXPECT_NEAR(mw::gamma_q(4, x), std::exp(-x) * sum, 1e-14);
}

#ifdef MW_HAVE_BOOST_MATH
TEST(ChiSquare, SurvivalFunctionAgreesWithBoost) {
    for (double dof : {1.0, 3.0, 9.0, 40.0, 999.0, 20000.0})
        for (double f : {0.2, 0.9, 1.0, 1.1, 2.0, 4.0}) {
            const double x = f * dof;
            const double want = boost::math::cdf(boost::math::complement(boost::math::chi_squared(dof), x));
            if (want < 1e-300) continue;
            EXPECT_NEAR(mw::chi_square_sf(x, dof) / want, 1.0, 1e-8) << "dof " << dof << " x " << x;
        }
}
#endif

// A seeded sampler: inversion of the CDF with 53-bit uniforms from a
// mt19937_64, so the counts are the same on every machine.
std::vector<double> sample_counts(const std::vector<double>& probs, long n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<double> cdf(probs.size());
    double acc = 0;
    for (std::size_t i = 0; i < probs.size(); ++i) cdf[i] = acc += probs[i];
    std::vector<double> counts(probs.size(), 0);
    for (long s = 0; s < n; ++s) {
        const double u = double(rng() >> 11) * 0x1.0p-53 * acc;
        std::size_t c = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
        counts[std::min(c, probs.size() - 1)] += 1;
    }
    return counts;
}

Buffer counts_buffer(const std::vector<double>& counts) {
    Buffer b = Buffer::make("counts", DType::i32, counts.size());
    for (std::size_t i = 0; i < counts.size(); ++i) b.as<std::int32_t>()[i] = std::int32_t(counts[i]);
    return b;
}

// A 50-token vocabulary with a long tail: the last categories are expected
// fewer than 5 times in 10^6 samples and get pooled.
std::vector<double> vocabulary_probs() {
    std::vector<double> p;
    double total = 0;
    for (int i = 0; i < 50; ++i) p.push_back(std::pow(0.75, i)), total += p.back();
    for (double& x : p) x /= total;
    return p;
}

TEST(Distribution, ACorrectSamplerPasses) {
    const auto probs = vocabulary_probs();
    for (std::uint64_t seed : {1u, 2u, 3u}) {
        auto r = mw::check_distribution(counts_buffer(sample_counts(probs, 1000000, seed)), probs, 1e-6);
        EXPECT_TRUE(r.ok) << "seed " << seed << ": " << r.message;
        ASSERT_EQ(r.stat_tests.size(), 1u);
        const auto& t = r.stat_tests[0];
        EXPECT_EQ(t.samples, 1e6);
        EXPECT_EQ(t.categories, 50);
        EXPECT_LT(t.bins, 50);  // the tail was pooled
        EXPECT_GT(t.bins, 30);
        EXPECT_EQ(t.dof, t.bins - 1);
        EXPECT_GE(t.p_value, 1e-6);
    }
}

TEST(Distribution, ASamplerFivePercentOffOnOneCategoryFails) {
    const auto probs = vocabulary_probs();
    auto biased = probs;
    biased[3] *= 1.05;  // one category 5% too likely, then renormalized
    double total = 0;
    for (double p : biased) total += p;
    for (double& p : biased) p /= total;
    auto r = mw::check_distribution(counts_buffer(sample_counts(biased, 1000000, 1)), probs, 1e-6);
    EXPECT_FALSE(r.ok);
    ASSERT_EQ(r.stat_tests.size(), 1u);
    EXPECT_LT(r.stat_tests[0].p_value, 1e-6);
    EXPECT_NE(r.message.find("category 3"), std::string::npos) << r.message;  // named as the worst
    EXPECT_NE(r.message.find("dof"), std::string::npos) << r.message;
}

TEST(Distribution, SamplesAreAcceptedAsWellAsCounts) {
    const std::vector<double> probs = {0.5, 0.25, 0.25};
    std::mt19937_64 rng(7);
    Buffer samples = Buffer::make("samples", DType::i32, 4000);
    for (std::size_t i = 0; i < samples.count; ++i) {
        const double u = double(rng() >> 11) * 0x1.0p-53;
        samples.as<std::int32_t>()[i] = u < 0.5 ? 0 : u < 0.75 ? 1 : 2;
    }
    auto r = mw::check_distribution(samples, probs, 1e-6);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.stat_tests.at(0).samples, 4000);
    // All samples in one category: a sampler that ignores its input.
    for (std::size_t i = 0; i < samples.count; ++i) samples.as<std::int32_t>()[i] = 0;
    EXPECT_FALSE(mw::check_distribution(samples, probs, 1e-6).ok);
    // A sample outside the categories.
    samples.as<std::int32_t>()[17] = 3;
    auto bad = mw::check_distribution(samples, probs, 1e-6);
    EXPECT_FALSE(bad.ok);
    EXPECT_NE(bad.message.find("samples[17]"), std::string::npos) << bad.message;
}

TEST(Distribution, DrawingAnImpossibleCategoryFails) {
    const std::vector<double> probs = {0.5, 0.5, 0.0};
    auto r = mw::check_distribution(counts_buffer({500, 499, 1}), probs, 1e-6);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find("category 2 has probability 0"), std::string::npos) << r.message;
}

TEST(Distribution, PoisonedOrNegativeCountsFail) {
    const std::vector<double> probs = {0.5, 0.5};
    Buffer b = counts_buffer({10, 10});
    mw::poison(b);  // the same huge count everywhere: a perfect fit, never written
    auto r = mw::check_distribution(b, probs, 1e-6);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find("never written"), std::string::npos) << r.message;
    EXPECT_FALSE(mw::check_distribution(counts_buffer({-3, 10}), probs, 1e-6).ok);
}

TEST(ChiSquare, LowerTailIsTheComplementAndAccurateWhereTiny) {
    for (double dof : {1.0, 3.0, 9.0, 40.0})
        for (double f : {0.3, 1.0, 2.5})
            EXPECT_NEAR(mw::chi_square_cdf(f * dof, dof) + mw::chi_square_sf(f * dof, dof), 1.0, 1e-12) << dof << " " << f;
    // dof 2: P(X <= x) = 1 - exp(-x/2), relative accuracy at x = 1e-9.
    for (double x : {1e-9, 1e-3, 0.5})
        EXPECT_NEAR(mw::chi_square_cdf(x, 2) / -std::expm1(-x / 2), 1.0, 1e-10) << x;
    EXPECT_EQ(mw::chi_square_cdf(0, 4), 0.0);
}

// Counts written from the law (the expected counts, rounded) sit closer to
// it than drawing allows: the lower tail fails them, saying so, where the
// same law drawn 10^6 times passes (ACorrectSamplerPasses).
TEST(Distribution, CountsWrittenFromTheLawFailTheLowerTail) {
    const auto probs = vocabulary_probs();
    std::vector<double> written;
    for (double p : probs) written.push_back(std::round(1e6 * p));
    auto r = mw::check_distribution(counts_buffer(written), probs, 1e-6);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find("closer to the expected ones than drawing allows"), std::string::npos) << r.message;
    // Below 8 degrees of freedom the lower tail is not tested: 3 categories
    // drawn to the exact expected counts happen to an honest sampler.
    EXPECT_TRUE(mw::check_distribution(counts_buffer({500, 250, 250}), {0.5, 0.25, 0.25}, 1e-6).ok);
    // Nor where a bin is expected fewer than 20 times (a small shape): 12
    // categories expected 10 times each, drawn to exactly that, pass — and
    // the same written at 20 each, the fewest the lower tail takes, fail.
    const std::vector<double> flat(12, 1.0 / 12);
    EXPECT_TRUE(mw::check_distribution(counts_buffer(std::vector<double>(12, 10)), flat, 1e-6).ok);
    EXPECT_FALSE(mw::check_distribution(counts_buffer(std::vector<double>(12, 20)), flat, 1e-6).ok);
}

// The shape says how many samples a call draws: counts that hold another
// number fail (a sampler stopped early), whatever their fit.
TEST(Distribution, TheShapesSampleCountIsEnforced) {
    const auto probs = vocabulary_probs();
    const Buffer drawn = counts_buffer(sample_counts(probs, 1000000, 1));
    EXPECT_TRUE(mw::check_distribution(drawn, probs, 1e-6, 1e6).ok);
    auto r = mw::check_distribution(drawn, probs, 1e-6, 1e6 + 1);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find("holds 1000000 samples; the shape asks for 1000001"), std::string::npos) << r.message;
    const Buffer early = counts_buffer(sample_counts(probs, 999, 1));
    EXPECT_TRUE(mw::check_distribution(early, probs, 1e-6).ok);  // a fine fit, on its own
    EXPECT_FALSE(mw::check_distribution(early, probs, 1e-6, 1e6).ok);
}

// Six samples of a three-category law are expected fewer than 5 times in
// every category: one pooled bin, a test that cannot fail. It fails instead.
// A law with one category has nothing to pool and is still checked.
TEST(Distribution, TooFewSamplesToFillTwoBinsFail) {
    auto r = mw::check_distribution(counts_buffer({3, 1, 2}), {0.5, 0.25, 0.25}, 1e-6);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find("pool into one bin"), std::string::npos) << r.message;
    EXPECT_TRUE(mw::check_distribution(counts_buffer({6, 0}), {1.0, 0.0}, 1e-6).ok);
    EXPECT_FALSE(mw::check_distribution(counts_buffer({5, 1}), {1.0, 0.0}, 1e-6).ok);
}

// ------------------------------------------------------------ per-output modes

// An op with a floating-point output, a token output and a counts output,
// each checked its own way.
mw::Op three_output_op() {
    mw::Op op;
    op.name = "three_outputs";
    op.check.per_output = {{"tokens", mw::CheckMode::token_sequence}, {"counts", mw::CheckMode::distribution}};
    return op;
}

struct ThreeOutputs {
    mw::Problem p;
    std::vector<std::vector<double>> oracle;
};

ThreeOutputs three_outputs() {
    ThreeOutputs t;
    Buffer y = Buffer::make("y", DType::f32, 4);
    for (int i = 0; i < 4; ++i) y.as<float>()[i] = 0.1f * float(i + 1);
    const Tokens tok = make_tokens();
    const std::vector<double> probs = {0.5, 0.25, 0.25};
    t.p.outputs = {y, tok.buffer(), counts_buffer(sample_counts(probs, 10000, 5))};
    t.oracle = {{0.1, 0.2, 0.3, 0.4}, tok.oracle(), probs};
    return t;
}

TEST(PerOutputModes, EachOutputIsCheckedItsOwnWay) {
    const mw::Op op = three_output_op();
    EXPECT_EQ(op.check.mode_for("y"), mw::CheckMode::tolerance);
    EXPECT_EQ(op.check.mode_for("tokens"), mw::CheckMode::token_sequence);
    auto t = three_outputs();
    auto r = mw::check_problem(op, t.p, t.oracle);
    EXPECT_TRUE(r.ok) << r.message;
    ASSERT_EQ(r.stat_tests.size(), 1u);
    EXPECT_EQ(r.stat_tests[0].output, "counts");

    // A near-tie divergence is counted through check_problem too.
    diverge(t.p.out("tokens"), 0, 4);
    r = mw::check_problem(op, t.p, t.oracle);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.near_ties, 1u);
    EXPECT_FALSE(r.note.empty());

    // The float output still uses the tolerance mode: 1e-3 off fails.
    t.p.out("y").as<float>()[2] += 1e-3f;
    r = mw::check_problem(op, t.p, t.oracle);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find("y[2]"), std::string::npos) << r.message;
}

TEST(PerOutputModes, ANameThatIsNoOutputIsAnError) {
    mw::Op op = three_output_op();
    op.check.per_output["tokenz"] = mw::CheckMode::exact;
    auto t = three_outputs();
    auto r = mw::check_problem(op, t.p, t.oracle);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find("'tokenz'"), std::string::npos) << r.message;
}

}  // namespace
