// The MoE routing lever (reference/moe/moe.hpp), CPU rungs:
//
//   Moe{Cpu,Cuda,Emu}      every rung of moe_route, moe_ffn and moe_layer against its
//                          oracle (the capacity rung against the drop rule in
//                          fp64) at odd shapes first: one token, 7/33/127/129
//                          tokens, widths inside a vector, one expert, k = 1, 2,
//                          3, a skewed router with tight capacity; the CUDA
//                          kernels (kernels/moe/moe.cuh) under cuda-emu;
//   MoeRouteTies           all-equal logits: the stated rule (lower index first)
//                          and equal weights, from this file's own expectation;
//   MoeFfnOwn              equivalences: one expert = the dense SwiGLU MLP (this
//                          file's own fp64 loops); unbounded capacity = dropless
//                          (bit for bit); sorted_grouped = dense_masked (bit for
//                          bit); a hand-made overflow drops exactly the tokens
//                          the rule names, and they pass through the residual;
//                          the skewed router concentrates the load;
//   MoeShapes              bad shapes are refused with the bad value named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness/check.hpp"
#include "harness/inputs.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "reference/moe/moe.hpp"
#include "tests/oracle_cases.hpp"

namespace {

using mw::Shape;

Shape route_shape(long T, long d, long E, long k, long skew = 0) {
    return {{{"tokens", T}, {"d_model", d}, {"experts", E}, {"top_k", k}, {"skew", skew}}};
}
Shape ffn_shape(long T, long d, long f, long E, long k, long cap = 125, long skew = 0) {
    return {{{"tokens", T}, {"d_model", d}, {"d_ff", f}, {"experts", E}, {"top_k", k}, {"capacity_pct", cap},
             {"skew", skew}}};
}

Shape layer_shape(long T, long d, long f, long E, long k, long skew = 0) {
    return {{{"tokens", T}, {"d_model", d}, {"d_ff", f}, {"experts", E}, {"top_k", k}, {"skew", skew}}};
}

std::vector<Shape> shapes_of(const std::string& op, bool emulated) {
    if (emulated) {  // every CUDA thread is a fiber: small, still odd
        if (op == "moe_route") return {route_shape(1, 1, 1, 1), route_shape(33, 7, 5, 2), route_shape(129, 17, 16, 3, 8)};
        return {ffn_shape(1, 7, 9, 3, 2), ffn_shape(33, 17, 24, 5, 2), ffn_shape(40, 16, 33, 8, 1, 125, 8)};
    }
    if (op == "moe_route")
        return {route_shape(1, 1, 1, 1), route_shape(7, 7, 3, 2), route_shape(33, 33, 8, 1),
                route_shape(127, 64, 5, 3), route_shape(129, 129, 16, 2, 8)};
    if (op == "moe_layer")
        return {layer_shape(1, 1, 1, 1, 1), layer_shape(7, 7, 9, 3, 2), layer_shape(127, 33, 40, 8, 2, 8),
                layer_shape(129, 16, 33, 4, 1)};
    return {ffn_shape(1, 7, 33, 3, 2), ffn_shape(7, 1, 1, 1, 1), ffn_shape(33, 33, 7, 8, 1),
            ffn_shape(127, 64, 129, 5, 2, 100), ffn_shape(129, 33, 65, 8, 2, 100, 8),
            ffn_shape(129, 16, 24, 4, 3, 50, 4)};
}

// Every CPU variant that runs in one process (expert_parallel runs under
// mpirun: tests/moe/CMakeLists.txt).
std::vector<mw::test::Case> moe_cases(mw::Backend b) {
    auto all = mw::test::cases({"moe_route", "moe_ffn", "moe_layer"}, b, shapes_of);
    std::erase_if(all, [](const mw::test::Case& c) {
        const auto& n = c.variant->needs;
        return std::find(n.begin(), n.end(), "mpi") != n.end();
    });
    return all;
}

MW_ORACLE_SUITES(Moe, MatchesOracle, moe_cases, mw::test::check_case);

const mw::Op& op(const std::string& name) { return *mw::find_op(name); }

const mw::Variant& variant(const std::string& op_name, const std::string& name) {
    for (const auto* v : mw::variants_of(op_name, mw::Backend::cpu))
        if (v->name == name) return *v;
    throw std::runtime_error("no CPU variant " + name + " of " + op_name);
}

// Runs a variant once on p; returns its counters.
std::map<std::string, double> run(const std::string& op_name, const std::string& name, mw::Problem& p) {
    mw::Instance inst = variant(op_name, name).prepare(p);
    for (auto& b : p.outputs) mw::poison(b);
    inst.run();
    inst.sync();
    inst.fetch();
    return inst.counters ? inst.counters() : std::map<std::string, double>{};
}

std::vector<float> y_of(const mw::Problem& p) {
    const auto& b = p.out("y");
    return {b.as<float>(), b.as<float>() + b.count};
}

// --- routing ties ------------------------------------------------------------------------------

TEST(MoeRouteTies, EqualLogitsGoToTheLowerExpertsWithEqualWeights) {
    for (const char* name : {"naive", "gemm"}) {
        const Shape s = route_shape(5, 9, 6, 2);
        mw::Problem p = op("moe_route").make_problem(s, mw::DType::f32, 3);
        // Tokens 0 and 3: all logits equal (x = 0, no bias). Token 1: experts
        // 2 and 4 tie for first (a column pattern only they see).
        std::memset(p.in("x").as<float>(), 0, 9 * sizeof(float));
        std::memset(p.in("x").as<float>() + 3 * 9, 0, 9 * sizeof(float));
        float* W = p.in("w_router").as<float>();
        float* x1 = p.in("x").as<float>() + 9;
        for (int i = 0; i < 9; ++i) x1[i] = i == 4 ? 1.0f : 0.0f;
        for (int e = 0; e < 6; ++e) W[4 * 6 + e] = (e == 2 || e == 4) ? 0.5f : -0.25f;
        run("moe_route", name, p);
        const auto* ex = p.out("experts").as<std::int32_t>();
        const auto* w = p.out("weights").as<float>();
        for (int t : {0, 3}) {
            EXPECT_EQ(ex[t * 2], 0) << name << " token " << t;
            EXPECT_EQ(ex[t * 2 + 1], 1) << name << " token " << t;
            EXPECT_FLOAT_EQ(w[t * 2], 0.5f) << name;
            EXPECT_FLOAT_EQ(w[t * 2 + 1], 0.5f) << name;
        }
        EXPECT_EQ(ex[2], 2) << name;
        EXPECT_EQ(ex[3], 4) << name;
        // And the oracle agrees with this file.
        const auto oracle = op("moe_route").oracle(p);
        EXPECT_EQ(oracle[0][2], 2);
        EXPECT_EQ(oracle[0][3], 4);
    }
}

TEST(MoeRouteTies, LogitsAreExactSoTheGemmRungAgreesWithNaiveOnEveryIndex) {
    const Shape s = route_shape(2000, 1000, 8, 2);
    mw::Problem a = op("moe_route").make_problem(s, mw::DType::f32, 11), b = a;
    for (auto& buf : b.outputs) buf = mw::Buffer::make(buf.name, buf.dtype, buf.count, buf.dims);
    run("moe_route", "naive", a);
    run("moe_route", "gemm", b);
    EXPECT_EQ(0, std::memcmp(a.out("experts").data.get(), b.out("experts").data.get(), a.out("experts").size_bytes()));
}

TEST(MoeRouteCounters, AuxLossIsOneWhenBalancedAndGrowsWithSkew) {
    mw::Problem flat = op("moe_route").make_problem(route_shape(4096, 64, 8, 2), mw::DType::f32, 5);
    mw::Problem skew = op("moe_route").make_problem(route_shape(4096, 64, 8, 2, 8), mw::DType::f32, 5);
    auto cf = run("moe_route", "gemm", flat), cs = run("moe_route", "gemm", skew);
    EXPECT_NEAR(cf["aux_loss"], 1.0, 0.1);
    EXPECT_GT(cs["aux_loss"], 1.5);
    double total = 0;
    for (int e = 0; e < 8; ++e) total += cs["assigned_expert_" + std::to_string(e)];
    EXPECT_EQ(total, 4096.0 * 2);
    EXPECT_GT(cs["busiest_over_mean"], 2.0);
}

// --- moe_ffn equivalences ------------------------------------------------------------------------

TEST(MoeFfnOwn, OneExpertIsTheDenseSwigluMlp) {
    const long T = 33, d = 17, f = 40;
    const Shape s = ffn_shape(T, d, f, 1, 1, 0);
    mw::Problem p = op("moe_ffn").make_problem(s, mw::DType::f32, 9);
    const float *x = p.in("x").as<float>(), *G = p.in("w_gate").as<float>(), *U = p.in("w_up").as<float>(),
                *D = p.in("w_down").as<float>();
    for (long t = 0; t < T; ++t) EXPECT_EQ(p.in("weights").as<float>()[t], 1.0f);
    // y = x + (silu(x G) * (x U)) D, in fp64, by this file.
    std::vector<double> want(std::size_t(T * d));
    for (long t = 0; t < T; ++t) {
        std::vector<double> h(static_cast<std::size_t>(f));
        for (long c = 0; c < f; ++c) {
            double a = 0, b = 0;
            for (long i = 0; i < d; ++i) a += double(x[t * d + i]) * G[i * f + c], b += double(x[t * d + i]) * U[i * f + c];
            h[std::size_t(c)] = a / (1 + std::exp(-a)) * b;
        }
        for (long j = 0; j < d; ++j) {
            double o = x[t * d + j];
            for (long c = 0; c < f; ++c) o += h[std::size_t(c)] * D[c * d + j];
            want[std::size_t(t * d + j)] = o;
        }
    }
    for (const char* name : {"dense_masked", "gather", "sorted_grouped", "capacity"}) {
        run("moe_ffn", name, p);
        auto r = mw::check_close(p.out("y"), want, mw::DType::f32, double(f));
        EXPECT_TRUE(r.ok) << name << ": " << r.message;
    }
}

TEST(MoeFfnOwn, SortedGroupedIsDenseMaskedBitForBit) {
    for (const Shape& s : {ffn_shape(127, 33, 65, 5, 2), ffn_shape(129, 64, 96, 8, 3, 125, 8)}) {
        mw::Problem p = op("moe_ffn").make_problem(s, mw::DType::f32, 4);
        run("moe_ffn", "dense_masked", p);
        const auto dense = y_of(p);
        run("moe_ffn", "sorted_grouped", p);
        EXPECT_EQ(0, std::memcmp(dense.data(), p.out("y").data.get(), dense.size() * 4)) << s.str();
    }
}

TEST(MoeFfnOwn, UnboundedCapacityIsDroplessBitForBit) {
    for (long cap : {0L, 100000L}) {  // none; and one no expert can reach
        mw::Problem p = op("moe_ffn").make_problem(ffn_shape(129, 33, 40, 8, 2, cap, 8), mw::DType::f32, 2);
        run("moe_ffn", "sorted_grouped", p);
        const auto dropless = y_of(p);
        auto c = run("moe_ffn", "capacity", p);
        EXPECT_EQ(c["dropped_assignments"], 0) << cap;
        EXPECT_EQ(0, std::memcmp(dropless.data(), p.out("y").data.get(), dropless.size() * 4)) << cap;
    }
}

TEST(MoeFfnOwn, OverflowDropsTheRuleTokensWhichPassThroughTheResidual) {
    // 6 tokens, k = 2, 3 experts; capacity 50% -> C = ceil(50 * 6 * 2 / 300) = 2.
    const Shape s = ffn_shape(6, 8, 16, 3, 2, 50);
    mw::Problem p = op("moe_ffn").make_problem(s, mw::DType::f32, 1);
    // Every token picks expert 0 first, then 1, except token 5: 2 then 1.
    std::int32_t route[12] = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 1};
    std::memcpy(p.in("experts").as<std::int32_t>(), route, sizeof route);
    // Slot-major priority: expert 0 keeps tokens 0, 1 (first choices); expert
    // 2 keeps token 5; expert 1 (second choices only) keeps tokens 0, 1.
    // So tokens 2, 3, 4 lose both choices: y = x exactly.
    auto c = run("moe_ffn", "capacity", p);
    EXPECT_EQ(c["capacity"], 2);
    EXPECT_EQ(c["dropped_assignments"], 3 + 4);  // expert 0: 2, 3, 4; expert 1: 2, 3, 4, 5
    EXPECT_EQ(c["dropped_assignments_rule"], 7);
    EXPECT_EQ(c["dropped_tokens"], 3);
    const float* x = p.in("x").as<float>();
    const float* y = p.out("y").as<float>();
    for (int t : {2, 3, 4}) EXPECT_EQ(0, std::memcmp(x + t * 8, y + t * 8, 8 * 4)) << "token " << t;
    for (int t : {0, 1, 5}) EXPECT_NE(0, std::memcmp(x + t * 8, y + t * 8, 8 * 4)) << "token " << t;
    // And the contract oracle drops the same ones.
    const auto want = variant("moe_ffn", "capacity").contract_oracle(p);
    EXPECT_TRUE(mw::check_close(p.out("y"), want[0], mw::DType::f32, 16.0).ok);
}

TEST(MoeFfnOwn, SkewedRouterConcentratesTheLoadAndCapacityBoundsIt) {
    mw::Problem flat = op("moe_ffn").make_problem(ffn_shape(1024, 16, 8, 8, 2, 125, 0), mw::DType::f32, 6);
    mw::Problem skew = op("moe_ffn").make_problem(ffn_shape(1024, 16, 8, 8, 2, 125, 8), mw::DType::f32, 6);
    auto cf = run("moe_ffn", "capacity", flat), cs = run("moe_ffn", "capacity", skew);
    EXPECT_LT(cf["dropped_assignments"], cs["dropped_assignments"]);
    EXPECT_LE(cs["busiest_expert_rows"], cs["capacity"]);
    EXPECT_EQ(cs["capacity"], 320);  // ceil(1.25 * 1024 * 2 / 8)
    auto ds = run("moe_ffn", "sorted_grouped", skew);
    EXPECT_GT(ds["busiest_over_mean"], 2.0);
}

// --- shapes ----------------------------------------------------------------------------------------

TEST(MoeShapes, BadShapesNameTheBadValue) {
    EXPECT_NE(op("moe_ffn").validate(ffn_shape(8, 8, 8, 2, 3)).find("top_k = 3"), std::string::npos);
    EXPECT_NE(op("moe_route").validate(route_shape(8, 9000, 8, 2)).find("d_model = 9000"), std::string::npos);
    EXPECT_TRUE(op("moe_ffn").validate(ffn_shape(8, 8, 8, 2, 2)).empty());
}

}  // namespace
