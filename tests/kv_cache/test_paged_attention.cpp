// The paged KV cache's CUDA kernels (kernels/kv_cache/paged_attention.cuh)
// and attn_decode's CUDA rung that runs them (optimized/kv_cache/
// attn_decode_paged.cu), executed on the cuda-emu backend (the .cu source run
// on the CPU) and, where there is one, on the GPU:
//
//   AttnDecodePagedEmu / AttnDecodePagedCuda   the `paged` variant against the
//       op's fp64 oracle at odd shapes (ctx 1 .. 127 across pages, b 1 and 3,
//       kv_heads 1 and heads, hd 64 and 128);
//   PagedKernelsEmu / PagedKernelsCuda         the kernels through this file's
//       own block tables: kv_append writes exactly its rows where the table
//       says and nothing else; paged_decode over sequences of different
//       lengths against this file's own fp64 attention — and, read through the
//       identity table instead of the one the rows were written with, it
//       fails (the negative control for a kernel that ignores the table).
// The *Cuda suites are SKIPPED without a GPU, never passed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "harness/inputs.hpp"
#include "harness/registry.hpp"
#include "harness/runner.hpp"
#include "kernels/kv_cache/paged_attention.hpp"

namespace {

using mw::kv_cache::kPageSize;
using mw::kv_cache::PagedKv;

mw::Shape shape(long b, long heads, long kv, long ctx, long hd) {
    return {{{"b", b}, {"heads", heads}, {"kv_heads", kv}, {"ctx", ctx}, {"hd", hd}, {"window", 4096}, {"sinks", 4}}};
}

#ifndef MEMWALL_TEST_EXPECT_EMU
#define MEMWALL_TEST_EXPECT_EMU 0
#endif

// The backend's table, or a skip: cuda-emu must be there whenever this
// binary has the emulator (its absence is a failure, not a skip).
#define MW_PAGED_OR_SKIP(backend)                                                                  \
    const mw::kv_cache::PagedKernels* kt = mw::kv_cache::paged_kernels(backend);                    \
    if ((backend) == mw::Backend::cuda) {                                                           \
        if (!mw::cuda_backend_built()) GTEST_SKIP() << "CUDA backend not built";                   \
        if (mw::gpu_count() == 0) GTEST_SKIP() << "no GPU: " << mw::gpu_absent_reason();           \
    } else if (!kt && !MEMWALL_TEST_EXPECT_EMU) {                                                  \
        GTEST_SKIP() << "built without the cuda-emu backend";                                      \
    }                                                                                              \
    ASSERT_NE(kt, nullptr) << "no " << mw::to_string(backend) << " table registered"

// --- the attn_decode variant ---------------------------------------------------------------

const mw::Variant* paged_variant(mw::Backend backend) {
    for (const auto* v : mw::variants_of("attn_decode", backend))
        if (v->name == "paged") return v;
    return nullptr;
}

class AttnDecodePaged : public ::testing::TestWithParam<mw::Shape> {
protected:
    void check_on(mw::Backend backend) {
        const mw::Op* op = mw::find_op("attn_decode");
        const mw::Variant* v = paged_variant(backend);
        ASSERT_NE(v, nullptr);
        mw::Problem p = op->make_problem(GetParam(), mw::DType::f32, 5);
        const auto r = mw::check_variant(*op, *v, p, op->oracle(p));
        EXPECT_TRUE(r.correct) << mw::to_string(backend) << " at " << GetParam().str() << ": " << r.message;
    }
};

using AttnDecodePagedEmu = AttnDecodePaged;
using AttnDecodePagedCuda = AttnDecodePaged;

TEST_P(AttnDecodePagedEmu, MatchesTheOracle) {
    MW_PAGED_OR_SKIP(mw::Backend::cuda_emu);
    check_on(mw::Backend::cuda_emu);
}
TEST_P(AttnDecodePagedCuda, MatchesTheOracle) {
    MW_PAGED_OR_SKIP(mw::Backend::cuda);
    check_on(mw::Backend::cuda);
}

const auto kShapes = ::testing::Values(shape(1, 1, 1, 1, 64),      // one position
                                       shape(3, 4, 1, 7, 128),     // MQA, under a page
                                       shape(1, 8, 8, 17, 64),     // MHA, a page and one
                                       shape(3, 8, 2, 33, 128),    // GQA heads/4
                                       shape(1, 20, 1, 127, 64),   // a 20-head group: 3 chunks of 8
                                       shape(3, 4, 4, 300, 128));  // two splits
std::string shape_name(const testing::TestParamInfo<mw::Shape>& info) {
    std::string n = info.param.str();
    for (char& c : n)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return n;
}
INSTANTIATE_TEST_SUITE_P(OddShapesFirst, AttnDecodePagedEmu, kShapes, shape_name);
INSTANTIATE_TEST_SUITE_P(OddShapesFirst, AttnDecodePagedCuda, kShapes, shape_name);

// --- the kernels through this file's own tables ---------------------------------------------

// Device memory of one backend, freed at scope exit.
struct Device {
    const mw::kv_cache::PagedKernels* kt;
    std::vector<void*> owned;
    ~Device() {
        for (void* p : owned) kt->free(p);
    }
    template <class T> T* put(const std::vector<T>& host) {
        T* d = static_cast<T*>(kt->alloc(host.size() * sizeof(T)));
        owned.push_back(d);
        kt->copy_to_device(d, host.data(), host.size() * sizeof(T));
        return d;
    }
    template <class T> std::vector<T> get(const T* d, std::size_t n) {
        std::vector<T> h(n);
        kt->copy_to_host(h.data(), d, n * sizeof(T));
        return h;
    }
};

std::vector<float> random_floats(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(gen);
    return v;
}

// A table of `pages` per sequence from a shuffled pool, and the pool's size.
std::vector<std::int32_t> shuffled_table(int b, int pages, unsigned seed) {
    std::vector<std::int32_t> t(std::size_t(b) * pages);
    std::iota(t.begin(), t.end(), 0);
    std::shuffle(t.begin(), t.end(), std::mt19937(seed));
    return t;
}

// Where position p of sequence s, kv head g starts in the pool, by the
// header's formula.
std::size_t slot(const std::vector<std::int32_t>& table, int max_pages, int kv_heads, int hd, int s, int p, int g) {
    return ((std::size_t(table[std::size_t(s) * max_pages + p / kPageSize]) * kPageSize + p % kPageSize) * kv_heads + g) *
           hd;
}

void append_writes_through_the_table(mw::Backend backend) {
    MW_PAGED_OR_SKIP(backend);
    const int b = 3, kvh = 2, hd = 64, max_pages = 4, row = kvh * hd;
    const auto table = shuffled_table(b, max_pages, 3);
    const std::size_t pool = std::size_t(b) * max_pages * kPageSize * row;
    Device d{kt, {}};
    const std::vector<float> sentinel(pool, -7.0f);
    PagedKv kv{d.put(sentinel), d.put(sentinel), d.put(table), nullptr, max_pages, kvh, hd};
    // A prefill of 20 rows per sequence at positions 0..19 (across a page
    // boundary), then one decode row per sequence at different positions.
    const std::vector<std::int32_t> zero(b, 0), next = {20, 47, 63};
    const auto pre_k = random_floats(std::size_t(b) * 20 * row, 1), pre_v = random_floats(pre_k.size(), 2);
    const auto new_k = random_floats(std::size_t(b) * row, 3), new_v = random_floats(new_k.size(), 4);
    kt->kv_append(kv, d.put(zero), d.put(pre_k), d.put(pre_v), b, 20);
    kt->kv_append(kv, d.put(next), d.put(new_k), d.put(new_v), b, 1);
    kt->synchronize();
    auto K = d.get(kv.K, pool), V = d.get(kv.V, pool);
    std::vector<bool> written(pool, false);
    auto expect_row = [&](int s, int p, const float* k, const float* v) {
        for (int g = 0; g < kvh; ++g)
            for (int e = 0; e < hd; ++e) {
                const std::size_t at = slot(table, max_pages, kvh, hd, s, p, g) + e;
                ASSERT_EQ(K[at], k[g * hd + e]) << "K of sequence " << s << " position " << p;
                ASSERT_EQ(V[at], v[g * hd + e]) << "V of sequence " << s << " position " << p;
                written[at] = true;
            }
    };
    for (int s = 0; s < b; ++s) {
        for (int p = 0; p < 20; ++p)
            expect_row(s, p, &pre_k[(std::size_t(s) * 20 + p) * row], &pre_v[(std::size_t(s) * 20 + p) * row]);
        expect_row(s, next[s], &new_k[std::size_t(s) * row], &new_v[std::size_t(s) * row]);
    }
    for (std::size_t i = 0; i < pool; ++i)
        if (!written[i]) {
            ASSERT_TRUE(K[i] == -7.0f && V[i] == -7.0f) << "pool element " << i << " overwritten";
        }
}

TEST(PagedKernelsEmu, AppendWritesExactlyItsRowsThroughTheTable) { append_writes_through_the_table(mw::Backend::cuda_emu); }
TEST(PagedKernelsCuda, AppendWritesExactlyItsRowsThroughTheTable) { append_writes_through_the_table(mw::Backend::cuda); }

// fp64 attention of q [b][heads][hd] over rows K, V [b][ctx][kv_heads][hd],
// positions j < lens[s].
std::vector<double> attend(const std::vector<float>& q, const std::vector<float>& K, const std::vector<float>& V,
                           const std::vector<std::int32_t>& lens, int heads, int kvh, int ctx, int hd) {
    const int b = int(lens.size());
    std::vector<double> o(std::size_t(b) * heads * hd, 0.0);
    for (int s = 0; s < b; ++s)
        for (int h = 0; h < heads; ++h) {
            const int g = h * kvh / heads;
            std::vector<double> w(std::size_t(lens[s]));
            double m = -INFINITY, z = 0;
            for (int j = 0; j < lens[s]; ++j) {
                double dot = 0;
                for (int e = 0; e < hd; ++e)
                    dot += double(q[(std::size_t(s) * heads + h) * hd + e]) * K[((std::size_t(s) * ctx + j) * kvh + g) * hd + e];
                m = std::max(m, w[std::size_t(j)] = dot / std::sqrt(double(hd)));
            }
            for (double& x : w) z += (x = std::exp(x - m));
            for (int j = 0; j < lens[s]; ++j)
                for (int e = 0; e < hd; ++e)
                    o[(std::size_t(s) * heads + h) * hd + e] +=
                        w[std::size_t(j)] / z * V[((std::size_t(s) * ctx + j) * kvh + g) * hd + e];
        }
    return o;
}

void decode_follows_the_table(mw::Backend backend) {
    MW_PAGED_OR_SKIP(backend);
    const int b = 3, heads = 8, kvh = 2, hd = 128, ctx = 300, row = kvh * hd;
    const int max_pages = (ctx + kPageSize - 1) / kPageSize;
    const std::vector<std::int32_t> lens = {1, 17, 300};  // one row; a page and one; two splits
    const auto table = shuffled_table(b, max_pages, 9);
    std::vector<std::int32_t> identity(table.size());
    std::iota(identity.begin(), identity.end(), 0);
    const auto K = random_floats(std::size_t(b) * ctx * row, 5), V = random_floats(K.size(), 6);
    const auto q = random_floats(std::size_t(b) * heads * hd, 7);
    const std::size_t pool = std::size_t(b) * max_pages * kPageSize * row;
    Device d{kt, {}};
    PagedKv kv{d.put(std::vector<float>(pool, 0.0f)), d.put(std::vector<float>(pool, 0.0f)), d.put(table),
               d.put(lens), max_pages, kvh, hd};
    kt->kv_append(kv, d.put(std::vector<std::int32_t>(b, 0)), d.put(K), d.put(V), b, ctx);  // a whole prefill
    float* ws = d.put(std::vector<float>(mw::kv_cache::paged_workspace_floats(b, heads, hd, max_pages)));
    float* o = d.put(std::vector<float>(std::size_t(b) * heads * hd, NAN));
    const auto want = attend(q, K, V, lens, heads, kvh, ctx, hd);
    const float* dq = d.put(q);
    auto decoded = [&](const PagedKv& with) {
        kt->paged_decode(with, dq, o, b, heads, ws);
        kt->synchronize();
        mw::Buffer out = mw::Buffer::make("o", mw::DType::f32, std::size_t(b) * heads * hd);
        const auto h = d.get(o, out.count);
        std::copy(h.begin(), h.end(), out.as<float>());
        return mw::check_close(out, want, mw::DType::f32, ctx, 2.0);
    };
    const auto right = decoded(kv);
    EXPECT_TRUE(right.ok) << right.message;
    PagedKv wrong = kv;
    wrong.table = d.put(identity);
    EXPECT_FALSE(decoded(wrong).ok) << "decoding through the identity table matched: the table is not being read";
    EXPECT_THROW(kt->paged_decode(PagedKv{kv.K, kv.V, kv.table, kv.lens, max_pages, kvh, 256}, dq, o, b, heads, ws),
                 std::invalid_argument);
}

TEST(PagedKernelsEmu, DecodeReadsThroughTheTable) { decode_follows_the_table(mw::Backend::cuda_emu); }
TEST(PagedKernelsCuda, DecodeReadsThroughTheTable) { decode_follows_the_table(mw::Backend::cuda); }

}  // namespace
