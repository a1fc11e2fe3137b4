// paged_attn, rung 0 (the reference): decode attention through a block table
// (the op: reference/kv_cache/paged_attn.hpp).
//
// FLOPs 4 heads hd sum(lens); compulsory bytes: q and o, the table, and the
// live cache rows once — 8 bytes per value pair in fp32, 2 + 8 / hd with the
// int8 flag (the codes plus a K and a V scale per position and kv head).
//
// This rung: per (sequence, query head), gather the head's rows through the
// block table into a contiguous scratch copy (dequantized, for int8), then
// the textbook three sweeps — scores and their max, exp and sum, the
// weighted sum of V. The table is followed exactly (position p in block
// table[p / 16], row p % 16, p < len); what it costs is bytes: each of the G
// query heads of a group reads the group's rows itself, G times the cache.
#include "reference/kv_cache/paged_attn.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

#include "harness/inputs.hpp"
#include "kernels/kv_cache/attend.hpp"
#include "kernels/kv_cache/block_allocator.hpp"

namespace mw::kv_cache {

namespace {

constexpr int kBlock = kAttnChunk;       // positions per block
constexpr float kStaleMagnitude = 64;    // stale rows: uniform in (-64, 64), live ones in (-1, 1)
constexpr float kOutlierK = 3, kOutlierV = 32;  // one position per sequence, its K and V scaled up

}  // namespace

PagedLayout paged_layout(const Shape& s) {
    PagedLayout L;
    const int b = int(s["b"]), ctx = int(s["ctx"]);
    const int top = ctx % 2 ? ctx : ctx - 1, span = (top - 1) / 2;
    for (int i = 0; i < b; ++i) {
        const int len = top - 2 * int(std::int64_t(i) * (span + 1) / b);
        L.lens.push_back(len);
        L.live_blocks += blocks_for(len, kBlock);
        L.positions += len;
    }
    L.max_blocks = blocks_for(ctx, kBlock);
    L.n_blocks = L.live_blocks + b + 1;
    return L;
}

PagedArgs paged_args(Problem& p) {
    PagedArgs a;
    a.b = int(p.shape["b"]), a.heads = int(p.shape["heads"]), a.kv_heads = int(p.shape["kv_heads"]);
    a.hd = int(p.shape["hd"]), a.max_blocks = paged_layout(p.shape).max_blocks, a.int8 = p.shape["int8"] != 0;
    a.q = p.in("q").as<float>();
    a.table = p.in("block_table").as<std::int32_t>();
    a.lens = p.in("lens").as<std::int32_t>();
    if (a.int8) {
        a.kq = p.in("K").as<std::int8_t>(), a.vq = p.in("V").as<std::int8_t>();
        a.ks = p.in("K_scale").as<float>(), a.vs = p.in("V_scale").as<float>();
    } else {
        a.kf = p.in("K").as<float>(), a.vf = p.in("V").as<float>();
    }
    a.o = p.out("o").as<float>();
    return a;
}

namespace {

// Bytes of the live cache rows, read once.
double paged_cache_bytes(const Shape& s) {
    const double values = double(paged_layout(s).positions) * double(s["kv_heads"]);
    return s["int8"] ? values * (2.0 * double(s["hd"]) + 8.0) : values * 8.0 * double(s["hd"]);
}

Problem make_paged_attn(const Shape& s, DType dtype, std::uint64_t seed) {
    const PagedLayout L = paged_layout(s);
    const std::int64_t b = s["b"], h = s["heads"], g = s["kv_heads"], hd = s["hd"];
    const std::int64_t rows = std::int64_t(L.n_blocks) * kBlock;  // pool rows, each [kv_heads][hd]
    const bool int8 = s["int8"] != 0;
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("q", DType::f32, std::size_t(b * h * hd), {b, h, hd}));
    p.inputs.push_back(Buffer::make("block_table", DType::i32, std::size_t(b * L.max_blocks), {b, L.max_blocks}));
    p.inputs.push_back(Buffer::make("lens", DType::i32, std::size_t(b), {b}));
    fill_normal(p.in("q"), mix_seed(seed, "q"));

    // Blocks handed out in a shuffled order: sequence 0 takes the first
    // blocks_for(len) of the permutation, then sequence 1, ...; the rest are
    // stale, and table entries past a sequence's last block name them.
    std::vector<int> perm(std::size_t(L.n_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937_64 rng(mix_seed(seed, "block order"));
    for (std::size_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[rng() % (i + 1)]);
    std::int32_t* table = p.in("block_table").as<std::int32_t>();
    std::vector<char> live_row(std::size_t(rows), 0);
    std::vector<std::int64_t> outlier_row;
    for (int i = 0, next = 0, stale = L.live_blocks; i < int(b); ++i) {
        const int len = L.lens[std::size_t(i)], nb = blocks_for(len, kBlock);
        std::int32_t* t = table + std::int64_t(i) * L.max_blocks;
        p.in("lens").as<std::int32_t>()[i] = len;
        for (int c = 0; c < L.max_blocks; ++c) {
            if (c < nb) {
                t[c] = perm[std::size_t(next++)];
            } else {
                t[c] = perm[std::size_t(stale)];
                stale = stale + 1 < L.n_blocks ? stale + 1 : L.live_blocks;
            }
        }
        auto row_of = [&](int pos) { return std::int64_t(t[pos / kBlock]) * kBlock + pos % kBlock; };
        for (int pos = 0; pos < len; ++pos) live_row[std::size_t(row_of(pos))] = 1;
        outlier_row.push_back(row_of(int(mix_seed(seed, "outlier " + std::to_string(i)) % std::uint64_t(len))));
    }

    // The pools in fp32: live rows uniform in (-1, 1), one outlier position per
    // sequence, stale rows scaled up to (-64, 64).
    const std::vector<std::int64_t> dims = {L.n_blocks, kBlock, g, hd};
    Buffer kf = Buffer::make("K", DType::f32, std::size_t(rows * g * hd), dims);
    Buffer vf = Buffer::make("V", DType::f32, std::size_t(rows * g * hd), dims);
    fill_uniform(kf, mix_seed(seed, "K"), -1.0, 1.0);
    fill_uniform(vf, mix_seed(seed, "V"), -1.0, 1.0);
    auto scale_row = [&](std::int64_t r, float fk, float fv) {
        for (std::int64_t e = 0; e < g * hd; ++e) kf.as<float>()[r * g * hd + e] *= fk, vf.as<float>()[r * g * hd + e] *= fv;
    };
    for (std::int64_t r = 0; r < rows; ++r)
        if (!live_row[std::size_t(r)]) scale_row(r, kStaleMagnitude, kStaleMagnitude);
    for (std::int64_t r : outlier_row) scale_row(r, kOutlierK, kOutlierV);

    if (!int8) {
        p.inputs.push_back(std::move(kf));
        p.inputs.push_back(std::move(vf));
    } else {
        // Stored as the int8 cache stores a row: per position and kv head.
        Buffer kq = Buffer::make("K", DType::i8, kf.count, dims), vq = Buffer::make("V", DType::i8, vf.count, dims);
        Buffer ks = Buffer::make("K_scale", DType::f32, std::size_t(rows * g), {L.n_blocks, kBlock, g});
        Buffer vs = Buffer::make("V_scale", DType::f32, std::size_t(rows * g), {L.n_blocks, kBlock, g});
#pragma omp parallel for schedule(static)
        for (std::int64_t r = 0; r < rows * g; ++r) {
            ks.as<float>()[r] = quantize_row_int8(kf.as<float>() + r * hd, int(hd), kq.as<std::int8_t>() + r * hd);
            vs.as<float>()[r] = quantize_row_int8(vf.as<float>() + r * hd, int(hd), vq.as<std::int8_t>() + r * hd);
        }
        for (Buffer* x : {&kq, &vq, &ks, &vs}) p.inputs.push_back(std::move(*x));
    }
    p.outputs.push_back(Buffer::make("o", DType::f32, std::size_t(b * h * hd), {b, h, hd}));
    return p;
}

// Where position `pos` of sequence s lives: the pool row (block * 16 + row),
// each row [kv_heads][hd].
std::int64_t pool_row(const PagedArgs& a, int s, int pos) {
    return std::int64_t(a.table[std::int64_t(s) * a.max_blocks + pos / kBlock]) * kBlock + pos % kBlock;
}

std::vector<std::vector<double>> paged_attn_oracle(const Problem& p) {
    const PagedArgs a = paged_args(const_cast<Problem&>(p));  // read only: the oracle writes its own vector
    const int G = a.heads / a.kv_heads, hd = a.hd;
    // Key or value e of kv head kv in pool row r, as the op defines it (in
    // fp64 an int8 code times its scale is exact).
    auto key = [&](std::int64_t r, int e) { return a.int8 ? double(a.ks[r]) * a.kq[r * hd + e] : double(a.kf[r * hd + e]); };
    auto val = [&](std::int64_t r, int e) { return a.int8 ? double(a.vs[r]) * a.vq[r * hd + e] : double(a.vf[r * hd + e]); };
    std::vector<double> o(std::size_t(a.b) * a.heads * hd, 0.0);
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int s = 0; s < a.b; ++s)
        for (int h = 0; h < a.heads; ++h) {
            const int kv = h / G, len = a.lens[s];
            const float* qh = a.q + (std::int64_t(s) * a.heads + h) * hd;
            std::vector<double> sc(static_cast<std::size_t>(len));
            double m = -INFINITY, sum = 0;
            for (int j = 0; j < len; ++j) {
                const std::int64_t r = pool_row(a, s, j) * a.kv_heads + kv;
                double d = 0;
                for (int e = 0; e < hd; ++e) d += double(qh[e]) * key(r, e);
                m = std::max(m, sc[std::size_t(j)] = d / std::sqrt(double(hd)));
            }
            for (double& x : sc) sum += (x = std::exp(x - m));
            double* out = o.data() + (std::int64_t(s) * a.heads + h) * hd;
            for (int j = 0; j < len; ++j) {
                const std::int64_t r = pool_row(a, s, j) * a.kv_heads + kv;
                for (int e = 0; e < hd; ++e) out[e] += sc[std::size_t(j)] / sum * val(r, e);
            }
        }
    return {std::move(o)};
}

std::string validate_paged_attn(const Shape& s) {
    if (s["heads"] % s["kv_heads"])
        return "kv_heads = " + std::to_string(s["kv_heads"]) + " must divide heads = " + std::to_string(s["heads"]);
    if (s["heads"] / s["kv_heads"] > kMaxGroup)
        return "heads / kv_heads = " + std::to_string(s["heads"] / s["kv_heads"]) + ": valid 1.." +
               std::to_string(kMaxGroup) + " query heads per kv head";
    if (s["int8"] != 0 && s["int8"] != 1) return "int8 = " + std::to_string(s["int8"]) + ": valid 0 (fp32 pools) or 1";
    return {};
}

Instance prepare_naive(Problem& p) {
    const PagedArgs a = paged_args(p);
    Instance inst;
    inst.run = [a] {
        const int G = a.heads / a.kv_heads, hd = a.hd;
        const float scale = 1.0f / std::sqrt(float(hd));
#pragma omp parallel
        {
            std::vector<float> K, V, sc;
#pragma omp for collapse(2) schedule(dynamic, 1)
            for (int s = 0; s < a.b; ++s)
                for (int h = 0; h < a.heads; ++h) {
                    const int kv = h / G, len = a.lens[s];
                    K.resize(std::size_t(len) * hd), V.resize(K.size()), sc.resize(std::size_t(len));
                    for (int j = 0; j < len; ++j) {  // the gather: the table, then the row
                        const std::int64_t r = pool_row(a, s, j) * a.kv_heads + kv;
                        for (int e = 0; e < hd; ++e)
                            K[std::size_t(j) * hd + e] = a.int8 ? a.ks[r] * a.kq[r * hd + e] : a.kf[r * hd + e],
                            V[std::size_t(j) * hd + e] = a.int8 ? a.vs[r] * a.vq[r * hd + e] : a.vf[r * hd + e];
                    }
                    const float* qh = a.q + (std::int64_t(s) * a.heads + h) * hd;
                    float m = -INFINITY, sum = 0;
                    for (int j = 0; j < len; ++j) {
                        float d = 0;
                        for (int e = 0; e < hd; ++e) d += qh[e] * K[std::size_t(j) * hd + e];
                        m = std::max(m, sc[std::size_t(j)] = d * scale);
                    }
                    for (float& x : sc) sum += (x = std::exp(x - m));
                    float* oh = a.o + (std::int64_t(s) * a.heads + h) * hd;
                    std::fill(oh, oh + hd, 0.0f);
                    for (int j = 0; j < len; ++j)
                        for (int e = 0; e < hd; ++e) oh[e] += sc[std::size_t(j)] / sum * V[std::size_t(j) * hd + e];
                }
        }
    };
    return inst;
}

}  // namespace
}  // namespace mw::kv_cache

MW_REGISTER_OP(paged_attn, {
    .name = "paged_attn", .lever = "kv_cache",
    .summary = "one decode query per sequence and head against a paged K/V cache (blocks of 16 through a block "
               "table; fp32 or, with int8=1, int8 with a scale per position and kv head)",
    .axes = {"b", "heads", "kv_heads", "hd", "ctx", "int8"},
    // Llama-3 8B's attention shape (32 query heads on 8 kv heads of 128),
    // four sequences of up to 4096: 84 MB of live fp32 cache, 2.5x this
    // machine's 32 MiB L3.
    .default_shape = {{{"b", 4}, {"heads", 32}, {"kv_heads", 8}, {"hd", 128}, {"ctx", 4096}, {"int8", 0}}},
    .quick_shape = {{{"b", 3}, {"heads", 8}, {"kv_heads", 2}, {"hd", 64}, {"ctx", 257}, {"int8", 0}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) {
        return 4.0 * double(mw::kv_cache::paged_layout(s).positions) * double(s["heads"]) * double(s["hd"]);
    },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        return mw::kv_cache::paged_cache_bytes(s) + 8.0 * double(s["b"] * s["heads"] * s["hd"]) +
               4.0 * double(s["b"]) * (mw::kv_cache::paged_layout(s).max_blocks + 1);
    },
    .make_problem = mw::kv_cache::make_paged_attn,
    .oracle = mw::kv_cache::paged_attn_oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["ctx"]); },
              .tolerance_scale = 2.0,  // exp's conditioning, as for softmax
              .baseline_factor = 2.0},
    .validate = mw::kv_cache::validate_paged_attn,
    .flag_axes = {"int8"},
    .read_dominated = true });

MW_REGISTER_VARIANT(paged_attn_naive_cpu, {
    .name = "naive", .op = "paged_attn", .lever = "kv_cache",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "per query head, gather its kv head's rows through the block table, then three sweeps: a group "
                 "of G heads reads the same rows G times",
    .bytes = [](const mw::Shape& s, mw::DType) {
        return mw::kv_cache::paged_cache_bytes(s) * double(s["heads"] / s["kv_heads"]) +
               8.0 * double(s["b"] * s["heads"] * s["hd"]);
    },
    .prepare = mw::kv_cache::prepare_naive });
