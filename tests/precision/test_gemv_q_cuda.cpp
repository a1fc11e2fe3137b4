// The CUDA ladder of gemv_q (reference/precision/gemv_q.cu, optimized/precision/
// gemv_q_*.cu), odd shapes first: every (n_out, n_in) in {1, 7, 33, 127, 129}^2
// with b = 1 and b = 3, then shapes that cross an x tile, a batch pass and a
// partial int4 group. Each variant is judged
//   1. by check_variant: against its contract oracle (y = dequant(Q(W)) x, the
//      same oracle as its CPU twin) or, for fp32 rungs, the exact oracle, with
//      the standard fp32 tolerance of a length-n_in reduction;
//   2. against the bound derived from the quantization step (plus, for the
//      cuBLAS rungs, the rounding of x to 16 bits).
// PrecisionCuda: the nvcc-built variants, SKIPPED without a GPU.
// PrecisionEmu: the same sources run by cuda-emu (one fiber per CUDA thread).
// Also: the device-side bit decoders against the CPU conversions (exhaustive),
// the CUDA and CPU int4 rungs agreeing on the same bits, and each CUDA
// variant's contract being its CPU twin's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/inputs.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "kernels/precision/dequant_bits.hpp"
#include "reference/precision/gemv_q.hpp"
#include "tests/oracle_cases.hpp"

namespace {

using mw::precision::Format;
using mw::precision::QuantSpec;

// The format a variant stores W in, from its name; `rounds_x`: the cuBLAS
// rungs also round x to that 16-bit type.
QuantSpec spec_of(const std::string& name, bool* rounds_x = nullptr) {
    if (rounds_x) *rounds_x = name.rfind("cublas_", 0) == 0;
    if (name == "naive" || name == "fp32") return {Format::f32};
    if (name == "bf16" || name == "cublas_bf16") return {Format::bf16};
    if (name == "fp16" || name == "cublas_fp16") return {Format::f16};
    if (name == "int8_channel") return {Format::int8_channel};
    for (int g : {32, 64, 128})
        for (bool asym : {false, true})
            if (name == "int4_g" + std::to_string(g) + (asym ? "_asym" : "_sym")) return {Format::int4, g, asym};
    ADD_FAILURE() << "no weight format known for variant " << name;
    return {Format::f32};
}

float round_to(Format f, float v) {
    return f == Format::bf16 ? mw::bf16_to_f32(mw::f32_to_bf16(v)) : mw::f16_to_f32(mw::f32_to_f16(v));
}

using mw::test::Case;

mw::Shape shape(std::int64_t n_out, std::int64_t n_in, std::int64_t b) {
    return {{{"n_out", n_out}, {"n_in", n_in}, {"b", b}}};
}

// Every (n_out, n_in) pair at b = 1 and b = 3 on the GPU; the emulator (one
// fiber per CUDA thread, a process per test under ctest) takes every pair at
// b = 1 and a spread of them at b = 3.
std::vector<mw::Shape> shapes(const std::string& /*op*/, bool emu) {
    std::vector<mw::Shape> s;
    const int odd[] = {1, 7, 33, 127, 129};
    for (int n_out : odd)
        for (int n_in : odd) s.push_back(shape(n_out, n_in, 1));
    for (int n_out : odd)
        for (int n_in : odd) {
            // The diagonal, and (7,129), (129,7), (33,127), (127,33).
            const bool spread = n_out == n_in || n_out * n_in == 7 * 129 || n_out * n_in == 33 * 127;
            if (!emu || spread) s.push_back(shape(n_out, n_in, 3));
        }
    s.push_back(shape(17, 200, 2));    // partial last group for G = 64, 128
    s.push_back(shape(9, 2100, 9));    // b = 9: two batch passes; NB = 8 tiles of 1024 columns: three tiles
    if (!emu) {
        s.push_back(shape(300, 1000, 5));
        s.push_back(shape(33, 8200, 1));   // past one 8192-column tile at b = 1
        s.push_back(shape(257, 4100, 17)); // three batch passes
    }
    return s;
}

// The CUDA rungs only (the CPU ones are test_gemv_q.cpp's): no CPU suite.
std::vector<Case> cases(mw::Backend b) {
    if (b == mw::Backend::cpu) return {};
    return mw::test::cases({"gemv_q"}, b, shapes);
}

void check_case(const Case& c) {
    std::string why;
    if (!mw::runnable_here(*c.variant, &why)) GTEST_SKIP() << c.variant->name << ": " << why;
    const mw::Op* op = mw::find_op("gemv_q");
    mw::Problem p = op->make_problem(c.shape, mw::DType::f32, 20261123);
    const auto oracle = op->oracle(p);
    bool rounds_x = false;
    const QuantSpec spec = spec_of(c.variant->name, &rounds_x);
    // Lossy variants must be judged by their contract, never by the op's loose envelope.
    EXPECT_EQ(spec.format != Format::f32, bool(c.variant->contract_oracle)) << c.variant->name;
    // 1. the contract (or the exact oracle), standard fp32 tolerance.
    auto r = mw::check_variant(*op, *c.variant, p, oracle);
    ASSERT_TRUE(r.correct) << r.message;

    // 2. the bound from the quantization step (and x's rounding), plus fp32 accumulation error.
    const auto n_out = c.shape["n_out"], n_in = c.shape["n_in"], b = c.shape["b"];
    const float* W = p.in("W").as<float>();
    const float* x = p.in("x").as<float>();
    const mw::precision::QMatrix m = mw::precision::quantize(spec, W, n_out, n_in);
    const float* y = p.out("y").as<float>();
    for (std::int64_t bb = 0; bb < b; ++bb)
        for (std::int64_t i = 0; i < n_out; ++i) {
            double bound = 0, mag = 0;
            for (std::int64_t j = 0; j < n_in; ++j) {
                const float xj = x[bb * n_in + j], xr = rounds_x ? round_to(spec.format, xj) : xj;
                const double w = W[i * n_in + j];
                bound += std::fabs(xr) * mw::precision::error_bound_at(m, i, j, float(w)) + std::fabs(w) * std::fabs(xr - xj);
                mag += std::fabs(xr) * std::fabs(w);
            }
            bound += 4 * 0x1.0p-24 * std::sqrt(double(n_in)) * mag + 1e-30;
            EXPECT_LE(std::fabs(y[bb * n_out + i] - oracle[0][bb * n_out + i]), bound)
                << "y[" << bb << "][" << i << "] outside the quantization bound";
        }
}

MW_ORACLE_SUITES(Precision, MatchesContractAndBound, cases, check_case);

// The CUDA ladder is the CPU ladder's twin: same names, and the same
// contract oracle (same quantized bits) for every lossy rung.
TEST(PrecisionCudaLadder, SameNamesAndContractsAsCpu) {
    const mw::Op* op = mw::find_op("gemv_q");
    mw::Problem p = op->make_problem(shape(33, 129, 3), mw::DType::f32, 5);
    int twins = 0;
    for (mw::Backend be : {mw::Backend::cuda, mw::Backend::cuda_emu})
        for (auto* v : mw::variants_of("gemv_q", be)) {
            if (v->role == mw::Role::vendor) continue;  // no CPU twin
            const mw::Variant* cpu = nullptr;
            for (auto* c : mw::variants_of("gemv_q", mw::Backend::cpu))
                if (c->name == v->name) cpu = c;
            ASSERT_NE(cpu, nullptr) << "CUDA variant " << v->name << " has no CPU twin";
            EXPECT_EQ(cpu->rung, v->rung) << v->name;
            ASSERT_EQ(bool(cpu->contract_oracle), bool(v->contract_oracle)) << v->name;
            if (v->contract_oracle) {
                EXPECT_EQ(cpu->contract_oracle(p), v->contract_oracle(p)) << v->name;
            }
            ++twins;
        }
    if (twins == 0) GTEST_SKIP() << "no CUDA or cuda-emu variants built";
}

// One quantized W, two kernels: the CUDA int4 rungs (on the GPU, or emulated)
// and the CPU int4 rungs must agree within the fp32 tolerance of a
// length-n_in reduction — only the summation order differs.
TEST(PrecisionCudaLadder, Int4CudaAgreesWithCpu) {
    const mw::Backend be = mw::gpu_count() > 0 ? mw::Backend::cuda : mw::Backend::cuda_emu;
    const mw::Op* op = mw::find_op("gemv_q");
    int compared = 0;
    for (const auto& s : {shape(33, 200, 3), shape(127, 129, 1)})
        for (auto* gpu : mw::variants_of("gemv_q", be)) {
            if (gpu->name.rfind("int4_", 0) != 0) continue;
            const mw::Variant* cpu = nullptr;
            for (auto* c : mw::variants_of("gemv_q", mw::Backend::cpu))
                if (c->name == gpu->name) cpu = c;
            ASSERT_NE(cpu, nullptr);
            if (!mw::runnable_here(*cpu) || !mw::runnable_here(*gpu)) continue;
            mw::Problem p = op->make_problem(s, mw::DType::f32, 99);
            auto run = [&](const mw::Variant& v) {
                mw::poison(p.out("y"));
                mw::Instance inst = v.prepare(p);
                inst.run();
                inst.sync();
                inst.fetch();
                std::vector<double> y(p.out("y").count);
                for (std::size_t i = 0; i < y.size(); ++i) y[i] = p.out("y").as<float>()[i];
                return y;
            };
            const std::vector<double> y_cpu = run(*cpu);
            run(*gpu);
            auto r = mw::check_close(p.out("y"), y_cpu, mw::DType::f32, double(s["n_in"]));
            EXPECT_TRUE(r.ok) << gpu->name << " (" << mw::to_string(be) << ") vs CPU at " << s.str() << ": " << r.message;
            ++compared;
        }
    if (compared == 0) GTEST_SKIP() << "no runnable CPU/CUDA int4 pair";
}

// --- the device-side bit decoders, on the host (same source) --------------------------

bool same_float(float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return std::memcmp(&a, &b, 4) == 0;  // also tells -0 from +0
}

TEST(PrecisionCudaBits, Fp16AndBf16DecodeMatchCpuForAllPatterns) {
    namespace bits = mw::precision::bits;
    for (std::uint32_t h = 0; h < 0x10000u; ++h) {
        ASSERT_TRUE(same_float(bits::f16_to_f32(h), mw::f16_to_f32(std::uint16_t(h)))) << "fp16 bits 0x" << std::hex << h;
        ASSERT_TRUE(same_float(bits::bf16_lo(h), mw::bf16_to_f32(std::uint16_t(h)))) << "bf16 bits 0x" << std::hex << h;
        // Packed pairs: the other half must not leak in.
        const std::uint32_t w = (h << 16) | (0xFFFFu - h);
        ASSERT_TRUE(same_float(bits::f16_hi(w), mw::f16_to_f32(std::uint16_t(h))));
        ASSERT_TRUE(same_float(bits::f16_lo(w), mw::f16_to_f32(std::uint16_t(0xFFFFu - h))));
        ASSERT_TRUE(same_float(bits::bf16_hi(w), mw::bf16_to_f32(std::uint16_t(h))));
    }
}

TEST(PrecisionCudaBits, MagicNumberDecodesIntegersExactly) {
    namespace bits = mw::precision::bits;
    for (int v = -128; v <= 127; ++v)
        for (int i = 0; i < 4; ++i) {
            const std::uint32_t w = std::uint32_t(std::uint8_t(v)) << (8 * i) | (i == 0 ? 0x5A000000u : 0xA5u);
            ASSERT_EQ(bits::int8_at(w, i), float(v)) << "int8 " << v << " in byte " << i;
        }
    for (std::uint32_t q = 0; q < 16; ++q)
        for (int i = 0; i < 4; ++i)
            ASSERT_EQ(bits::magic_byte(q << (8 * i), i) - (bits::kMagic + 8.0f), float(int(q) - 8));
}

}  // namespace
