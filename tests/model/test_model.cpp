// The model stack: configuration checks, the fp64 reference's backward pass
// against finite differences of its forward pass, its two independent fp64
// forwards against each other (whole sequence vs token-by-token with a
// cache), and the fp32 training step against the fp64 reference.
#include <gtest/gtest.h>

#include <map>

#include <cmath>
#include <numeric>
#include <random>

#include "harness/check.hpp"
#include "kernels/model/model_cpu.hpp"
#include "model/model.hpp"

namespace {

using mw::model::Config;

Config tiny(int d = 24, int layers = 2, int heads = 4, int kv_heads = 2, int d_ff = 20, int vocab = 13, int max_seq = 9) {
    Config c;
    c.d_model = d, c.layers = layers, c.heads = heads, c.kv_heads = kv_heads, c.d_ff = d_ff, c.vocab = vocab;
    c.max_seq = max_seq;
    return c;
}

std::vector<int> seq(int n, int vocab, unsigned seed) {
    std::mt19937 g{seed};
    std::vector<int> t(static_cast<std::size_t>(n));
    for (int& x : t) x = int(g() % unsigned(vocab));
    return t;
}

// Parameters with some spread in the norm gains too (init sets them to 1,
// which would hide a gain that is applied twice or not at all).
std::vector<double> params64(const Config& c, std::uint64_t seed) {
    auto p = mw::model::init_params(c, seed);
    std::vector<double> d(p.begin(), p.end());
    std::mt19937 g{static_cast<unsigned>(seed)};
    std::uniform_real_distribution<double> u(0.5, 1.5), w(-0.3, 0.3);
    for (const auto& t : mw::model::layout(c))
        for (std::size_t i = t.offset; i < t.offset + t.count; ++i) d[i] = t.shape.size() == 1 ? u(g) : w(g);
    return d;
}

TEST(ModelConfig, RejectsBadFieldsByName) {
    auto expect_bad = [](Config c, const std::string& field) {
        const std::string e = mw::model::validate(c);
        EXPECT_NE(e.find(field), std::string::npos) << "expected an error naming " << field << ", got: " << e;
        EXPECT_THROW(mw::model::require_valid(c), std::invalid_argument);
    };
    Config c;
    EXPECT_EQ(mw::model::validate(c), "");
    Config b = c; b.heads = 7; expect_bad(b, "heads");            // 256 % 7 != 0
    b = c; b.kv_heads = 3; expect_bad(b, "kv_heads");              // 8 % 3 != 0
    b = c; b.kv_heads = 0; expect_bad(b, "kv_heads");
    b = c; b.d_model = 0; expect_bad(b, "d_model");
    b = c; b.d_model = 24, b.heads = 8; expect_bad(b, "heads");    // head_dim 3 is odd
    b = c; b.d_ff = -1; expect_bad(b, "d_ff");
    b = c; b.vocab = 1; expect_bad(b, "vocab");
    b = c; b.max_seq = 0; expect_bad(b, "max_seq");
    b = c; b.layers = 0; expect_bad(b, "layers");
}

TEST(ModelConfig, DefaultIsAFewMillionParameters) {
    const auto n = mw::model::param_count(Config{});
    EXPECT_GT(n, 2'000'000u);
    EXPECT_LT(n, 5'000'000u);
    // The layout tiles the flat vector exactly.
    std::size_t at = 0;
    for (const auto& t : mw::model::layout(Config{})) {
        EXPECT_EQ(t.offset, at) << t.name;
        at += t.count;
    }
    EXPECT_EQ(at, n);
}

// bind() (pointers into the flat vector, used by every path) agrees with
// layout() (names and offsets, used by the checkpoint files) on a config
// where no two tensor sizes coincide.
TEST(ModelConfig, BindAgreesWithLayout) {
    Config c;
    c.d_model = 24, c.layers = 3, c.heads = 6, c.kv_heads = 2, c.d_ff = 40, c.vocab = 11;
    const std::vector<float> flat(mw::model::param_count(c));
    const float* base = flat.data();
    const auto P = mw::model::bind(c, base);
    std::map<std::string, const float*> at = {{"embed", P.embed}, {"final_norm", P.final_norm}};
    for (int l = 0; l < c.layers; ++l) {
        const auto& w = P.layer[std::size_t(l)];
        const std::string p = "layers." + std::to_string(l) + ".";
        at[p + "attn_norm"] = w.attn_norm, at[p + "wq"] = w.wq, at[p + "wk"] = w.wk, at[p + "wv"] = w.wv;
        at[p + "wo"] = w.wo, at[p + "mlp_norm"] = w.mlp_norm, at[p + "w1"] = w.w1, at[p + "w3"] = w.w3, at[p + "w2"] = w.w2;
    }
    const auto t = mw::model::layout(c);
    ASSERT_EQ(t.size(), at.size());
    for (const auto& e : t) EXPECT_EQ(std::size_t(at.at(e.name) - base), e.offset) << e.name;
    EXPECT_EQ(mw::model::layer_param_count(c), t[10].offset - t[1].offset);  // layers.1.attn_norm - layers.0.attn_norm
}

// The backward pass of every tensor type (embedding/head, both norms, the four
// attention projections, the three MLP matrices, the final norm) against
// central differences of the forward pass, in fp64.
void finite_difference_check(const Config& c, int T) {
    auto p = params64(c, 7);
    const auto tokens = seq(T, c.vocab, 1), targets = seq(T, c.vocab, 2);
    std::vector<double> grad(p.size(), 0.0);
    mw::model::ref_loss_grad(c, p.data(), tokens.data(), targets.data(), T, grad.data());
    std::mt19937 g(3);
    for (const auto& t : mw::model::layout(c)) {
        for (int probe = 0; probe < 4; ++probe) {
            const std::size_t i = t.offset + g() % t.count;
            const double h = 1e-5, keep = p[i];
            p[i] = keep + h;
            const double up = mw::model::ref_loss(c, p.data(), tokens.data(), targets.data(), T);
            p[i] = keep - h;
            const double down = mw::model::ref_loss(c, p.data(), tokens.data(), targets.data(), T);
            p[i] = keep;
            const double fd = (up - down) / (2 * h);
            EXPECT_NEAR(grad[i], fd, 1e-7 + 1e-5 * std::fabs(fd)) << t.name << "[" << i - t.offset << "]";
        }
    }
}

TEST(ModelReference, GradientsMatchFiniteDifferencesGQA) { finite_difference_check(tiny(), 7); }
TEST(ModelReference, GradientsMatchFiniteDifferencesMQA) { finite_difference_check(tiny(12, 1, 3, 1, 7, 5, 4), 4); }
TEST(ModelReference, GradientsMatchFiniteDifferencesMHAOneToken) { finite_difference_check(tiny(8, 1, 2, 2, 5, 3, 3), 1); }

// Two fp64 forwards written independently: the whole-sequence pass and the
// cached decoder must give the same logits at every position.
TEST(ModelReference, CachedDecoderMatchesSequenceForward) {
    for (Config c : {tiny(), tiny(12, 3, 3, 1, 7, 5, 6), tiny(16, 1, 2, 2, 9, 11, 7)}) {
        const auto p = params64(c, 11);
        const int T = c.max_seq;
        const auto tokens = seq(T, c.vocab, 4);
        std::vector<double> logits;
        mw::model::ref_loss(c, p.data(), tokens.data(), tokens.data(), T, &logits);
        auto cache = mw::model::ref_cache(c);
        for (int t = 0; t < T; ++t) {
            const auto z = mw::model::ref_step(c, p.data(), tokens[std::size_t(t)], cache);
            for (int v = 0; v < c.vocab; ++v)
                ASSERT_NEAR(z[std::size_t(v)], logits[std::size_t(t) * c.vocab + v], 1e-12) << "position " << t;
        }
        EXPECT_THROW(mw::model::ref_step(c, p.data(), 0, cache), std::invalid_argument);  // past max_seq
    }
}

// Widening keeps the function: the logits of the model widened w times
// (model::widen_params) are the narrow model's at every position, for GQA,
// MQA and MHA, w = 1..4 (3: the 1/w is not exact, the sums still agree).
TEST(ModelWiden, WidenedLogitsAreTheNarrowModels) {
    for (Config c : {tiny(), tiny(12, 3, 3, 1, 7, 5, 6), tiny(16, 1, 2, 2, 9, 11, 7)}) {
        const auto p = params64(c, 13);
        const auto tokens = seq(c.max_seq, c.vocab, 8);
        std::vector<double> want;
        mw::model::ref_loss(c, p.data(), tokens.data(), tokens.data(), c.max_seq, &want);
        for (int w = 1; w <= 4; ++w) {
            const Config wc = mw::model::widened_config(c, w);
            EXPECT_EQ(wc.d_model, w * c.d_model);
            EXPECT_EQ(wc.heads, w * c.heads);
            EXPECT_EQ(wc.kv_heads, w * c.kv_heads);
            EXPECT_EQ(wc.d_ff, w * c.d_ff);
            EXPECT_EQ(wc.head_dim(), c.head_dim());
            const auto wp = mw::model::widen_params(c, p.data(), w);
            ASSERT_EQ(wp.size(), mw::model::param_count(wc));
            std::vector<double> got;
            mw::model::ref_loss(wc, wp.data(), tokens.data(), tokens.data(), c.max_seq, &got);
            ASSERT_EQ(got.size(), want.size());
            for (std::size_t i = 0; i < want.size(); ++i)
                ASSERT_NEAR(got[i], want[i], 1e-11 * std::max(1.0, std::abs(want[i])))
                    << "w " << w << ", position " << i / std::size_t(c.vocab) << ", token " << i % std::size_t(c.vocab);
        }
    }
    EXPECT_THROW(mw::model::widened_config(tiny(), 0), std::invalid_argument);
    EXPECT_THROW(mw::model::widened_config(tiny(), 65), std::invalid_argument);
}

// The widening is not the identity with extra bytes: the wide model's
// second copy of a head does work (zeroing it changes the logits).
TEST(ModelWiden, EveryCopyCarriesWeight) {
    const Config c = tiny();
    const auto p = params64(c, 13);
    const auto tokens = seq(c.max_seq, c.vocab, 8);
    const Config wc = mw::model::widened_config(c, 2);
    auto wp = mw::model::widen_params(c, p.data(), 2);
    std::vector<double> before, after;
    mw::model::ref_loss(wc, wp.data(), tokens.data(), tokens.data(), c.max_seq, &before);
    for (const auto& t : mw::model::layout(wc))
        if (t.name == "layers.0.wv")  // the second copy's value columns
            for (std::int64_t r = 0; r < t.shape[0]; ++r)
                for (std::int64_t j = wc.kv_dim() / 2; j < wc.kv_dim(); ++j) wp[t.offset + std::size_t(r * t.shape[1] + j)] = 0;
    mw::model::ref_loss(wc, wp.data(), tokens.data(), tokens.data(), c.max_seq, &after);
    double diff = 0;
    for (std::size_t i = 0; i < before.size(); ++i) diff = std::max(diff, std::abs(after[i] - before[i]));
    EXPECT_GT(diff, 1e-3);
}

// The fp32 training step (the levers' GEMM, softmax rows, element-wise
// layers) against the fp64 reference: loss, logits and every parameter's
// gradient, for batches of several sequences.
void fp32_step_check(const Config& c, int B, int T) {
    const auto p64 = params64(c, 5);
    const std::vector<float> p32(p64.begin(), p64.end());
    std::vector<double> p64r(p32.begin(), p32.end());  // the fp32-rounded weights, in fp64
    std::vector<int> tokens, targets;
    for (int b = 0; b < B; ++b) {
        auto x = seq(T, c.vocab, unsigned(10 + b)), y = seq(T, c.vocab, unsigned(20 + b));
        tokens.insert(tokens.end(), x.begin(), x.end());
        targets.insert(targets.end(), y.begin(), y.end());
    }
    std::vector<double> g64(p64r.size(), 0.0), logits64;
    double loss64 = 0;
    for (int b = 0; b < B; ++b) {
        std::vector<double> gb(p64r.size(), 0.0), zb;
        loss64 += mw::model::ref_loss_grad(c, p64r.data(), tokens.data() + b * T, targets.data() + b * T, T, gb.data()) / B;
        mw::model::ref_loss(c, p64r.data(), tokens.data() + b * T, targets.data() + b * T, T, &zb);
        logits64.insert(logits64.end(), zb.begin(), zb.end());
        for (std::size_t i = 0; i < gb.size(); ++i) g64[i] += gb[i] / B;
    }
    mw::model::cpu::TrainStep step(c, B, T);
    std::vector<float> g32(p32.size(), 0.0f), z32(logits64.size());
    const double loss_f = step.forward(p32.data(), tokens.data(), targets.data(), z32.data());
    const double loss32 = step.forward_backward(p32.data(), g32.data(), tokens.data(), targets.data());
    EXPECT_EQ(loss_f, loss32);
    EXPECT_NEAR(loss32, loss64, 1e-5 * std::fabs(loss64));
    // Logits: the standard element-wise tolerance (harness/check.hpp) with
    // the longest reduction chain behind a logit, every block's MLP.
    mw::Buffer z = mw::Buffer::make("logits", mw::DType::f32, z32.size(), {B * T, c.vocab});
    std::copy(z32.begin(), z32.end(), z.as<float>());
    const auto zr = mw::check_close(z, logits64, mw::DType::f32, double(c.d_ff) * c.layers);
    EXPECT_TRUE(zr.ok) << zr.message;
    // Gradients are sums over every token of signed terms, so single
    // elements can cancel to nearly nothing: judge each tensor by the
    // tolerance model's norm rule, ||g32 - g64|| / ||g64|| <= rtol, with the
    // reduction grown by the B*T tokens summed into it.
    const double rtol = mw::default_tolerance(mw::DType::f32, double(B) * T * c.d_ff * c.layers, 1.0).rtol;
    for (const auto& t : mw::model::layout(c)) {
        double e = 0, r = 0;
        for (std::size_t i = t.offset; i < t.offset + t.count; ++i)
            e += (g32[i] - g64[i]) * (g32[i] - g64[i]), r += g64[i] * g64[i];
        if (r == 0) {  // a zero gradient (T = 1: q and k) must come out zero
            EXPECT_EQ(e, 0) << "gradient of " << t.name;
            continue;
        }
        EXPECT_LE(std::sqrt(e / r), rtol) << "gradient of " << t.name << " at B = " << B << ", T = " << T;
    }
}

TEST(ModelFp32, TrainStepMatchesReferenceOddShapes) {
    fp32_step_check(tiny(), 1, 1);
    fp32_step_check(tiny(), 3, 7);
    fp32_step_check(tiny(36, 2, 6, 3, 33, 17, 33), 2, 33);  // head_dim 6, edge tiles everywhere
}
// Longer than the attention's 96-row blocks (the causal block skipping):
// 193 = two full blocks and a one-row block.
TEST(ModelFp32, TrainStepMatchesReferenceLongSequence) {
    fp32_step_check(tiny(16, 1, 2, 1, 24, 11, 193), 1, 193);
    fp32_step_check(tiny(16, 2, 4, 2, 24, 11, 127), 2, 127);
}
TEST(ModelFp32, TrainStepMatchesReferenceMQAandMHA) {
    fp32_step_check(tiny(32, 1, 4, 1, 40, 19, 16), 2, 16);
    fp32_step_check(tiny(32, 2, 4, 4, 40, 19, 16), 2, 16);
}

}  // namespace

// The fp32 decoder (the precision lever's GEMVs, a contiguous cache)
// against the fp64 cached decoder, position by position.
TEST(ModelFp32, DecoderMatchesReferenceStepByStep) {
    for (Config c : {tiny(), tiny(36, 2, 6, 3, 33, 17, 33), tiny(32, 1, 4, 1, 40, 19, 16), tiny(8, 1, 2, 2, 5, 3, 1)}) {
        const auto p64 = params64(c, 9);
        const std::vector<float> p32(p64.begin(), p64.end());
        const std::vector<double> p64r(p32.begin(), p32.end());
        mw::model::cpu::Decoder dec(c, p32.data());
        auto cache = mw::model::ref_cache(c);
        const auto tokens = seq(c.max_seq, c.vocab, 6);
        for (int t = 0; t < c.max_seq; ++t) {
            const float* z = dec.step(tokens[std::size_t(t)]);
            const auto ref = mw::model::ref_step(c, p64r.data(), tokens[std::size_t(t)], cache);
            double e = 0, r = 0;
            for (int v = 0; v < c.vocab; ++v) e += (z[v] - ref[std::size_t(v)]) * (z[v] - ref[std::size_t(v)]), r += ref[std::size_t(v)] * ref[std::size_t(v)];
            ASSERT_LT(std::sqrt(e / r), 1e-5) << "position " << t << " of d_model " << c.d_model;
        }
        EXPECT_EQ(dec.position(), c.max_seq);
        EXPECT_THROW(dec.step(0), std::invalid_argument);
        dec.reset();
        EXPECT_NO_THROW(dec.step(0));
    }
}
