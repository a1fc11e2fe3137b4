// The n-gram baseline (model/ngram.hpp): interpolated Witten-Bell
// probabilities against values worked by hand on a tiny text, laws that sum
// to one, an unseen context falling back to the shorter one, and the
// cross-entropy's two ends (a text it has seen repeating, random bytes).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "model/ngram.hpp"

namespace {

using mw::model::NgramModel;

double p(const NgramModel& m, const std::string& history, char w) {
    return m.prob(reinterpret_cast<const unsigned char*>(history.data()), history.size(), static_cast<unsigned char>(w));
}

// "abracadabra": 11 bytes, 5 kinds (a 5, b 2, r 2, c 1, d 1). Order 1:
// P1(w) = (c(w) + 5/256) / (11 + 5). Order 2, context 'b': followed by r
// twice (c = 2, T = 1); context 'a': by b, c, d, b (c = 4, T = 3).
TEST(Ngram, WittenBellByHand) {
    const NgramModel m("abracadabra", 2);
    EXPECT_NEAR(p(m, "", 'a'), 0.313720703125, 1e-15);          // (5 + 5/256) / 16
    EXPECT_NEAR(p(m, "", 'z'), 0.001220703125, 1e-15);          // (0 + 5/256) / 16
    EXPECT_NEAR(p(m, "b", 'r'), 0.708740234375, 1e-15);         // (2 + 1 * 0.126220703125) / 3
    EXPECT_NEAR(p(m, "b", 'a'), 0.104573567708333, 1e-14);      // (0 + 1 * 0.313720703125) / 3
    EXPECT_NEAR(p(m, "xa", 'b'), 0.339808872767857, 1e-14);     // (2 + 3 * 0.126220703125) / 7, last byte only
    EXPECT_NEAR(p(m, "z", 'a'), 0.313720703125, 1e-15);         // 'z' never seen: order 1's
    // "ab": -(ln P1(a) + ln P2(b | a)) / 2
    EXPECT_NEAR(m.cross_entropy("ab"), -(std::log(0.313720703125) + std::log(0.339808872767857)) / 2, 1e-12);
}

TEST(Ngram, EveryLawSumsToOne) {
    const std::string text = "the cat sat on the mat; the rat ate the hat.";
    for (int order = 1; order <= 6; ++order) {
        const NgramModel m(text, order);
        for (const std::string h : {"", "t", "th", "the", "the ", "qq", "at", " the r"}) {
            double sum = 0;
            for (int w = 0; w < 256; ++w) sum += p(m, h, static_cast<char>(w));
            EXPECT_NEAR(sum, 1.0, 1e-12) << "order " << order << ", history '" << h << "'";
        }
    }
}

TEST(Ngram, CrossEntropyFromSeenToNoise) {
    std::string periodic;
    for (int i = 0; i < 200; ++i) periodic += "the cat sat on the mat. ";
    const NgramModel seen(periodic, 6);
    EXPECT_LT(seen.cross_entropy("the cat sat on the mat. the cat sat on the mat. "), 0.2);
    std::mt19937 g(7);
    std::string a(100000, '\0'), b(20000, '\0');
    for (char& c : a) c = static_cast<char>(g());
    for (char& c : b) c = static_cast<char>(g());
    // Nothing to learn: a unigram comes to about ln 256; longer contexts,
    // each seen about once, only do worse (Witten-Bell trusts them).
    EXPECT_NEAR(NgramModel(a, 1).cross_entropy(b), std::log(256.0), 0.01 * std::log(256.0));
    EXPECT_GT(NgramModel(a, 3).cross_entropy(b), std::log(256.0));
}

TEST(Ngram, BadArgumentsAreRefused) {
    EXPECT_THROW(NgramModel("abc", 0), std::invalid_argument);
    EXPECT_THROW(NgramModel("abc", 9), std::invalid_argument);
    EXPECT_THROW(NgramModel("", 3), std::invalid_argument);
    EXPECT_THROW(NgramModel("abc", 3).cross_entropy(""), std::invalid_argument);
}

}  // namespace
