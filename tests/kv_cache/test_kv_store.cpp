// The KV-cache lever's storage: the block allocator's bookkeeping, the chunk
// step of decode attention against an fp64 softmax written here, and the
// three layouts (contiguous fp32, int8, paged) against each other and
// against that reference — odd lengths first, both ISAs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/kv_cache/attend.hpp"
#include "kernels/kv_cache/block_allocator.hpp"
#include "kernels/kv_cache/kv_store.hpp"

namespace kv = mw::kv_cache;

namespace {

// --- block allocator ----------------------------------------------------------

TEST(BlockAllocator, HandsOutEveryBlockOnceThenRefuses) {
    kv::BlockAllocator a(5, 16);
    std::vector<int> got;
    for (int i = 0; i < 5; ++i) got.push_back(a.allocate());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4}));
    EXPECT_EQ(a.allocate(), -1);
    EXPECT_EQ(a.free_count(), 0);
    a.release(3);
    EXPECT_EQ(a.free_count(), 1);
    EXPECT_EQ(a.allocate(), 3);
    EXPECT_THROW(kv::BlockAllocator(0, 16), std::invalid_argument);
}

TEST(BlockAllocator, DoubleFreeAndSharedBlocks) {
    kv::BlockAllocator a(2, 16);
    const int b = a.allocate();
    a.retain(b);
    EXPECT_EQ(a.refcount(b), 2);
    a.release(b);
    EXPECT_EQ(a.free_count(), 1) << "a block still referenced must not be freed";
    a.release(b);
    EXPECT_EQ(a.free_count(), 2);
    EXPECT_THROW(a.release(b), std::logic_error);
    EXPECT_THROW(a.retain(b), std::logic_error);
    EXPECT_THROW(a.refcount(7), std::out_of_range);
}

TEST(BlockAllocator, GrowIsAllOrNothing) {
    kv::BlockAllocator a(4, 16);
    kv::BlockTable t;
    EXPECT_TRUE(kv::grow(a, t, 1));
    EXPECT_EQ(t.blocks.size(), 1u);
    EXPECT_TRUE(kv::grow(a, t, 16));
    EXPECT_EQ(t.blocks.size(), 1u) << "16 positions fit one block";
    EXPECT_TRUE(kv::grow(a, t, 17));
    EXPECT_EQ(t.blocks.size(), 2u);
    EXPECT_FALSE(kv::grow(a, t, 16 * 4 + 1));
    EXPECT_EQ(t.blocks.size(), 2u);
    EXPECT_EQ(a.free_count(), 2);
    kv::release_all(a, t);
    EXPECT_EQ(a.free_count(), 4);
    EXPECT_TRUE(t.blocks.empty());
}

TEST(BlockAllocator, SharedPrefixIsCopiedOnWrite) {
    kv::BlockAllocator a(8, 16);
    kv::BlockTable src;
    ASSERT_TRUE(kv::grow(a, src, 40));  // 3 blocks, the last one half full
    kv::BlockTable dst = kv::share_prefix(a, src, 40);
    EXPECT_EQ(dst.blocks, src.blocks);
    EXPECT_EQ(a.used(), 3);
    // Writing position 35 of dst (block 2, shared): a fresh block, copy from the old.
    const auto cow = kv::make_writable(a, dst, 35);
    EXPECT_EQ(cow.from, src.blocks[2]);
    EXPECT_GE(cow.to, 0);
    EXPECT_NE(dst.blocks[2], src.blocks[2]);
    EXPECT_EQ(dst.blocks[0], src.blocks[0]);
    EXPECT_EQ(a.refcount(src.blocks[2]), 1);
    // Now private: no second copy.
    const auto again = kv::make_writable(a, dst, 36);
    EXPECT_EQ(again.from, -1);
    EXPECT_EQ(again.to, -1);
    EXPECT_THROW(kv::share_prefix(a, src, 41), std::invalid_argument);
}

// --- the chunk step ------------------------------------------------------------

// fp64 softmax attention of G heads over n rows (rows given as doubles).
std::vector<double> ref_attention(const std::vector<float>& q, int G, int hd, const std::vector<double>& K,
                                  const std::vector<double>& V, int n) {
    std::vector<double> o(std::size_t(G) * hd, 0.0);
    for (int g = 0; g < G; ++g) {
        std::vector<double> s(static_cast<std::size_t>(n));
        double m = -INFINITY, sum = 0;
        for (int j = 0; j < n; ++j) {
            double d = 0;
            for (int e = 0; e < hd; ++e) d += double(q[std::size_t(g * hd + e)]) * K[std::size_t(j * hd + e)];
            m = std::max(m, s[std::size_t(j)] = d);
        }
        for (auto& x : s) sum += (x = std::exp(x - m));
        for (int j = 0; j < n; ++j)
            for (int e = 0; e < hd; ++e) o[std::size_t(g * hd + e)] += s[std::size_t(j)] / sum * V[std::size_t(j * hd + e)];
    }
    return o;
}

class AttendGroup : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override { setenv("MEMWALL_ISA", GetParam(), 1); }
    void TearDown() override { unsetenv("MEMWALL_ISA"); }
};

TEST_P(AttendGroup, MatchesFp64SoftmaxAtOddLengths) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int hd : {32, 8, 6, 128})
        for (int G : {1, 2, 8})
            for (int n : {1, 7, 16, 17, 33, 129}) {
                std::vector<float> q(std::size_t(G) * hd), K(std::size_t(n) * hd), V(K.size());
                for (auto& x : q) x = nd(rng) * 0.3f;
                for (auto& x : K) x = nd(rng);
                for (auto& x : V) x = nd(rng);
                const auto ref = ref_attention(q, G, hd, {K.begin(), K.end()}, {V.begin(), V.end()}, n);
                std::vector<float> o(q.size());
                kv::attend_group(q.data(), G, hd, n, kv::F32Chunks([&](int c) {
                    return kv::F32Rows{K.data() + c * 16 * hd, V.data() + c * 16 * hd, hd};
                }), o.data());
                for (std::size_t i = 0; i < o.size(); ++i)
                    ASSERT_NEAR(o[i], ref[i], 2e-5 * (1 + std::fabs(ref[i])))
                        << "hd " << hd << " G " << G << " n " << n << " element " << i;
            }
}

TEST_P(AttendGroup, Int8RowsMatchTheDequantizedCache) {
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const int hd = 32, G = 4;
    for (int n : {1, 7, 33, 129}) {
        std::vector<float> q(std::size_t(G) * hd), K(std::size_t(n) * hd), V(K.size());
        for (auto& x : q) x = nd(rng) * 0.3f;
        for (auto& x : K) x = nd(rng);
        for (auto& x : V) x = nd(rng);
        std::vector<std::int8_t> kq(K.size()), vq(V.size());
        std::vector<float> ks(static_cast<std::size_t>(n)), vs(static_cast<std::size_t>(n));
        std::vector<double> Kd(K.size()), Vd(V.size());
        for (int j = 0; j < n; ++j) {
            ks[std::size_t(j)] = kv::quantize_row_int8(K.data() + j * hd, hd, kq.data() + j * hd);
            vs[std::size_t(j)] = kv::quantize_row_int8(V.data() + j * hd, hd, vq.data() + j * hd);
            for (int e = 0; e < hd; ++e) {
                Kd[std::size_t(j * hd + e)] = double(ks[std::size_t(j)]) * kq[std::size_t(j * hd + e)];
                Vd[std::size_t(j * hd + e)] = double(vs[std::size_t(j)]) * vq[std::size_t(j * hd + e)];
            }
        }
        const auto ref = ref_attention(q, G, hd, Kd, Vd, n);
        std::vector<float> o(q.size());
        kv::attend_group(q.data(), G, hd, n, kv::I8Chunks([&](int c) {
            const int j = c * 16;
            return kv::I8Rows{kq.data() + j * hd, vq.data() + j * hd, ks.data() + j, vs.data() + j, hd, 1};
        }), o.data());
        for (std::size_t i = 0; i < o.size(); ++i) ASSERT_NEAR(o[i], ref[i], 2e-5 * (1 + std::fabs(ref[i]))) << n;
    }
}

INSTANTIATE_TEST_SUITE_P(BothIsas, AttendGroup, ::testing::Values("avx512", "avx2"));

TEST(QuantizeRowInt8, ScaleIsPerRowAndRoundsToNearest) {
    const float x[4] = {1.0f, -0.5f, 0.25f, 0.0f};
    std::int8_t q[4];
    const float s = kv::quantize_row_int8(x, 4, q);
    EXPECT_FLOAT_EQ(s, 1.0f / 127.0f);
    EXPECT_EQ(q[0], 127);
    EXPECT_EQ(q[1], -64);  // -63.5 rounds to even
    EXPECT_EQ(q[2], 32);   // 31.75
    EXPECT_EQ(q[3], 0);
    const float z[3] = {0, 0, 0};
    EXPECT_EQ(kv::quantize_row_int8(z, 3, q), 1.0f);
}

// --- the layouts ---------------------------------------------------------------

const kv::KvGeometry kGeo{3, 2, 32};  // 3 layers, 2 kv heads of 32

// Writes `len` positions of random rows into seq of each store (same rows).
std::vector<std::vector<float>> fill(std::vector<kv::KvStore*> stores, int seq, int len, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<std::vector<float>> rows;  // [pos * layers + layer] -> k | v
    for (int pos = 0; pos < len; ++pos)
        for (int l = 0; l < kGeo.layers; ++l) {
            std::vector<float> kvr(std::size_t(2 * kGeo.kv_dim()));
            for (auto& x : kvr) x = nd(rng);
            for (auto* s : stores) s->write(seq, l, pos, kvr.data(), kvr.data() + kGeo.kv_dim());
            rows.push_back(kvr);
        }
    return rows;
}

TEST(KvStore, PagedReproducesContiguousBitForBit) {
    kv::ContiguousStore c(kGeo, 3, 200);
    kv::PagedStore p(kGeo, 3, 40);
    const int lens[3] = {1, 37, 129};
    for (int s = 0; s < 3; ++s) ASSERT_TRUE(c.open(s, 200) && p.open(s, 200));
    // Interleave the sequences' growth so their blocks are scattered in the pool.
    for (int step = 16; step < 129 + 16; step += 16)
        for (int s = 0; s < 3; ++s) ASSERT_TRUE(p.grow(s, std::min(lens[s], step)));
    EXPECT_NE(p.table(2).blocks[1], p.table(2).blocks[0] + 1) << "the test wants a scattered block table";
    for (int s = 0; s < 3; ++s) fill({&c, &p}, s, lens[s], 100 + s);
    std::vector<float> q(4 * 32, 0.1f), oc(q.size()), op(q.size());
    for (int i = 0; i < int(q.size()); ++i) q[std::size_t(i)] = 0.05f * float(i % 13) - 0.3f;
    for (int s = 0; s < 3; ++s)
        for (int l = 0; l < 3; ++l)
            for (int h = 0; h < 2; ++h) {
                c.attend(s, l, h, lens[s], q.data(), 4, oc.data());
                p.attend(s, l, h, lens[s], q.data(), 4, op.data());
                ASSERT_EQ(0, std::memcmp(oc.data(), op.data(), oc.size() * 4)) << "seq " << s << " layer " << l << " head " << h;
            }
}

TEST(KvStore, ContiguousAttendsTheRowsWritten) {
    kv::ContiguousStore c(kGeo, 2, 50);
    ASSERT_TRUE(c.open(1, 50));
    const int len = 33;
    const auto rows = fill({&c}, 1, len, 5);
    std::vector<float> q(2 * 32);
    for (int i = 0; i < 64; ++i) q[std::size_t(i)] = 0.02f * float(i % 7);
    const int layer = 2, head = 1;
    std::vector<double> K, V;
    for (int pos = 0; pos < len; ++pos) {
        const auto& r = rows[std::size_t(pos * kGeo.layers + layer)];
        for (int e = 0; e < 32; ++e) K.push_back(r[std::size_t(head * 32 + e)]), V.push_back(r[std::size_t(kGeo.kv_dim() + head * 32 + e)]);
    }
    const auto ref = ref_attention(q, 2, 32, K, V, len);
    std::vector<float> o(q.size());
    c.attend(1, layer, head, len, q.data(), 2, o.data());
    for (std::size_t i = 0; i < o.size(); ++i) ASSERT_NEAR(o[i], ref[i], 2e-5 * (1 + std::fabs(ref[i])));
}

TEST(KvStore, Int8ScaleIsPerPositionNotPerTensor) {
    // Position 5 holds values 1000x larger than the others. Attending over
    // positions 0..4 must keep their precision (error <= half a step of each
    // row's own scale): with one scale for the whole cache, they would all
    // round to zero.
    kv::ContiguousStore c(kGeo, 1, 20, kv::Elem::i8);
    ASSERT_TRUE(c.open(0, 20));
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<std::vector<float>> V(8, std::vector<float>(std::size_t(kGeo.kv_dim())));
    for (int pos = 0; pos < 8; ++pos) {
        std::vector<float> k(std::size_t(kGeo.kv_dim()), 0.0f);  // equal keys: uniform attention
        for (auto& x : V[std::size_t(pos)]) x = nd(rng) * (pos == 5 ? 1000.0f : 1.0f);
        for (int l = 0; l < 3; ++l) c.write(0, l, pos, k.data(), V[std::size_t(pos)].data());
    }
    const int len = 5;
    std::vector<float> q(32, 0.0f), o(32);
    c.attend(0, 0, 0, len, q.data(), 1, o.data());
    double bound = 0;
    for (int pos = 0; pos < len; ++pos) {
        float amax = 0;
        for (int e = 0; e < 32; ++e) amax = std::max(amax, std::fabs(V[std::size_t(pos)][std::size_t(e)]));
        bound += 0.5 * amax / 127 / len;
    }
    for (int e = 0; e < 32; ++e) {
        double mean = 0;
        for (int pos = 0; pos < len; ++pos) mean += V[std::size_t(pos)][std::size_t(e)] / double(len);
        EXPECT_NEAR(o[std::size_t(e)], mean, bound * 1.01 + 1e-6) << "element " << e;
    }
    EXPECT_DOUBLE_EQ(kv::bytes_per_position(kGeo, kv::Elem::i8), 2.0 * 3 * (64 + 2 * 4.0));
    EXPECT_DOUBLE_EQ(kv::bytes_per_position(kGeo, kv::Elem::f32), 2.0 * 3 * 64 * 4.0);
}

TEST(KvStore, AccountingAndLimits) {
    const double per = kv::bytes_per_position(kGeo, kv::Elem::f32);
    kv::ContiguousStore c(kGeo, 2, 100);
    EXPECT_DOUBLE_EQ(c.budget_bytes(), 200 * per);
    EXPECT_FALSE(c.open(0, 101)) << "longer than a slot";
    ASSERT_TRUE(c.open(0, 100));
    EXPECT_THROW(c.open(0, 10), std::invalid_argument);
    EXPECT_THROW(c.open(2, 10), std::invalid_argument);
    EXPECT_DOUBLE_EQ(c.reserved_bytes(), 100 * per) << "a contiguous slot is reserved whole";
    fill({&c}, 0, 10, 1);
    EXPECT_DOUBLE_EQ(c.used_bytes(), 10 * per);
    std::vector<float> z(64);
    EXPECT_THROW(c.write(0, 0, 100, z.data(), z.data()), std::out_of_range);
    c.close(0);
    EXPECT_DOUBLE_EQ(c.reserved_bytes(), 0);

    kv::PagedStore p(kGeo, 4, 5);
    EXPECT_DOUBLE_EQ(p.budget_bytes(), 80 * per);
    EXPECT_FALSE(p.open(0, 81)) << "81 positions could never fit 5 blocks of 16";
    ASSERT_TRUE(p.open(0, 80));
    EXPECT_DOUBLE_EQ(p.reserved_bytes(), 0) << "paged reserves nothing up front";
    ASSERT_TRUE(p.grow(0, 17));
    EXPECT_DOUBLE_EQ(p.reserved_bytes(), 32 * per);
    EXPECT_THROW(p.write(0, 0, 32, z.data(), z.data()), std::out_of_range);
    ASSERT_TRUE(p.open(1, 80));
    EXPECT_FALSE(p.grow(1, 16 * 4)) << "only 3 blocks are left";
    EXPECT_EQ(p.capacity(1), 0);
    EXPECT_TRUE(p.grow(1, 16 * 3));
    p.close(0);
    EXPECT_EQ(p.allocator().free_count(), 2);
    EXPECT_THROW(p.close(0), std::invalid_argument);
    EXPECT_THROW(kv::PagedStore(kGeo, 1, 4, 8), std::invalid_argument) << "attention reads blocks of 16";
}

TEST(KvStore, SharedPromptIsCopiedOnWriteAndTheSourceKeepsItsRows) {
    kv::PagedStore p(kGeo, 2, 10);
    ASSERT_TRUE(p.open(0, 64) && p.grow(0, 20));
    const auto rows = fill({&p}, 0, 20, 9);
    std::vector<float> q(32), before(32), after(32);
    for (int i = 0; i < 32; ++i) q[std::size_t(i)] = 0.03f * float(i % 5);
    p.attend(0, 1, 0, 20, q.data(), 1, before.data());
    ASSERT_TRUE(p.open_shared(1, 64, 0, 20));
    EXPECT_EQ(p.allocator().used(), 2) << "the prefix's 2 blocks shared, not copied";
    EXPECT_DOUBLE_EQ(p.used_bytes(), 40 * kv::bytes_per_position(kGeo, kv::Elem::f32));
    // Sequence 1 writes position 20 (inside the shared second block) with other values.
    ASSERT_TRUE(p.grow(1, 21));
    std::vector<float> other(std::size_t(2 * kGeo.kv_dim()), 5.0f);
    for (int l = 0; l < 3; ++l) p.write(1, l, 20, other.data(), other.data() + kGeo.kv_dim());
    EXPECT_EQ(p.allocator().used(), 3) << "the written block was copied";
    EXPECT_NE(p.table(1).blocks[1], p.table(0).blocks[1]);
    EXPECT_EQ(p.table(1).blocks[0], p.table(0).blocks[0]);
    p.attend(0, 1, 0, 20, q.data(), 1, after.data());
    EXPECT_EQ(0, std::memcmp(before.data(), after.data(), 32 * 4)) << "the source's rows must not change";
    // The copy kept positions 16..19 of the source: sequence 1 attends over them too.
    std::vector<float> o1(32);
    p.attend(1, 1, 0, 20, q.data(), 1, o1.data());
    EXPECT_EQ(0, std::memcmp(before.data(), o1.data(), 32 * 4));
    p.close(0);
    EXPECT_EQ(p.allocator().used(), 2) << "the shared first block lives on in sequence 1";
}


// Speculative decoding's rollback: positions past the accepted prefix are
// forgotten, rewritten with other rows, and attention then sees exactly what
// a store that only ever held the kept rows and the new ones sees.
TEST(KvStore, TruncateForgetsRejectedPositionsAndFreesBlocks) {
    const double per = kv::bytes_per_position(kGeo, kv::Elem::f32);
    kv::ContiguousStore c(kGeo, 2, 80), fresh_c(kGeo, 1, 80);
    kv::PagedStore p(kGeo, 2, 10), fresh_p(kGeo, 1, 10);
    ASSERT_TRUE(c.open(1, 80) && p.open(1, 80) && fresh_c.open(0, 80) && fresh_p.open(0, 80));
    ASSERT_TRUE(p.grow(1, 39) && fresh_p.grow(0, 39));
    fill({&c, &p}, 1, 39, 7);         // 39 positions: 3 blocks
    EXPECT_EQ(p.allocator().used(), 3);
    c.truncate(1, 17), p.truncate(1, 17);
    EXPECT_EQ(c.written(1), 17);
    EXPECT_EQ(p.written(1), 17);
    EXPECT_DOUBLE_EQ(c.used_bytes(), 17 * per);
    EXPECT_EQ(p.allocator().used(), 2) << "the third block holds only forgotten positions";
    EXPECT_EQ(p.capacity(1), 32);
    // Rewrite 17..32 with other rows; the fresh stores hold the kept 17 rows
    // (the same seed) and the new ones.
    {
        std::mt19937 rng(7);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (int pos = 0; pos < 17; ++pos)
            for (int l = 0; l < kGeo.layers; ++l) {
                std::vector<float> r(std::size_t(2 * kGeo.kv_dim()));
                for (auto& x : r) x = nd(rng);
                fresh_c.write(0, l, pos, r.data(), r.data() + kGeo.kv_dim());
                fresh_p.write(0, l, pos, r.data(), r.data() + kGeo.kv_dim());
            }
    }
    ASSERT_TRUE(p.grow(1, 33));
    std::vector<float> other(std::size_t(2 * kGeo.kv_dim()));
    for (int pos = 17; pos < 33; ++pos)
        for (int l = 0; l < kGeo.layers; ++l) {
            for (std::size_t e = 0; e < other.size(); ++e) other[e] = 0.01f * float((pos * 7 + l * 3 + int(e)) % 29) - 0.1f;
            for (kv::KvStore* s : std::vector<kv::KvStore*>{&c, &p}) s->write(1, l, pos, other.data(), other.data() + kGeo.kv_dim());
            for (kv::KvStore* s : std::vector<kv::KvStore*>{&fresh_c, &fresh_p}) s->write(0, l, pos, other.data(), other.data() + kGeo.kv_dim());
        }
    std::vector<float> q(3 * 32), a(q.size()), b(q.size());
    for (int i = 0; i < int(q.size()); ++i) q[std::size_t(i)] = 0.03f * float(i % 11) - 0.15f;
    for (int l = 0; l < 3; ++l)
        for (int h = 0; h < 2; ++h) {
            c.attend(1, l, h, 33, q.data(), 3, a.data());
            fresh_c.attend(0, l, h, 33, q.data(), 3, b.data());
            ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "contiguous, layer " << l << " head " << h;
            p.attend(1, l, h, 33, q.data(), 3, a.data());
            fresh_p.attend(0, l, h, 33, q.data(), 3, b.data());
            ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "paged, layer " << l << " head " << h;
        }
    // Truncating to 0 frees everything; bad lengths name the valid range.
    p.truncate(1, 0);
    EXPECT_EQ(p.allocator().used(), 0);
    EXPECT_THROW(c.truncate(1, 81), std::invalid_argument);
    EXPECT_THROW(c.truncate(1, -1), std::invalid_argument);
    EXPECT_THROW(c.truncate(0, 1), std::invalid_argument) << "sequence 0 is not open";
    try {
        c.truncate(1, 99);
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("0..80"), std::string::npos) << e.what();
    }
}

}  // namespace
