// Every variant of every layout op against its oracle, CPU and cuda-emu
// (CUDA SKIPPED without a GPU): odd shapes first (1, 7, 33, 127, 129), tile
// edges (31, 32, 33, 65), panels that do not divide N, strides that are
// multiples of 4 KiB. transpose and aos_soa are exact; matmul_bt and permute
// use the tolerance model. Then the properties the lesson rests on: paired
// CPU rungs do the same arithmetic in the same order (bit-identical outputs),
// the strided rungs read in place (no hidden copy), and the declared bytes
// rank the rungs the way their headers say.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/memtrack.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "tests/oracle_cases.hpp"

namespace {

using namespace mw::test;  // Case, shape, fixture_for, check_case (tests/oracle_cases.hpp)

// Shapes per op; `emu` keeps them small (one fiber per CUDA thread).
std::vector<mw::Shape> shapes(const std::string& op, bool emu) {
    std::vector<mw::Shape> s;
    if (op == "matmul_bt") {
        for (int n : {1, 7, 33}) s.push_back(shape({{"m", n}, {"n", n}, {"k", n}}));
        s.push_back(shape({{"m", 127}, {"n", 129}, {"k", 65}}));
        s.push_back(shape({{"m", 3}, {"n", 64}, {"k", 129}}));   // exactly one panel
        s.push_back(shape({{"m", 5}, {"n", 65}, {"k", 7}}));     // a panel of width 1
        s.push_back(shape({{"m", 9}, {"n", 200}, {"k", 1024}}));  // 4 KiB row stride, last panel of 8
    } else if (op == "permute") {
        auto add = [&](int b, int sq, int h, int d, int q) {
            s.push_back(shape({{"b", b}, {"s", sq}, {"h", h}, {"d", d}, {"q", q}}));
        };
        add(1, 1, 1, 1, 1);
        add(1, 7, 3, 5, 2);
        add(2, 33, 4, 7, 3);
        add(1, 127, 2, 64, 8);
        add(2, 129, 3, 33, 1);
        add(1, 64, 32, 64, 8);  // 8 KiB row stride, as at the default shape
    } else if (op == "aos_soa") {
        for (int n : {1, 7, 33, 127, 129, 100003}) s.push_back(shape({{"tokens", n}}));
    } else if (op == "transpose") {
        auto add = [&](int r, int c) { s.push_back(shape({{"rows", r}, {"cols", c}})); };
        add(1, 1);
        add(1, 7);
        add(7, 1);
        add(31, 32);
        add(32, 33);
        add(33, 65);
        add(65, 31);
        add(127, 129);
        add(129, 127);
        add(64, 64);
        if (emu) add(100, 300);
        else {
            add(1000, 3001);
            add(1024, 1024);  // 4 KiB strides both ways
        }
    }
    return s;
}

const std::vector<std::string> kOps = {"matmul_bt", "permute", "aos_soa", "transpose"};

std::vector<Case> cases(mw::Backend b) { return mw::test::cases(kOps, b, shapes); }

MW_ORACLE_SUITES(Layout, MatchesOracle, cases, check_case);

// --- the properties the lesson rests on -----------------------------------------

// Runs one CPU variant on the fixture's problem; returns a copy of its output.
std::vector<float> output_of(const std::string& op, const std::string& variant, const mw::Shape& s) {
    const mw::Variant* v = nullptr;
    for (auto* c : mw::variants_of(op, mw::Backend::cpu))
        if (c->name == variant) v = c;
    EXPECT_NE(v, nullptr) << op << "/" << variant;
    if (!v) return {};
    Fixture& f = fixture_for(op, s);
    auto r = mw::check_variant(*mw::find_op(op), *v, f.problem, f.oracle);
    EXPECT_TRUE(r.correct) << op << "/" << variant << " at " << s.str() << ": " << r.message;
    const mw::Buffer& out = f.problem.outputs.at(0);
    return {out.as<float>(), out.as<float>() + out.count};
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The pairs differ in layout only: same products, summed in the same k order,
// so the outputs agree to the bit (a rung that reorders the sum, skips a
// padded column wrongly or reads a neighbour's column breaks this even when
// it stays within tolerance).
TEST(LayoutPairs, MatmulBtRungsAreBitIdentical) {
    for (auto& s : {shape({{"m", 7}, {"n", 65}, {"k", 33}}), shape({{"m", 33}, {"n", 129}, {"k", 1024}}),
                    shape({{"m", 2}, {"n", 64}, {"k", 1}})}) {
        const auto strided = output_of("matmul_bt", "strided", s);
        EXPECT_TRUE(bit_identical(strided, output_of("matmul_bt", "copy", s))) << "copy at " << s.str();
        EXPECT_TRUE(bit_identical(strided, output_of("matmul_bt", "packed", s))) << "packed at " << s.str();
    }
}

TEST(LayoutPairs, PermuteRungsAreBitIdentical) {
    for (auto& s : {shape({{"b", 2}, {"s", 33}, {"h", 3}, {"d", 7}, {"q", 3}}),
                    shape({{"b", 1}, {"s", 129}, {"h", 32}, {"d", 64}, {"q", 8}})}) {
        EXPECT_TRUE(bit_identical(output_of("permute", "strided", s), output_of("permute", "copy", s)))
            << s.str();
    }
}

// Peak heap growth over prepare + one call, as `memwall run` records it.
std::size_t peak_extra(const std::string& op, const std::string& variant, const mw::Shape& s) {
    const mw::Variant* v = nullptr;
    for (auto* c : mw::variants_of(op, mw::Backend::cpu))
        if (c->name == variant) v = c;
    EXPECT_NE(v, nullptr);
    if (!v) return 0;
    Fixture& f = fixture_for(op, s);
    const std::size_t before = mw::memtrack::reset_peak();
    std::size_t declared = 0;
    {
        mw::Instance inst = v->prepare(f.problem);
        declared = inst.workspace_bytes;
        inst.run();
        inst.sync();
    }
    return mw::memtrack::peak_bytes() - before + declared;
}

// The strided rungs consume the data where it is: a strided rung that made a
// contiguous copy behind the scenes (and so measured the wrong thing) would
// allocate as much as the copy rung does.
TEST(LayoutPairs, StridedRungsReadInPlace) {
    const auto pm = shape({{"b", 2}, {"s", 256}, {"h", 8}, {"d", 64}, {"q", 2}});
    const std::size_t v_bytes = 2 * 256 * 8 * 64 * 4;  // 1 MiB
    EXPECT_LT(peak_extra("permute", "strided", pm), v_bytes / 64);
    EXPECT_GE(peak_extra("permute", "copy", pm), v_bytes);

    const auto mm = shape({{"m", 4}, {"n", 512}, {"k", 512}});
    const std::size_t b_bytes = 512 * 512 * 4;
    EXPECT_LT(peak_extra("matmul_bt", "strided", mm), b_bytes / 64);
    EXPECT_GE(peak_extra("matmul_bt", "copy", mm), b_bytes);
}

double declared_bytes(const std::string& op, const std::string& variant, mw::Backend b, const mw::Shape& s) {
    for (auto* v : mw::variants_of(op, b))
        if (v->name == variant) return v->bytes(s, mw::DType::f32);
    ADD_FAILURE() << "no variant " << op << "/" << variant;
    return 0;
}

// The byte models at the default shapes, recomputed here from the headers'
// arithmetic (not from the code under test).
TEST(LayoutBytes, DefaultShapesRankTheRungs) {
    const mw::Backend cpu = mw::Backend::cpu;
    {
        const mw::Shape s = mw::find_op("matmul_bt")->default_shape;
        const double M = s["m"], N = s["n"], K = s["k"];
        const double strided = declared_bytes("matmul_bt", "strided", cpu, s);
        const double copy = declared_bytes("matmul_bt", "copy", cpu, s);
        const double packed = declared_bytes("matmul_bt", "packed", cpu, s);
        // A 64-byte line per FMA vs 4 bytes of B per FMA (+ the copy).
        EXPECT_DOUBLE_EQ(strided, 64 * M * N * K + 4 * M * K + 4 * M * N);
        EXPECT_GT(strided / copy, 14.0);
        EXPECT_LT(strided / copy, 16.0);
        // B streamed once per row of C (+ the copy's read and write) vs read
        // and written once: about (M + 2) / 2.
        EXPECT_GT(copy / packed, 0.45 * M);
        EXPECT_LT(copy / packed, 0.55 * M + 1);
        EXPECT_GE(packed, mw::find_op("matmul_bt")->compulsory_bytes(s, mw::DType::f32));
    }
    {
        const mw::Shape s = mw::find_op("permute")->default_shape;
        const double v = 4.0 * s["b"] * s["s"] * s["h"] * s["d"];
        const double strided = declared_bytes("permute", "strided", cpu, s);
        const double copy = declared_bytes("permute", "copy", cpu, s);
        EXPECT_NEAR(strided - copy, (s["q"] - 3.0) * v, 1.0);  // Q sweeps of V vs 3
        EXPECT_GT(strided, copy);
    }
    {
        const mw::Shape s = mw::find_op("aos_soa")->default_shape;
        EXPECT_DOUBLE_EQ(declared_bytes("aos_soa", "aos", cpu, s) / declared_bytes("aos_soa", "soa", cpu, s),
                         68.0 / 12.0);
    }
    {
        const mw::Shape s = mw::find_op("transpose")->default_shape;
        EXPECT_DOUBLE_EQ(declared_bytes("transpose", "naive", cpu, s) / declared_bytes("transpose", "blocked", cpu, s),
                         68.0 / 8.0);
        EXPECT_DOUBLE_EQ(declared_bytes("transpose", "blocked", cpu, s),
                         mw::find_op("transpose")->compulsory_bytes(s, mw::DType::f32));
    }
}

// The CUDA ladder's bytes (registered for cuda-emu whenever the emulator is
// built, and for cuda when nvcc is): padding changes banks, not bytes.
TEST(LayoutBytes, CudaTransposeRungs) {
    for (mw::Backend b : {mw::Backend::cuda, mw::Backend::cuda_emu}) {
        if (mw::variants_of("transpose", b).empty()) continue;
        const mw::Shape s = mw::find_op("transpose")->default_shape;
        const double naive = declared_bytes("transpose", "naive", b, s);
        const double tiles = declared_bytes("transpose", "smem_tiles", b, s);
        const double padded = declared_bytes("transpose", "smem_padded", b, s);
        EXPECT_DOUBLE_EQ(naive / tiles, 36.0 / 8.0);
        EXPECT_DOUBLE_EQ(tiles, padded);
    }
}

// The record really is one cache line, and the exact check really is exact:
// a quotient one ulp off fails.
TEST(LayoutAosSoa, ExactCheckCatchesOneUlp) {
    const mw::Shape s = shape({{"tokens", 33}});
    Fixture& f = fixture_for("aos_soa", s);
    const mw::Op* op = mw::find_op("aos_soa");
    auto* aos = mw::variants_of("aos_soa", mw::Backend::cpu).front();
    mw::Instance inst = aos->prepare(f.problem);
    inst.run();
    EXPECT_TRUE(mw::check_problem(*op, f.problem, f.oracle).ok);
    float* out = f.problem.out("scaled").as<float>();
    out[17] = std::nextafter(out[17], 1e30f);
    auto r = mw::check_problem(*op, f.problem, f.oracle);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.message.find("scaled[17]"), std::string::npos) << r.message;
}

}  // namespace
