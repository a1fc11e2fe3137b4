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
#include <cmath>
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

// p's outputs, as bytes.
std::vector<std::vector<unsigned char>> bytes_of(const mw::Problem& p) {
    std::vector<std::vector<unsigned char>> out;
    for (const auto& b : p.outputs)
        out.emplace_back(reinterpret_cast<const unsigned char*>(b.data.get()),
                         reinterpret_cast<const unsigned char*>(b.data.get()) + b.size_bytes());
    return out;
}

// One emulated run of a rung (a decode step is some 10,000 warps of GEMV
// rows, every CUDA thread a fiber, under AddressSanitizer): its outputs
// checked by the op's own check, kept as bytes, and its counters, all from
// the same call, so that no test runs a rung twice for what one call shows.
struct Ran {
    mw::CheckResult check;
    std::vector<std::vector<unsigned char>> bytes;
    std::map<std::string, double> counters;
};
Ran run_once(const mw::Op& op, const mw::Variant& v, mw::Problem& p, const std::vector<std::vector<double>>& oracle) {
    mw::Instance inst = v.prepare(p);
    for (auto& b : p.outputs) std::memset(b.data.get(), 0xFF, b.size_bytes());  // NaN floats, token -1
    inst.run();
    if (inst.sync) inst.sync();
    if (inst.fetch) inst.fetch();
    Ran r;
    r.check = mw::check_problem(op, p, v.contract_oracle ? v.contract_oracle(p) : oracle, v.tolerance_scale);
    r.bytes = bytes_of(p);
    if (inst.counters) r.counters = inst.counters();
    return r;
}

struct Case {
    std::string op;
    mw::Shape shape;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.op << " at " << c.shape.str(); }

class DecodeCudaEmu : public ::testing::TestWithParam<Case> {};

// Every CUDA rung right by the op's own check; the rungs that promise it
// (identical_to) bit-identical to theirs; and what a GPU run's counters say
// of the same calls: the chain's 51 launches per step (52 with generate's
// pick), one for a graph; the cache's bytes, none for recompute.
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
    std::map<std::string, Ran> ran;
    for (const auto* v : variants) {
        ran[v->name] = run_once(*op, *v, p, oracle);
        EXPECT_TRUE(ran[v->name].check.ok) << v->name << " at " << c.shape.str() << ": " << ran[v->name].check.message;
    }
    for (const auto* v : variants) {
        if (v->identical_to.empty()) continue;
        ASSERT_TRUE(ran.count(v->identical_to)) << v->name << " promises to be " << v->identical_to;
        EXPECT_EQ(ran[v->name].bytes, ran[v->identical_to].bytes) << v->name << " differs from " << v->identical_to;
    }
    if (c.op == "generate") {
        const auto& k = ran.at("graph").counters;
        EXPECT_EQ(k.at("kernels_per_step"), 52);
        EXPECT_EQ(k.at("launches_per_step"), 1);
        return;
    }
    // Each sequence's pages of 16 positions (ctx + 1 of them), K and V, in
    // every layer: fp32 4 bytes a value; int8 1 byte a value and a 4-byte
    // scale per (position, kv head).
    const auto& m = mw::kv_cache::default_model().config;
    const double kv_heads = c.shape["kv_heads"], hd = m.head_dim();
    const double slots = c.shape["batch"] * std::ceil((c.shape["ctx"] + 1) / 16.0) * 16 * 2 * m.layers;
    const std::map<std::string, double> kv = {{"recompute", 0},
                                              {"cache", slots * kv_heads * hd * 4},
                                              {"cache_int8", slots * kv_heads * (hd + 4)},
                                              {"paged", slots * kv_heads * hd * 4},
                                              {"graph", slots * kv_heads * hd * 4}};
    for (const auto& [name, bytes] : kv) {
        ASSERT_TRUE(ran.count(name)) << name;
        const auto& k = ran[name].counters;
        EXPECT_EQ(k.at("kernels_per_step"), 51) << name;
        EXPECT_EQ(k.at("launches_per_step"), name == "graph" ? 1 : 51) << name;
        EXPECT_EQ(k.at("kv_cache_bytes"), bytes) << name;
    }
}

mw::Shape decode_shape(int ctx, int batch, int kv_heads) {
    return {{{"ctx", ctx}, {"batch", batch}, {"kv_heads", kv_heads}}};
}
mw::Shape generate_shape(int prompt, int tokens) { return {{{"prompt", prompt}, {"tokens", tokens}}}; }

// Small, as every call is emulated under AddressSanitizer (a step of the
// model ~0.7 s at batch 1; ctx 17 at batch 5 took 178 s for the five
// rungs). kv_heads 1 is a seeded model of the trained one's shape (MQA); 4
// is the trained model; a batch of 5 is not a multiple of the GEMV's 4
// sequences per pass. A context across a page (16 positions) is the
// tokens test's (28 positions).
INSTANTIATE_TEST_SUITE_P(
    OddShapesFirst, DecodeCudaEmu,
    ::testing::Values(Case{"decode_step", decode_shape(1, 1, 4)}, Case{"decode_step", decode_shape(2, 5, 1)},
                      Case{"generate", generate_shape(1, 1)}, Case{"generate", generate_shape(2, 3)}),
    [](const testing::TestParamInfo<Case>& i) {
        std::string n = i.param.op;
        for (const auto& [k, v] : i.param.shape.axes) n += "_" + k + std::to_string(v);
        return n;
    });

// The Done-means of the GPU decode: the GPU decoder's greedy tokens are the
// CPU decoder's, token for token, on the trained model; and the graph rung's
// second call replays the graph its first call captured: the same tokens
// again (each call poisons its tokens on the device first, so the second
// call's are its own).
TEST(DecodeCudaEmuTokens, SameGreedyTokensAsTheCpuCacheTwice) {
    MW_EMU_OR_SKIP();
    constexpr int kPrompt = 12, kTokens = 16;
    const mw::Op* op = mw::find_op("generate");
    const auto s = generate_shape(kPrompt, kTokens);
    const auto* gpu = variant("generate", "graph", mw::Backend::cuda_emu);
    const auto* cpu = variant("generate", "cache", mw::Backend::cpu);
    ASSERT_NE(gpu, nullptr);
    ASSERT_NE(cpu, nullptr);
    mw::Problem a = op->make_problem(s, mw::DType::f32, 42);
    std::vector<std::int32_t> want(kTokens);
    {
        mw::Instance inst = cpu->prepare(a);
        inst.run();
        std::memcpy(want.data(), a.outputs.at(0).data.get(), kTokens * sizeof(std::int32_t));
    }
    std::string text;
    for (int t : want) text += char(t);
    EXPECT_GT(std::count_if(text.begin(), text.end(), [](char ch) { return ch >= 'a' && ch <= 'z'; }), kTokens / 2)
        << "the trained model continues English text, not noise: '" << text << "'";
    mw::Problem b = op->make_problem(s, mw::DType::f32, 42);
    mw::Instance inst = gpu->prepare(b);
    for (int call = 0; call < 2; ++call) {
        std::memset(b.outputs.at(0).data.get(), 0xFF, b.outputs.at(0).size_bytes());
        inst.run();
        inst.sync();
        inst.fetch();
        std::vector<std::int32_t> got(kTokens);
        std::memcpy(got.data(), b.outputs.at(0).data.get(), kTokens * sizeof(std::int32_t));
        EXPECT_EQ(got, want) << "call " << call;
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
    constexpr int kTokens = 8;
    for (int k : {1, 3}) {
        const mw::Shape s{{{"model", 0}, {"batch", 1}, {"prompt", 4}, {"tokens", kTokens}, {"k", k}}};
        ASSERT_EQ(op->validate(s), "");
        mw::Problem p = op->make_problem(s, mw::DType::f32, 3);
        const auto oracle = op->oracle(p);
        const Ran t = run_once(*op, *target, p, oracle), d = run_once(*op, *int4, p, oracle),
                  c = run_once(*op, *cpu, p, oracle);
        EXPECT_TRUE(t.check.ok) << "target_only k " << k << ": " << t.check.message;
        EXPECT_TRUE(d.check.ok) << "int4 k " << k << ": " << d.check.message;
        EXPECT_EQ(d.bytes, t.bytes) << "k " << k;
        EXPECT_EQ(d.bytes, c.bytes) << "k " << k;
        EXPECT_GT(d.counters.at("accepted"), 0) << "k " << k;
        EXPECT_LE(d.counters.at("accepted"), d.counters.at("drafted")) << "k " << k;
        EXPECT_LT(d.counters.at("target_passes"), kTokens) << "fewer target passes than tokens, k " << k;
    }
    const mw::Shape two{{{"model", 0}, {"batch", 2}, {"prompt", 9}, {"tokens", 5}, {"k", 2}}};
    EXPECT_NE(int4->accepts(two).find("batch = 2"), std::string::npos) << int4->accepts(two);
}

}  // namespace
