// Every gemv_q variant, odd shapes first (1, 7, 33, 127, 129), against
//   1. the op's oracle with the op's (lossy envelope) check, via check_variant;
//   2. its own contract: y = dequant(W) x in fp64, with the fp32 tolerance of
//      a length-n_in reduction (tight: only the summation order differs);
//   3. the bound derived from the quantization step:
//        |y_i - (W x)_i| <= sum_j |x_j| * bound(w_ij) + fp32 rounding.
// CPU variants also run with MEMWALL_ISA=avx2. CUDA variants are SKIPPED
// without a GPU; cuda-emu ones run small shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check.hpp"
#include "harness/inputs.hpp"
#include "harness/isa.hpp"
#include "kernels/precision/gemv.hpp"
#include "harness/gpu.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "reference/precision/gemv_q.hpp"
#include "tests/oracle_cases.hpp"

namespace {

using mw::precision::Format;
using mw::precision::QuantSpec;

// The format a variant stores W in, from its name ("_dot": rung 5 rounds x
// too; "_repacked": rung 6, the same contract as the rung it repacks).
QuantSpec spec_of(std::string name) {
    for (const std::string suffix : {"_repacked", "_dot"})
        if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
            name.resize(name.size() - suffix.size());
    if (name == "naive" || name == "fp32") return {Format::f32};
    if (name == "bf16" || name.rfind("cublas_bf16", 0) == 0) return {Format::bf16};
    if (name == "fp16" || name.rfind("cublas_fp16", 0) == 0) return {Format::f16};
    if (name.rfind("int8_channel", 0) == 0 || name == "int8") return {Format::int8_channel};
    for (int g : {32, 64, 128})
        for (bool asym : {false, true})
            if (name == "int4_g" + std::to_string(g) + (asym ? "_asym" : "_sym")) return {Format::int4, g, asym};
    ADD_FAILURE() << "no weight format known for variant " << name;
    return {Format::f32};
}

// How a variant rounds x, from its name, written out here rather than asked
// of the code under test: bf16 for bf16, int8 per 32 for int8 and per G for
// int4 (rung 5), per 256 for both integer formats repacked (rung 6).
mw::precision::ActSpec acts_of(const std::string& name) {
    if (name.find("_dot") == std::string::npos) return {};
    const QuantSpec w = spec_of(name);
    if (w.format == Format::bf16) return {mw::precision::ActRound::bf16};
    if (name.find("_repacked") != std::string::npos) return {mw::precision::ActRound::int8, 256};
    return {mw::precision::ActRound::int8, w.format == Format::int8_channel ? 32 : w.group};
}

using mw::test::Case;

mw::Shape shape(std::int64_t n_out, std::int64_t n_in, std::int64_t b) {
    return {{{"n_out", n_out}, {"n_in", n_in}, {"b", b}}};
}

std::vector<mw::Shape> shapes(const std::string& /*op*/, bool emu) {
    std::vector<mw::Shape> s;
    for (int n : {1, 7, 33, 127, 129}) s.push_back(shape(n, n, 1));
    s.push_back(shape(33, 129, 3));   // n_in not a multiple of any group
    s.push_back(shape(7, 200, 5));    // partial last group for G = 64, 128
    s.push_back(shape(65, 256, 8));   // two full batch blocks
    if (!emu) s.push_back(shape(300, 1000, 2));
    s.push_back(shape(33, 600, 8));  // several of x's int8 blocks of 256, the last partial, at b = 8
    return s;
}

std::vector<Case> cases(mw::Backend b) {
    std::vector<Case> out;
    for (auto& c : mw::test::cases({"gemv_q"}, b, shapes))
        if (c.variant->role != mw::Role::vendor) out.push_back(c);  // cuBLAS rounds x too: see test_gemv_q_cuda.cpp
    return out;
}

void check_case(const Case& c) {
    std::string why;
    if (!mw::runnable_here(*c.variant, &why)) GTEST_SKIP() << c.variant->name << ": " << why;
    const mw::Op* op = mw::find_op("gemv_q");
    mw::Problem p = op->make_problem(c.shape, mw::DType::f32, 20261122);
    const auto oracle = op->oracle(p);
    auto r = mw::check_variant(*op, *c.variant, p, oracle);
    ASSERT_TRUE(r.correct) << r.message;

    const auto n_out = c.shape["n_out"], n_in = c.shape["n_in"], b = c.shape["b"];
    const float* W = p.in("W").as<float>();
    const float* x = p.in("x").as<float>();
    const mw::precision::QMatrix m = mw::precision::quantize(spec_of(c.variant->name), W, n_out, n_in);
    // 2. the contract oracle (x rounded as the variant rounds it), with the
    //    standard fp32 tolerance.
    const auto acts = acts_of(c.variant->name);
    const auto contract = mw::precision::dequant_oracle(m, x, b, acts);
    auto cr = mw::check_close(p.out("y"), contract, mw::DType::f32, double(n_in));
    EXPECT_TRUE(cr.ok) << "vs y = dequant(W) dequant(Q(x)) (" << describe(acts) << "): " << cr.message;
    // 3. the bound from the quantization steps of W and x (plus fp32
    //    accumulation error): |w x - w~ x~| <= |x| |w - w~| + |w~| |x - x~|.
    const float* y = p.out("y").as<float>();
    for (std::int64_t bb = 0; bb < b; ++bb)
        for (std::int64_t i = 0; i < n_out; ++i) {
            double bound = 0, mag = 0;
            const auto ex = mw::precision::act_error_bounds(acts, x + bb * n_in, n_in);
            for (std::int64_t j = 0; j < n_in; ++j) {
                const double xj = std::fabs(x[bb * n_in + j]);
                const double ew = mw::precision::error_bound_at(m, i, j, W[i * n_in + j]);
                bound += xj * ew + (std::fabs(W[i * n_in + j]) + ew) * ex[j];
                mag += (xj + ex[j]) * (std::fabs(W[i * n_in + j]) + ew);
            }
            bound += 4 * 0x1.0p-24 * std::sqrt(double(n_in)) * mag + 1e-30;
            EXPECT_LE(std::fabs(y[bb * n_out + i] - oracle[0][bb * n_out + i]), bound)
                << "y[" << bb << "][" << i << "] outside the quantization bound";
        }
}

MW_ORACLE_SUITES(GemvQ, MatchesContractAndBound, cases, check_case);

// The SIMD activation quantizers of rung 5 give the scalar reference's bits
// (AVX-512 and AVX2), at lengths that end inside a block and inside a vector.
TEST(GemvQDotActs, SimdQuantizerMatchesReferenceBits) {
    for (const char* isa : {"avx512", "avx2"}) {
        setenv("MEMWALL_ISA", isa, 1);
        for (std::int64_t n : {1, 7, 33, 100, 129, 1000})
            for (int block : {32, 64, 128, 256}) {
                const std::int64_t ld = (n + block - 1) / block * block, b = 2;
                mw::Buffer xb = mw::Buffer::make("x", mw::DType::f32, std::size_t(b * n));
                mw::fill_uniform(xb, 1000 + n, -3.0, 3.0);
                const float* x = xb.as<float>();
                mw::precision::cpu::DotActs a, h;
                mw::precision::cpu::quantize_acts_int8(x, b, n, ld, block, a);
                mw::precision::cpu::round_acts_bf16(x, b, n, ld, h);
                for (std::int64_t bb = 0; bb < b; ++bb) {
                    const std::int64_t nb = (n + block - 1) / block;
                    std::vector<std::int8_t> q(static_cast<std::size_t>(n));
                    std::vector<float> d(static_cast<std::size_t>(nb));
                    std::vector<std::int32_t> s(static_cast<std::size_t>(nb));
                    mw::precision::quantize_acts_int8(x + bb * n, n, block, q.data(), d.data(), s.data());
                    for (std::int64_t k = 0; k < ld; ++k) {
                        ASSERT_EQ(a.q[std::size_t(bb * ld + k)], k < n ? q[std::size_t(k)] : 0) << isa << " n " << n << " k " << k;
                        ASSERT_EQ(h.h[std::size_t(bb * ld + k)], k < n ? mw::f32_to_bf16(x[bb * n + k]) : 0) << isa << " k " << k;
                    }
                    for (std::int64_t g = 0; g < nb; ++g) {
                        ASSERT_EQ(a.d[std::size_t(bb * a.blocks + g)], d[std::size_t(g)]) << isa << " block " << g;
                        ASSERT_EQ(a.qsum[std::size_t(bb * a.blocks + g)], s[std::size_t(g)]) << isa << " block " << g;
                    }
                }
            }
    }
    unsetenv("MEMWALL_ISA");
}

// The activation quantizer itself against values worked out by hand.
TEST(GemvQDotActs, ReferenceQuantizerByHand) {
    const float x[5] = {0.5f, -1.27f, 0.0f, 0.3f, -0.01f};  // block 4: amax 1.27 -> d = 0.01; block 2: amax 0.01
    std::int8_t q[5];
    float d[2];
    std::int32_t s[2];
    mw::precision::quantize_acts_int8(x, 5, 4, q, d, s);
    EXPECT_FLOAT_EQ(d[0], 0.01f);
    EXPECT_EQ(q[0], 50);
    EXPECT_EQ(q[1], -127);
    EXPECT_EQ(q[2], 0);
    EXPECT_EQ(q[3], 30);
    EXPECT_EQ(s[0], 50 - 127 + 30);
    EXPECT_EQ(q[4], -127);  // a block of its own: its amax is the value
    EXPECT_EQ(s[1], -127);
}

TEST(GemvQCpuIsa, RejectsUnknownIsa) {
    setenv("MEMWALL_ISA", "sse9", 1);
    try {
        mw::isa::pick();
        ADD_FAILURE() << "MEMWALL_ISA=sse9 accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("sse9"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("avx2"), std::string::npos) << e.what();
    }
    unsetenv("MEMWALL_ISA");
}

TEST(GemvQCpuIsa, Avx2FallbackMatchesContract) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2+FMA";
    setenv("MEMWALL_ISA", "avx2", 1);
    for (auto* v : mw::variants_of("gemv_q", mw::Backend::cpu))
        for (auto& s : shapes("gemv_q", true)) check_case({v, s});
    unsetenv("MEMWALL_ISA");
}

// Rung 6's int4 paths at their largest integer sums: every weight code 15
// (W all equal, sym: 7 + 8) against x all +1 or all -1 (int8 +127 or -127),
// groups of 32, 64 and 128 (4, 8 and 16 steps of 8 weights), b = 1 and 8.
// The AVX2 path adds vpmaddubsw's 16-bit sums over 4 steps before widening
// (at most 30720 here); summed over more steps they would wrap, which random
// inputs never show. Expected values from the fp64 contract oracle.
TEST(GemvQCpuIsa, RepackedInt4LargestSumsDoNotWrap) {
    const std::int64_t n_out = 24, n_in = 512;
    std::vector<float> W(std::size_t(n_out * n_in), 1.0f);
    for (const char* isa : {"avx512", "avx2"}) {
        setenv("MEMWALL_ISA", isa, 1);
        for (int g : {32, 64, 128})
            for (float sign : {1.0f, -1.0f})
                for (std::int64_t b : {1, 8}) {
                    const QuantSpec spec{Format::int4, g, false};
                    const mw::precision::QMatrix m = mw::precision::quantize(spec, W.data(), n_out, n_in);
                    const mw::precision::PackedMatrix P = mw::precision::repack(m);
                    std::vector<float> x(std::size_t(b * n_in), sign), y(std::size_t(b * n_out), 0.0f);
                    mw::precision::gemv(P, x.data(), b, y.data());
                    const auto want = mw::precision::dequant_oracle(m, x.data(), b, mw::precision::cpu::repacked_acts(spec));
                    for (std::size_t i = 0; i < y.size(); ++i)
                        ASSERT_NEAR(y[i], want[i], 1e-4 * std::fabs(want[i]))
                            << isa << " G " << g << " x " << sign << " b " << b << " y[" << i << "]";
                    ASSERT_GT(std::fabs(want[0]), 0.9 * n_in);  // the sums this test is about
                }
    }
    unsetenv("MEMWALL_ISA");
}

const mw::Variant& gemv_variant(const std::string& name) {
    for (auto* c : mw::variants_of("gemv_q", mw::Backend::cpu))
        if (c->name == name) return *c;
    throw std::runtime_error("no gemv_q variant " + name);
}

// Each dot and repacked rung names the arithmetic its chosen path runs, so
// its MFU is judged by that peak: bf16 with vdpbf16ps, fp32 once bf16 is
// widened to FMAs (AVX2, or rung 6 with MEMWALL_BF16=fma), int8 for the
// integer formats on either path.
TEST(GemvQCpuIsa, DotRungsNameThePathsArithmetic) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2+FMA";
    const std::map<std::string, std::string> avx2 = {
        {"bf16_dot", "f32"}, {"bf16_dot_repacked", "f32"}, {"int8_dot", "int8"}, {"int8_dot_repacked", "int8"},
        {"int4_g64_sym_dot", "int8"}, {"int4_g32_asym_dot_repacked", "int8"}, {"fp32_repacked", ""}};
    const bool bf16 = mw::isa::has_avx512_bf16();
    for (const char* isa : {"avx512", "avx2"})
        for (const char* bf16_path : {"dot", "fma"}) {
            setenv("MEMWALL_ISA", isa, 1);
            setenv("MEMWALL_BF16", bf16_path, 1);
            for (const auto& [name, want_avx2] : avx2) {
                mw::Problem p = mw::find_op("gemv_q")->make_problem(shape(33, 129, 2), mw::DType::f32, 3);
                const mw::Instance inst = gemv_variant(name).prepare(p);
                const bool is_bf16 = name.rfind("bf16", 0) == 0, repacked = name.find("_repacked") != std::string::npos;
                // rung 5 always uses vdpbf16ps where it can; rung 6 as MEMWALL_BF16 says
                const bool dot = std::string(isa) == "avx512" && bf16 && (!repacked || std::string(bf16_path) == "dot");
                const std::string want = is_bf16 && dot ? "bf16" : want_avx2;
                EXPECT_EQ(inst.compute, want) << name << " under MEMWALL_ISA=" << isa << " MEMWALL_BF16=" << bf16_path
                                              << ", path " << inst.path;
                if (is_bf16) {
                    EXPECT_EQ(inst.path.find("vdpbf16ps") != std::string::npos, dot) << name << ": " << inst.path;
                }
            }
        }
    unsetenv("MEMWALL_ISA");
    unsetenv("MEMWALL_BF16");
}

// Rung 6's two AVX-512 bf16 paths, each forced, against the contract at the
// odd shapes (the default run takes only the one that is faster here).
TEST(GemvQCpuIsa, Bf16RepackedBothPathsMatchContract) {
    if (!mw::isa::has_avx512()) GTEST_SKIP() << "no AVX-512";
    for (const char* bf16_path : {"dot", "fma"}) {
        if (std::string(bf16_path) == "dot" && !mw::isa::has_avx512_bf16()) continue;
        setenv("MEMWALL_BF16", bf16_path, 1);
        mw::Problem p = mw::find_op("gemv_q")->make_problem(shape(7, 7, 1), mw::DType::f32, 3);
        const std::string path = gemv_variant("bf16_dot_repacked").prepare(p).path;
        EXPECT_EQ(path.find("vdpbf16ps") == std::string::npos, std::string(bf16_path) == "fma") << path;
        for (auto& s : shapes("gemv_q", false)) check_case({&gemv_variant("bf16_dot_repacked"), s});
    }
    unsetenv("MEMWALL_BF16");
}

TEST(GemvQCpuIsa, AnUnknownBf16PathIsRejectedByName) {
    if (!mw::isa::has_avx512_bf16()) GTEST_SKIP() << "no AVX512_BF16: MEMWALL_BF16 is not read";
    setenv("MEMWALL_BF16", "amx", 1);
    mw::Problem p = mw::find_op("gemv_q")->make_problem(shape(7, 7, 1), mw::DType::f32, 3);
    try {
        gemv_variant("bf16_dot_repacked").prepare(p);
        ADD_FAILURE() << "MEMWALL_BF16=amx accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("amx"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("dot, fma"), std::string::npos) << e.what();
    }
    unsetenv("MEMWALL_BF16");
}

// A zero output must fail the op's lossy envelope check (the norm floor).
TEST(GemvQCheck, EnvelopeRejectsZeros) {
    const mw::Op* op = mw::find_op("gemv_q");
    mw::Problem p = op->make_problem(shape(64, 256, 2), mw::DType::f32, 7);
    const auto oracle = op->oracle(p);
    auto& y = p.out("y");
    for (auto& v : y.span<float>()) v = 0;
    EXPECT_FALSE(mw::check_problem(*op, p, oracle).ok);
}

// An error of a quarter int4 step per weight (a slightly wrong decode) must fail
// the contract check even though the envelope would let it through.
TEST(GemvQCheck, ContractCatchesOffByOneDecode) {
    const mw::Op* op = mw::find_op("gemv_q");
    const auto s = shape(64, 256, 1);
    mw::Problem p = op->make_problem(s, mw::DType::f32, 7);
    const mw::precision::QMatrix m = mw::precision::quantize({Format::int4, 64, false}, p.in("W").as<float>(), 64, 256);
    const float* x = p.in("x").as<float>();
    auto contract = mw::precision::dequant_oracle(m, x, 1);
    float* y = p.out("y").as<float>();
    for (std::int64_t i = 0; i < 64; ++i) {
        double shift = 0;
        for (std::int64_t j = 0; j < 256; ++j) shift += 0.5 * mw::precision::error_bound_at(m, i, j, 0) * x[j];
        y[i] = float(contract[i] + shift);
    }
    EXPECT_FALSE(mw::check_close(p.out("y"), contract, mw::DType::f32, 256).ok);
}

}  // namespace
