// The KV-cache lever's paged_attn op: every rung against the fp64 oracle at
// odd shapes first (hd 1 and 7 on attend's scalar path, 16 and 24 on its
// 8-lane one, 32 and 128 on 16 lanes; MQA, GQA, MHA), fp32 and int8 pools,
// on the AVX-512 path and with MEMWALL_ISA=avx2; the problem maker's traps
// (odd lengths, shuffled blocks, stale rows, an outlier position) that the
// level's exercise relies on; and the byte model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <ostream>

#include "harness/check.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "reference/kv_cache/paged_attn.hpp"
#include "tests/oracle_cases.hpp"

namespace {

mw::Shape shape(long b, long heads, long kv, long hd, long ctx, long int8) {
    return {{{"b", b}, {"heads", heads}, {"kv_heads", kv}, {"hd", hd}, {"ctx", ctx}, {"int8", int8}}};
}

const std::vector<mw::Shape> kShapes = {
    shape(1, 1, 1, 1, 1, 0),   shape(2, 3, 1, 7, 17, 1),  shape(3, 4, 2, 16, 33, 0),   shape(5, 8, 8, 32, 127, 1),
    shape(4, 8, 2, 24, 129, 0), shape(4, 8, 2, 24, 129, 1), shape(2, 32, 8, 128, 1000, 0), shape(2, 32, 8, 128, 1000, 1)};

struct Case {
    mw::Shape shape;
    const char* isa;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.shape.str() << " on " << c.isa; }

std::vector<Case> cases() {
    std::vector<Case> out;
    for (auto& s : kShapes)
        for (const char* isa : {"avx512", "avx2"}) out.push_back({s, isa});
    return out;
}

class PagedAttn : public ::testing::TestWithParam<Case> {
protected:
    void SetUp() override { setenv("MEMWALL_ISA", GetParam().isa, 1); }
    void TearDown() override { unsetenv("MEMWALL_ISA"); }
};

TEST_P(PagedAttn, EveryRungMatchesTheOracle) {
    mw::test::expect_every_cpu_rung_correct("paged_attn", GetParam().shape, 7, 2);
}

INSTANTIATE_TEST_SUITE_P(OddShapesFirst, PagedAttn, ::testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& info) {
                             std::string n = info.param.shape.str() + "_" + info.param.isa;
                             for (char& c : n)
                                 if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                             return n;
                         });

// What the exercise's negative controls trip over must be in every problem.
TEST(PagedAttnOp, ProblemsMakeTheUsualBugsObservable) {
    for (long int8 : {0, 1}) {
        const mw::Shape s = shape(5, 4, 2, 8, 100, int8);
        const mw::Op* op = mw::find_op("paged_attn");
        mw::Problem p = op->make_problem(s, mw::DType::f32, 3);
        const auto L = mw::kv_cache::paged_layout(s);
        const auto a = mw::kv_cache::paged_args(p);
        // Odd, different lengths: never a whole number of blocks.
        std::set<int> lens(a.lens, a.lens + a.b);
        EXPECT_EQ(int(lens.size()), a.b);
        for (int len : lens) EXPECT_EQ(len % 2, 1) << len;
        EXPECT_EQ(*lens.rbegin(), 99);
        // Live blocks: each owned once, in shuffled order; entries past a
        // sequence's last block name blocks nobody owns.
        std::set<int> owned, stale;
        bool sorted = true;
        for (int s_ = 0; s_ < a.b; ++s_)
            for (int c = 0; c < a.max_blocks; ++c) {
                const int blk = a.table[s_ * a.max_blocks + c];
                ASSERT_TRUE(blk >= 0 && blk < L.n_blocks) << blk;
                if (c * 16 < a.lens[s_]) {
                    EXPECT_TRUE(owned.insert(blk).second) << "block " << blk << " owned twice";
                    sorted = sorted && (c == 0 || blk == a.table[s_ * a.max_blocks + c - 1] + 1);
                } else {
                    stale.insert(blk);
                }
            }
        EXPECT_EQ(int(owned.size()), L.live_blocks);
        EXPECT_FALSE(sorted) << "blocks handed out in order: a table that is ignored would go unnoticed";
        for (int blk : stale) EXPECT_FALSE(owned.count(blk)) << blk;
        // Row values as a step would read them (dequantized for int8).
        auto value = [&](std::int64_t row, int kv, int e) {
            const std::int64_t r = row * a.kv_heads + kv;
            return int8 ? a.ks[r] * a.kq[r * a.hd + e] : a.kf[r * a.hd + e];
        };
        auto row_max = [&](std::int64_t row) {
            float m = 0;
            for (int kv = 0; kv < a.kv_heads; ++kv)
                for (int e = 0; e < a.hd; ++e) m = std::max(m, std::fabs(value(row, kv, e)));
            return m;
        };
        // Past the length, in the last block: stale, far larger than live rows.
        for (int s_ = 0; s_ < a.b; ++s_) {
            const int len = a.lens[s_];
            const std::int64_t last = a.table[s_ * a.max_blocks + (len - 1) / 16];
            EXPECT_GT(row_max(last * 16 + len % 16), 8.0f) << "sequence " << s_;
            EXPECT_LE(row_max(last * 16 + (len - 1) % 16), 3.0f) << "sequence " << s_;
        }
        // One outlier position per sequence in V (x32): a scale for the whole
        // pool would round every other row to a few codes.
        if (int8) {
            const float* vs = a.vs;
            std::vector<float> live;
            for (int s_ = 0; s_ < a.b; ++s_)
                for (int pos = 0; pos < a.lens[s_]; ++pos)
                    live.push_back(vs[(std::int64_t(a.table[s_ * a.max_blocks + pos / 16]) * 16 + pos % 16) * a.kv_heads]);
            std::sort(live.begin(), live.end());
            EXPECT_GT(live.back(), 16 * live[live.size() / 2]);
        }
    }
}

TEST(PagedAttnOp, GroupingDividesTheBlocksRungsBytes) {
    const mw::Op* op = mw::find_op("paged_attn");
    const auto vs = mw::variants_of("paged_attn", mw::Backend::cpu);
    ASSERT_EQ(vs[0]->name, "naive");
    ASSERT_EQ(vs[1]->name, "blocks");
    for (long int8 : {0, 1}) {
        const auto s = shape(4, 32, 8, 128, 4096, int8);
        const auto L = mw::kv_cache::paged_layout(s);
        const double qo = 8.0 * 4 * 32 * 128, table = 4.0 * 4 * (L.max_blocks + 1);
        const double cache = double(L.positions) * 8 * (int8 ? 2.0 * 128 + 8 : 8.0 * 128);
        EXPECT_DOUBLE_EQ(op->compulsory_bytes(s, mw::DType::f32), cache + qo + table);
        EXPECT_DOUBLE_EQ(vs[0]->bytes(s, mw::DType::f32), 4 * cache + qo);  // G = 4
        EXPECT_DOUBLE_EQ(op->flops(s), 4.0 * double(L.positions) * 32 * 128);
    }
    EXPECT_NE(op->validate(shape(1, 6, 4, 8, 8, 0)).find("kv_heads = 4"), std::string::npos);
    EXPECT_NE(op->validate(shape(1, 8, 1, 8, 8, 2)).find("int8 = 2"), std::string::npos);
    EXPECT_NE(op->validate(shape(1, 128, 1, 8, 8, 0)).find("1..64"), std::string::npos);
}

}  // namespace
