// decode_step and generate on the GPU decoder (kernels/model/decode_cuda.cuh,
// rungs reference/kv_cache/decode_recompute.cu, optimized/kv_cache/
// decode_cache.cu, decode_graph.cu), run on the CPU by cuda-emu: every rung
// against the op's fp64 oracle at odd contexts, batches and lengths; the
// paged and graph rungs bit-identical to the contiguous cache; the same
// greedy tokens as the CPU's cached rung on the trained model; the
// counters a GPU run reports (launches per step, cache bytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "harness/check.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "reference/kv_cache/generate.hpp"

#ifndef MEMWALL_TEST_EXPECT_EMU
#define MEMWALL_TEST_EXPECT_EMU 0
#endif

// Without the emulator built there is nothing to run: skipped, unless the
// build says it is there (then a missing variant is a failure).
#define MW_EMU_OR_SKIP()                                                                  \
    if (mw::variants_of("generate", mw::Backend::cuda_emu).empty() && !MEMWALL_TEST_EXPECT_EMU) \
    GTEST_SKIP() << "cuda-emu is not built"

namespace {

const mw::Variant* variant(const std::string& op, const std::string& name, mw::Backend b) {
    for (const auto* v : mw::variants_of(op, b))
        if (v->name == name) return v;
    return nullptr;
}

// Runs v once on p; its outputs, as bytes.
std::vector<std::vector<unsigned char>> outputs_of(const mw::Variant& v, mw::Problem& p) {
    mw::Instance inst = v.prepare(p);
    inst.run();
    if (inst.sync) inst.sync();
    if (inst.fetch) inst.fetch();
    std::vector<std::vector<unsigned char>> out;
    for (const auto& b : p.outputs)
        out.emplace_back(static_cast<const unsigned char*>(b.data.get()),
                         static_cast<const unsigned char*>(b.data.get()) + b.size_bytes());
    return out;
}

struct Case {
    std::string op;
    mw::Shape shape;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.op << " at " << c.shape.str(); }

class DecodeCudaEmu : public ::testing::TestWithParam<Case> {};

// Every CUDA rung right by the op's own check, and the rungs that promise it
// (identical_to) bit-identical to theirs.
TEST_P(DecodeCudaEmu, EveryRungMatchesTheOracle) {
    MW_EMU_OR_SKIP();
    const auto& c = GetParam();
    const mw::Op* op = mw::find_op(c.op);
    ASSERT_NE(op, nullptr);
    ASSERT_EQ(op->validate(c.shape), "");
    mw::Problem p = op->make_problem(c.shape, mw::DType::f32, 42);
    const auto oracle = op->oracle(p);
    const auto variants = mw::variants_of(c.op, mw::Backend::cuda_emu);
    ASSERT_GE(variants.size(), 4u) << "recompute, cache, paged and graph";
    for (const auto* v : variants) {
        const auto r = mw::check_variant(*op, *v, p, oracle);
        EXPECT_TRUE(r.correct) << v->name << " at " << c.shape.str() << ": " << r.message;
        if (v->identical_to.empty()) continue;
        const auto* other = variant(c.op, v->identical_to, mw::Backend::cuda_emu);
        ASSERT_NE(other, nullptr) << v->identical_to;
        mw::Problem a = op->make_problem(c.shape, mw::DType::f32, 42), b = op->make_problem(c.shape, mw::DType::f32, 42);
        EXPECT_EQ(outputs_of(*v, a), outputs_of(*other, b)) << v->name << " differs from " << other->name;
    }
}

mw::Shape decode_shape(int ctx, int batch, int kv_heads) {
    return {{{"ctx", ctx}, {"batch", batch}, {"kv_heads", kv_heads}}};
}
mw::Shape generate_shape(int prompt, int tokens) { return {{{"prompt", prompt}, {"tokens", tokens}}}; }

// Small: under emulation every CUDA thread is a fiber. kv_heads 1 and 8 are
// seeded models of the trained one's shape (MQA and MHA); 4 is the trained
// model. Contexts cross a page (16) and a split (16 pages: 256 positions)
// boundary; batches are not multiples of the GEMV's 4 sequences per pass.
INSTANTIATE_TEST_SUITE_P(
    OddShapesFirst, DecodeCudaEmu,
    ::testing::Values(Case{"decode_step", decode_shape(1, 1, 4)}, Case{"decode_step", decode_shape(7, 3, 4)},
                      Case{"decode_step", decode_shape(33, 5, 1)}, Case{"decode_step", decode_shape(17, 2, 8)},
                      Case{"generate", generate_shape(1, 1)},
                      Case{"generate", generate_shape(7, 5)}, Case{"generate", generate_shape(3, 14)}),
    [](const testing::TestParamInfo<Case>& i) {
        std::string n = i.param.op;
        for (const auto& [k, v] : i.param.shape.axes) n += "_" + k + std::to_string(v);
        return n;
    });

// The Done-means of the GPU decode: the GPU decoder's greedy tokens are the
// CPU decoder's, token for token, on the trained model.
TEST(DecodeCudaEmuTokens, SameGreedyTokensAsTheCpuCache) {
    MW_EMU_OR_SKIP();
    const mw::Op* op = mw::find_op("generate");
    const auto s = generate_shape(16, 24);
    const auto* gpu = variant("generate", "graph", mw::Backend::cuda_emu);
    const auto* cpu = variant("generate", "cache", mw::Backend::cpu);
    ASSERT_NE(gpu, nullptr);
    ASSERT_NE(cpu, nullptr);
    mw::Problem a = op->make_problem(s, mw::DType::f32, 42), b = op->make_problem(s, mw::DType::f32, 42);
    const auto got = outputs_of(*gpu, a), want = outputs_of(*cpu, b);
    ASSERT_EQ(got.size(), 1u);
    std::vector<std::int32_t> g(24), w(24);
    std::memcpy(g.data(), got[0].data(), 24 * sizeof(std::int32_t));
    std::memcpy(w.data(), want[0].data(), 24 * sizeof(std::int32_t));
    EXPECT_EQ(g, w);
    std::string text;
    for (int t : g) text += char(t);
    EXPECT_GT(std::count_if(text.begin(), text.end(), [](char ch) { return ch >= 'a' && ch <= 'z'; }), 12)
        << "the trained model continues English text, not noise: '" << text << "'";
}

// What a GPU run's counters say: the chain's 51 launches per step (52 with
// generate's pick), one for a graph; the cache's bytes.
TEST(DecodeCudaEmuCounters, LaunchesPerStepAndCacheBytes) {
    MW_EMU_OR_SKIP();
    const mw::Op* op = mw::find_op("decode_step");
    const auto s = decode_shape(20, 2, 4);
    const auto& c = mw::kv_cache::default_model().config;
    ASSERT_EQ(c.layers, 4);
    for (const std::string name : {"cache", "paged", "graph"}) {
        const auto* v = variant("decode_step", name, mw::Backend::cuda_emu);
        ASSERT_NE(v, nullptr) << name;
        mw::Problem p = op->make_problem(s, mw::DType::f32, 7);
        mw::Instance inst = v->prepare(p);
        inst.run();
        inst.sync();
        const auto k = inst.counters();
        EXPECT_EQ(k.at("kernels_per_step"), 51) << name;
        EXPECT_EQ(k.at("launches_per_step"), name == "graph" ? 1 : 51) << name;
        // Two sequences of ceil(21 / 16) = 2 pages of 16 positions, K and V,
        // 4 layers of 4 kv heads x 32 floats.
        EXPECT_EQ(k.at("kv_cache_bytes"), 2.0 * 2 * 16 * 2 * 4 * c.kv_dim() * 4) << name;
        EXPECT_GT(k.at("host_us_per_step"), 0) << name;
    }
    const auto* g = variant("generate", "graph", mw::Backend::cuda_emu);
    ASSERT_NE(g, nullptr);
    mw::Problem p = mw::find_op("generate")->make_problem(generate_shape(5, 6), mw::DType::f32, 7);
    mw::Instance inst = g->prepare(p);
    inst.run();
    inst.sync();
    const auto k = inst.counters();
    EXPECT_EQ(k.at("kernels_per_step"), 52);
    EXPECT_EQ(k.at("launches_per_step"), 1);
    EXPECT_GT(k.at("ttft_ms"), 0);
    EXPECT_GE(k.at("itl_p99_ms"), k.at("itl_p50_ms"));
}

}  // namespace
