// The next-token sampler against the distribution it claims to draw from,
// with the harness's distribution check (Pearson chi-square, false-failure
// probability 1e-6), and negative controls the same check rejects.
#include <gtest/gtest.h>

#include <random>

#include "harness/check.hpp"
#include "kernels/model/sampling.hpp"

namespace {

std::vector<float> logits(int V, unsigned seed) {
    std::mt19937 g{seed};
    std::normal_distribution<float> n(0.0f, 2.0f);
    std::vector<float> z(static_cast<std::size_t>(V));
    for (float& x : z) x = n(g);
    return z;
}

mw::Buffer counts(const std::vector<float>& z, double temperature, int top_k, int draws, std::uint64_t seed) {
    mw::Buffer b = mw::Buffer::make("counts", mw::DType::f64, z.size());
    std::fill(b.as<double>(), b.as<double>() + z.size(), 0.0);
    for (int i = 0; i < draws; ++i)
        b.as<double>()[mw::model::sample_token(z.data(), int(z.size()), temperature, top_k, seed, i)] += 1;
    return b;
}

TEST(Sampling, DrawsFollowTheTemperedTopKDistribution) {
    const auto z = logits(256, 1);
    for (auto [t, k] : {std::pair{0.8, 40}, std::pair{1.0, 0}, std::pair{0.5, 7}, std::pair{2.0, 1}}) {
        const auto p = mw::model::sampling_probs(z.data(), 256, t, k);
        const auto r = mw::check_distribution(counts(z, t, k, 200000, 5), p, 1e-6);
        EXPECT_TRUE(r.ok) << "T = " << t << ", k = " << k << ": " << r.message;
        int support = 0;
        for (double x : p) support += x > 0;
        EXPECT_EQ(support, k ? k : 256);
    }
}

TEST(Sampling, WrongDistributionsAreRejected) {
    const auto z = logits(256, 2);
    // Drawn at T = 1 but claimed at T = 0.8; drawn from the top 41 but claimed top 40.
    auto r = mw::check_distribution(counts(z, 1.0, 40, 200000, 6), mw::model::sampling_probs(z.data(), 256, 0.8, 40), 1e-6);
    EXPECT_FALSE(r.ok);
    r = mw::check_distribution(counts(z, 0.8, 41, 200000, 7), mw::model::sampling_probs(z.data(), 256, 0.8, 40), 1e-6);
    EXPECT_FALSE(r.ok);
}

TEST(Sampling, GreedyTakesTheFirstMaximumAndIsReproducible) {
    std::vector<float> z = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
    EXPECT_EQ(mw::model::sample_token(z.data(), 5, 0.0, 0, 1, 0), 1);
    EXPECT_EQ(mw::model::sampling_probs(z.data(), 5, 0.0, 0)[1], 1.0);
    const auto w = logits(256, 3);
    for (int i = 0; i < 50; ++i)
        EXPECT_EQ(mw::model::sample_token(w.data(), 256, 0.9, 20, 11, i), mw::model::sample_token(w.data(), 256, 0.9, 20, 11, i));
}

}  // namespace
