// The KV-cache lever's attn_decode op, CPU rungs:
//
//   AttnDecode         every rung against its oracle (the op's, or its contract
//                      oracle: int8 over the dequantized cache, sliding over
//                      the window) at odd shapes first — MHA, GQA, MQA; hd and
//                      ctx that end inside a vector, a tile and a block; an MQA
//                      group wider than a register tile; windows shorter and
//                      longer than ctx — on the AVX-512 path and on AVX2;
//   AttnDecodeOwn      the lossy rungs against this file's own fp64 attention
//                      (its own quantizer, its own window set), and negative
//                      controls: a per-tensor int8 scale, and a window off by
//                      one, must fail the contract check;
//   AttnDecodeBytes    the byte models against hand arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "harness/check.hpp"
#include "harness/isa.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "reference/kv_cache/generate.hpp"

namespace {

mw::Shape shape(long b, long heads, long kv, long ctx, long hd, long window = 4096, long sinks = 4) {
    return {{{"b", b}, {"heads", heads}, {"kv_heads", kv}, {"ctx", ctx}, {"hd", hd}, {"window", window},
             {"sinks", sinks}}};
}

const mw::Op& op() { return *mw::find_op("attn_decode"); }

const mw::Variant& variant(const std::string& name) {
    for (const auto* v : mw::variants_of("attn_decode", mw::Backend::cpu))
        if (v->name == name) return *v;
    throw std::runtime_error("no CPU variant " + name + " of attn_decode");
}

// The op's tolerance (reduction over ctx, exp's conditioning).
mw::CheckResult check(const mw::Buffer& out, const std::vector<double>& ref, const mw::Shape& s) {
    return mw::check_close(out, ref, mw::DType::f32, double(s["ctx"]), op().check.tolerance_scale);
}

// --- every rung against its oracle ----------------------------------------------------------

void every_rung(const mw::Shape& s, const char* isa) {
    mw::Problem p = op().make_problem(s, mw::DType::f32, 7);
    const auto oracle = op().oracle(p);
    const auto variants = mw::variants_of("attn_decode", mw::Backend::cpu);
    ASSERT_GE(variants.size(), 4u);
    for (const auto* v : variants) {
        const auto r = mw::check_variant(op(), *v, p, oracle);
        EXPECT_TRUE(r.correct) << v->name << " (" << isa << ") at " << s.str() << ": " << r.message;
        if (v->rung > 0) {
            EXPECT_EQ(v->prepare(p).path, isa) << v->name;
        }
    }
}

class AttnDecode : public ::testing::TestWithParam<mw::Shape> {};

// The path the dispatch picks on this machine: AVX-512 where it has it (an
// AMD EPYC of the project's has AVX2 only).
TEST_P(AttnDecode, EveryRungMatchesItsOracle) {
    every_rung(GetParam(), mw::isa::has_avx512() ? "avx512" : "avx2");
}

TEST_P(AttnDecode, EveryRungMatchesItsOracleOnAvx2) {
    setenv("MEMWALL_ISA", "avx2", 1);
    every_rung(GetParam(), "avx2");
    unsetenv("MEMWALL_ISA");
}

INSTANTIATE_TEST_SUITE_P(OddShapesFirst, AttnDecode,
                         ::testing::Values(shape(1, 1, 1, 1, 1, 1, 0),        // one row; a window of one
                                           shape(1, 3, 1, 7, 7, 3, 1),        // G = 3: no register tile of 2 or 4
                                           shape(3, 4, 1, 33, 33, 16, 2),     // MQA; hd past a vector
                                           shape(1, 8, 2, 129, 64, 64, 4),    // GQA heads/4; a tile past 128
                                           shape(3, 8, 8, 257, 128, 100, 3),  // MHA; a block and one row
                                           shape(1, 128, 1, 300, 8, 200, 0),  // a 128-head group; no sinks
                                           shape(3, 16, 4, 257, 128, 300, 4), // window + sinks > ctx: all rows
                                           shape(2, 32, 8, 1024, 128, 256, 4)),
                         [](const testing::TestParamInfo<mw::Shape>& info) {
                             std::string n = info.param.str();
                             for (char& c : n)
                                 if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                             return n;
                         });

// --- this file's own fp64 attention -----------------------------------------------------------

// Element e of cache row r = (sequence, position, kv head), and whether position j is attended.
using RowAt = std::function<double(long r, long e)>;
using Keep = std::function<bool(long j)>;

std::vector<double> attend(const mw::Shape& s, const float* q, const RowAt& K, const RowAt& V, const Keep& keep) {
    const long b = s["b"], h = s["heads"], g = s["kv_heads"], ctx = s["ctx"], hd = s["hd"];
    std::vector<double> o(std::size_t(b * h * hd), 0.0);
    for (long sq = 0; sq < b; ++sq)
        for (long hh = 0; hh < h; ++hh) {
            const long kvh = hh * g / h;
            std::vector<double> w(std::size_t(ctx), 0.0);
            double m = -INFINITY, z = 0;
            for (long j = 0; j < ctx; ++j) {
                if (!keep(j)) continue;
                double d = 0;
                for (long e = 0; e < hd; ++e) d += q[(sq * h + hh) * hd + e] * K((sq * ctx + j) * g + kvh, e);
                w[std::size_t(j)] = d / std::sqrt(double(hd));
                m = std::max(m, w[std::size_t(j)]);
            }
            for (long j = 0; j < ctx; ++j) z += keep(j) ? (w[std::size_t(j)] = std::exp(w[std::size_t(j)] - m)) : 0.0;
            for (long j = 0; j < ctx; ++j)
                if (keep(j))
                    for (long e = 0; e < hd; ++e)
                        o[std::size_t((sq * h + hh) * hd + e)] += w[std::size_t(j)] / z * V((sq * ctx + j) * g + kvh, e);
        }
    return o;
}

RowAt rows_of(const float* X, long hd) {
    return [=](long r, long e) { return double(X[r * hd + e]); };
}

// Symmetric int8 dequantized, one scale per group of `group` rows (1: per
// row, the rung's format; all rows: per tensor, the plausible bug).
std::vector<double> int8_roundtrip(const float* X, long rows, long hd, long group) {
    std::vector<double> out(std::size_t(rows * hd));
    for (long r0 = 0; r0 < rows; r0 += group) {
        const long n = std::min(group, rows - r0);
        float amax = 0;
        for (long i = r0 * hd; i < (r0 + n) * hd; ++i) amax = std::max(amax, std::fabs(X[i]));
        const float d = amax > 0 ? amax / 127.0f : 1.0f;
        for (long i = r0 * hd; i < (r0 + n) * hd; ++i) out[std::size_t(i)] = double(d) * std::nearbyint(X[i] / d);
    }
    return out;
}

RowAt rows_of(const std::vector<double>& X, long hd) {
    return [&X, hd](long r, long e) { return X[std::size_t(r * hd + e)]; };
}

mw::Buffer as_buffer(const std::vector<double>& v) {
    mw::Buffer b = mw::Buffer::make("o", mw::DType::f32, v.size());
    for (std::size_t i = 0; i < v.size(); ++i) b.as<float>()[i] = float(v[i]);
    return b;
}

// Runs `v` on p and returns its output (a copy).
mw::Buffer run(const mw::Variant& v, mw::Problem& p) {
    mw::Instance inst = v.prepare(p);
    inst.run();
    mw::Buffer o = mw::Buffer::make("o", mw::DType::f32, p.out("o").count);
    std::copy_n(p.out("o").as<float>(), o.count, o.as<float>());
    return o;
}

const Keep kAll = [](long) { return true; };

// The int8 rung on a cache with one large position: passes against attention
// over its per-row dequantized cache (this file's quantizer), and the same
// cache quantized per tensor — one step for every row, set by the large one —
// fails the rung's contract oracle.
void int8_large_position(const mw::Shape& s, bool large_key) {
    mw::Problem p = op().make_problem(s, mw::DType::f32, 11);
    const long b = s["b"], ctx = s["ctx"], g = s["kv_heads"], hd = s["hd"], rows = b * ctx * g;
    if (large_key) {
        ASSERT_EQ(s["heads"], g) << "the key case needs one query per kv head";
    }
    const long j0 = ctx / 3;
    float* q = p.in("q").as<float>();
    for (long sq = 0; sq < b; ++sq)
        for (long kvh = 0; kvh < g; ++kvh) {
            float* k = p.in("K").as<float>() + ((sq * ctx + j0) * g + kvh) * hd;
            float* v = p.in("V").as<float>() + ((sq * ctx + j0) * g + kvh) * hd;
            if (large_key) {
                // 100 k with q's direction removed: a large row whose score is
                // 0, so it neither dominates the softmax nor vanishes from it.
                const float* qh = q + (sq * g + kvh) * hd;
                double kq = 0, qq = 0;
                for (long e = 0; e < hd; ++e) kq += double(k[e]) * qh[e], qq += double(qh[e]) * qh[e];
                for (long e = 0; e < hd; ++e) k[e] = float(100.0 * (k[e] - kq / qq * qh[e]));
            } else {
                for (long e = 0; e < hd; ++e) v[e] *= 100.0f;
            }
        }
    const mw::Variant& int8 = variant("int8");
    const auto contract = int8.contract_oracle(p)[0];
    const mw::Buffer got = run(int8, p);
    EXPECT_TRUE(check(got, contract, s).ok) << check(got, contract, s).message;

    const float *K = p.in("K").as<float>(), *V = p.in("V").as<float>();
    const auto Kr = int8_roundtrip(K, rows, hd, 1), Vr = int8_roundtrip(V, rows, hd, 1);
    const auto own = attend(s, q, rows_of(Kr, hd), rows_of(Vr, hd), kAll);
    EXPECT_TRUE(check(got, own, s).ok) << "against this file's per-row quantizer: " << check(got, own, s).message;

    const auto Kt = int8_roundtrip(K, rows, hd, rows), Vt = int8_roundtrip(V, rows, hd, rows);
    const auto per_tensor = large_key ? attend(s, q, rows_of(Kt, hd), rows_of(Vr, hd), kAll)
                                      : attend(s, q, rows_of(Kr, hd), rows_of(Vt, hd), kAll);
    EXPECT_FALSE(check(as_buffer(per_tensor), contract, s).ok) << "a per-tensor scale passed the int8 contract";
    // And the contract is not the exact fp32 attention either: it is the int8 cache's.
    const auto exact = attend(s, q, rows_of(K, hd), rows_of(V, hd), kAll);
    EXPECT_FALSE(check(as_buffer(exact), contract, s).ok) << "the int8 contract is indistinguishable from fp32";
}

TEST(AttnDecodeOwn, Int8LargeValueRowNeedsPerRowScales) { int8_large_position(shape(3, 8, 2, 129, 64), false); }
TEST(AttnDecodeOwn, Int8LargeKeyRowNeedsPerRowScales) { int8_large_position(shape(1, 4, 4, 257, 128), true); }

// The sliding rung against this file's own window set; windows off by one
// (shifted either way, one row short, one sink short) fail its contract.
TEST(AttnDecodeOwn, SlidingWindowIsExactlyTheLastWindowAndTheSinks) {
    const auto s = shape(3, 8, 2, 257, 64, 100, 3);
    const long ctx = 257, W = 100, S = 3;
    mw::Problem p = op().make_problem(s, mw::DType::f32, 13);
    const mw::Variant& sliding = variant("sliding");
    const auto contract = sliding.contract_oracle(p)[0];
    const mw::Buffer got = run(sliding, p);
    const float *q = p.in("q").as<float>(), *K = p.in("K").as<float>(), *V = p.in("V").as<float>();
    const auto window = [&](long lo, long hi, long sinks) {  // positions [lo, hi) and the first `sinks`
        return attend(s, q, rows_of(K, 64), rows_of(V, 64), [=](long j) { return j < sinks || (j >= lo && j < hi); });
    };
    const auto own = window(ctx - W, ctx, S);
    EXPECT_TRUE(check(got, own, s).ok) << check(got, own, s).message;
    EXPECT_TRUE(check(got, contract, s).ok) << check(got, contract, s).message;
    for (const auto& [name, wrong] : {std::pair{"shifted back", window(ctx - W - 1, ctx - 1, S)},
                                      std::pair{"shifted forward", window(ctx - W + 1, ctx + 1, S)},
                                      std::pair{"one row short", window(ctx - W + 1, ctx, S)},
                                      std::pair{"one sink short", window(ctx - W, ctx, S - 1)},
                                      std::pair{"full attention", window(0, ctx, S)}})
        EXPECT_FALSE(check(as_buffer(wrong), contract, s).ok) << "a window " << name << " passed the contract";
}

// --- byte models --------------------------------------------------------------------------------

TEST(AttnDecodeBytes, EveryRungsBytesByHand) {
    const auto s = shape(4, 32, 8, 16384, 128, 4096, 4);
    const auto B = [&](const char* name) { return variant(name).bytes(s, mw::DType::f32); };
    // K and V, fp32: 2 x 4 B x 4 sequences x 16384 positions x 8 kv heads x 128 = 512 MiB.
    EXPECT_DOUBLE_EQ(B("split"), 536870912.0);
    EXPECT_DOUBLE_EQ(B("naive"), 4 * 536870912.0);  // each of G = 4 heads reads its group's cache
    // int8: 2 x 4 x 16384 x 8 x (128 B + a 4 B scale) = 132 MiB.
    EXPECT_DOUBLE_EQ(B("int8"), 138412032.0);
    EXPECT_DOUBLE_EQ(mw::kv_cache::attn_decode_int8_cache_bytes(s), 138412032.0);
    // sliding: 4 sinks + 4096 positions: 8 x 4 x 4100 x 8 x 128.
    EXPECT_DOUBLE_EQ(B("sliding"), 134348800.0);
    // It also does only the window's FLOPs: 4 x 4 sequences x 32 heads x 4100 x 128.
    EXPECT_DOUBLE_EQ(variant("sliding").executed_flops(s), 268697600.0);
    // A window longer than the context reads the context.
    EXPECT_DOUBLE_EQ(variant("sliding").bytes(shape(4, 32, 8, 1000, 128, 4096, 4), mw::DType::f32), 8.0 * 4 * 1000 * 8 * 128);
    EXPECT_EQ(mw::kv_cache::attn_decode_window_rows(shape(1, 1, 1, 10, 1, 7, 3)), 10);
    EXPECT_EQ(mw::kv_cache::attn_decode_window_rows(shape(1, 1, 1, 11, 1, 7, 3)), 10);
    // Intensity heads / (2 kv_heads): 2 FLOP/B for GQA 32/8.
    EXPECT_NEAR(op().flops(s) / B("split"), 2.0, 1e-12);
    EXPECT_NE(op().validate(shape(1, 6, 4, 8, 8)).find("kv_heads = 4"), std::string::npos);
}

}  // namespace
