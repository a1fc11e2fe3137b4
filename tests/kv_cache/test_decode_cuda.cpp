// decode_step and generate on the GPU decoder (kernels/model/decode_cuda.cuh,
// rungs reference/kv_cache/decode_recompute.cu, optimized/kv_cache/
// decode_cache.cu, decode_graph.cu), run on the CPU by cuda-emu: every rung
// against the op's fp64 oracle at odd contexts, batches and lengths; the
// paged and graph rungs bit-identical to the contiguous cache; the same
// greedy tokens as the CPU's cached rung on the trained model; the
// counters a GPU run reports (launches per step, cache bytes). And the
// speculative lever's CUDA rungs, which run on the same decoder
// (reference/speculative/speculate_cuda.cuh): the target's greedy tokens
// with and without the int4 draft, bit for bit, and the CPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
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
        out.emplace_back(reinterpret_cast<const unsigned char*>(b.data.get()),
                         reinterpret_cast<const unsigned char*>(b.data.get()) + b.size_bytes());
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

// Small: under emulation every CUDA thread is a fiber, and a step of the
// model is some 10,000 warps of GEMV rows. kv_heads 1 and 8 are
// seeded models of the trained one's shape (MQA and MHA); 4 is the trained
// model. Contexts cross a page (16) and a split (16 pages: 256 positions)
// boundary; batches are not multiples of the GEMV's 4 sequences per pass.
INSTANTIATE_TEST_SUITE_P(
    OddShapesFirst, DecodeCudaEmu,
    ::testing::Values(Case{"decode_step", decode_shape(1, 1, 4)}, Case{"decode_step", decode_shape(7, 5, 4)},
                      Case{"decode_step", decode_shape(17, 2, 1)}, Case{"generate", generate_shape(1, 1)},
                      Case{"generate", generate_shape(3, 5)}),
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
// generate's pick), one for a graph; the cache's bytes, none for recompute.
TEST(DecodeCudaEmuCounters, LaunchesPerStepAndCacheBytes) {
    MW_EMU_OR_SKIP();
    const mw::Op* op = mw::find_op("decode_step");
    const auto s = decode_shape(3, 2, 4);
    const auto& c = mw::kv_cache::default_model().config;
    ASSERT_EQ(c.layers, 4);
    ASSERT_EQ(c.kv_dim(), 128);
    ASSERT_EQ(c.kv_heads, 4);
    // Two sequences of ceil(4 / 16) = 1 page of 16 positions, K and V, 4
    // layers of 128 values: fp32 4 bytes a value; int8 1 byte a value and
    // a 4-byte scale per kv head.
    const double slots = 2 * 1 * 16, f32 = slots * 2 * 4 * 128 * 4, i8 = slots * 2 * 4 * (128 + 4 * 4);
    const std::map<std::string, double> kv = {{"recompute", 0}, {"cache", f32}, {"cache_int8", i8}, {"paged", f32},
                                              {"graph", f32}};
    for (const auto& [name, bytes] : kv) {
        const auto* v = variant("decode_step", name, mw::Backend::cuda_emu);
        ASSERT_NE(v, nullptr) << name;
        mw::Problem p = op->make_problem(s, mw::DType::f32, 7);
        mw::Instance inst = v->prepare(p);
        inst.run();
        inst.sync();
        const auto k = inst.counters();
        EXPECT_EQ(k.at("kernels_per_step"), 51) << name;
        EXPECT_EQ(k.at("launches_per_step"), name == "graph" ? 1 : 51) << name;
        EXPECT_EQ(k.at("kv_cache_bytes"), bytes) << name;
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
}

// A graph rung's second call replays the graph its first call captured:
// the same tokens again, and the cache rung's.
TEST(DecodeCudaEmuGraph, SecondCallReplaysTheSameTokens) {
    MW_EMU_OR_SKIP();
    const mw::Op* op = mw::find_op("generate");
    const auto s = generate_shape(4, 7);
    const auto* g = variant("generate", "graph", mw::Backend::cuda_emu);
    const auto* cache = variant("generate", "cache", mw::Backend::cuda_emu);
    ASSERT_NE(g, nullptr);
    ASSERT_NE(cache, nullptr);
    mw::Problem p = op->make_problem(s, mw::DType::f32, 9), q = op->make_problem(s, mw::DType::f32, 9);
    const auto want = outputs_of(*cache, q);
    mw::Instance inst = g->prepare(p);
    for (int call = 0; call < 2; ++call) {
        std::memset(p.outputs[0].data.get(), 0xFF, p.outputs[0].size_bytes());
        inst.run();
        inst.sync();
        inst.fetch();
        const auto* got = reinterpret_cast<const unsigned char*>(p.outputs[0].data.get());
        EXPECT_EQ(std::vector<unsigned char>(got, got + p.outputs[0].size_bytes()), want[0]) << "call " << call;
    }
}

// speculate on the GPU decoder: target_only and the int4 draft against the
// oracle, the draft's tokens target_only's bit for bit and the CPU
// target's, drafts really accepted (a draft that is the target in int4
// agrees with it most of the time), k = 1 (every round may keep its only
// draft: the draft's catch-up of two rows) and a k that is not a power of
// two; batch > 1 refused by name.
TEST(SpeculateCudaEmu, Int4DraftKeepsTheTargetsTokens) {
    MW_EMU_OR_SKIP();
    const mw::Op* op = mw::find_op("speculate");
    ASSERT_NE(op, nullptr);
    const auto* target = variant("speculate", "target_only", mw::Backend::cuda_emu);
    const auto* int4 = variant("speculate", "int4", mw::Backend::cuda_emu);
    const auto* cpu = variant("speculate", "target_only", mw::Backend::cpu);
    ASSERT_NE(target, nullptr);
    ASSERT_NE(int4, nullptr);
    ASSERT_NE(cpu, nullptr);
    for (int k : {1, 3}) {
        const mw::Shape s{{{"model", 0}, {"batch", 1}, {"prompt", 5}, {"tokens", 11}, {"k", k}}};
        ASSERT_EQ(op->validate(s), "");
        mw::Problem p = op->make_problem(s, mw::DType::f32, 3);
        const auto oracle = op->oracle(p);
        for (const auto* v : {target, int4}) {
            const auto r = mw::check_variant(*op, *v, p, oracle);
            EXPECT_TRUE(r.correct) << v->name << " k " << k << ": " << r.message;
        }
        mw::Problem a = op->make_problem(s, mw::DType::f32, 3), b = op->make_problem(s, mw::DType::f32, 3),
                    c = op->make_problem(s, mw::DType::f32, 3);
        const auto with_draft = outputs_of(*int4, a);
        EXPECT_EQ(with_draft, outputs_of(*target, b)) << "k " << k;
        EXPECT_EQ(with_draft, outputs_of(*cpu, c)) << "k " << k;
        mw::Problem q = op->make_problem(s, mw::DType::f32, 3);
        mw::Instance inst = int4->prepare(q);
        inst.run();
        inst.sync();
        const auto counters = inst.counters();
        EXPECT_GT(counters.at("accepted"), 0) << "k " << k;
        EXPECT_LE(counters.at("accepted"), counters.at("drafted")) << "k " << k;
        EXPECT_LT(counters.at("target_passes"), 11) << "fewer target passes than tokens, k " << k;
    }
    const mw::Shape two{{{"model", 0}, {"batch", 2}, {"prompt", 9}, {"tokens", 5}, {"k", 2}}};
    EXPECT_NE(int4->accepts(two).find("batch = 2"), std::string::npos) << int4->accepts(two);
}

}  // namespace
