// attn_decode, rung 0 (the reference): one decode step's attention.
//
// The op: for each sequence b and query head h (kv head g = h / (heads /
// kv_heads)), one query q[b,h] against the cache K, V [b, ctx, kv_heads, hd]:
//     s_j = q . K[b,j,g] / sqrt(hd),  p = softmax(s),  o[b,h] = sum_j p_j V[b,j,g].
// FLOPs 4 b heads ctx hd; compulsory bytes: the cache once (8 b ctx kv_heads
// hd) — so the intensity is heads / (2 kv_heads) FLOP/B: 0.5 for MHA, 2 for
// GQA with groups of 4, and heads/2 for MQA. A decode step is memory-bound
// unless the group is large; grouping is what buys intensity.
//
// This rung: per (sequence, query head), the textbook three sweeps — scores,
// max/exp/sum, weighted sum of V — with a scratch row of ctx scores. Each
// query head reads its kv head's K and V itself, so a group of G heads reads
// the same cache G times: from DRAM when the cache is larger than the L3.
// (Sequences and heads are dealt to the threads, so the comparison with the
// split rung is about bytes, not core count.) Bytes: 8 b heads ctx hd.
#include <algorithm>
#include <cmath>
#include <vector>

#include "harness/inputs.hpp"
#include "reference/kv_cache/generate.hpp"

namespace mw::kv_cache {

namespace {

Problem make_attn_decode(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto b = s["b"], h = s["heads"], g = s["kv_heads"], ctx = s["ctx"], hd = s["hd"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("q", DType::f32, std::size_t(b * h * hd), {b, h, hd}));
    p.inputs.push_back(Buffer::make("K", DType::f32, std::size_t(b * ctx * g * hd), {b, ctx, g, hd}));
    p.inputs.push_back(Buffer::make("V", DType::f32, std::size_t(b * ctx * g * hd), {b, ctx, g, hd}));
    p.outputs.push_back(Buffer::make("o", DType::f32, std::size_t(b * h * hd), {b, h, hd}));
    fill_normal(p.in("q"), mix_seed(seed, "q"));
    fill_normal(p.in("K"), mix_seed(seed, "K"));
    fill_uniform(p.in("V"), mix_seed(seed, "V"), -1.0, 1.0);
    return p;
}

std::vector<std::vector<double>> attn_decode_oracle(const Problem& p) {
    return {attn_decode_exact(p.shape, p.in("q").as<float>(), {.K = p.in("K").as<float>(), .V = p.in("V").as<float>()})};
}

std::string validate_attn_decode(const Shape& s) {
    if (s["heads"] % s["kv_heads"])
        return "kv_heads = " + std::to_string(s["kv_heads"]) + " must divide heads = " + std::to_string(s["heads"]);
    return {};
}

Instance prepare_naive(Problem& p) {
    const long b = p.shape["b"], h = p.shape["heads"], g = p.shape["kv_heads"], ctx = p.shape["ctx"], hd = p.shape["hd"];
    const float *q = p.in("q").as<float>(), *K = p.in("K").as<float>(), *V = p.in("V").as<float>();
    float* o = p.out("o").as<float>();
    Instance inst;
    inst.run = [=] {
        const float scale = 1.0f / std::sqrt(float(hd));
#pragma omp parallel
        {
            std::vector<float> sc(static_cast<std::size_t>(ctx));
#pragma omp for collapse(2) schedule(dynamic, 1)
            for (long s = 0; s < b; ++s)
                for (long hh = 0; hh < h; ++hh) {
                    const long kv = hh / (h / g);
                    const float* qh = q + (s * h + hh) * hd;
                    float m = -INFINITY, sum = 0;
                    for (long j = 0; j < ctx; ++j) {
                        const float* k = K + ((s * ctx + j) * g + kv) * hd;
                        float d = 0;
                        for (long e = 0; e < hd; ++e) d += qh[e] * k[e];
                        m = std::max(m, sc[std::size_t(j)] = d * scale);
                    }
                    for (float& x : sc) sum += (x = std::exp(x - m));
                    float* oh = o + (s * h + hh) * hd;
                    for (long e = 0; e < hd; ++e) oh[e] = 0;
                    for (long j = 0; j < ctx; ++j) {
                        const float w = sc[std::size_t(j)] / sum;
                        const float* v = V + ((s * ctx + j) * g + kv) * hd;
                        for (long e = 0; e < hd; ++e) oh[e] += w * v[e];
                    }
                }
        }
    };
    return inst;
}

}  // namespace

double attn_decode_cache_bytes(const Shape& s) {
    return 8.0 * double(s["b"]) * double(s["ctx"]) * double(s["kv_heads"]) * double(s["hd"]);
}

double attn_decode_int8_cache_bytes(const Shape& s) {
    return 2.0 * double(s["b"]) * double(s["ctx"]) * double(s["kv_heads"]) * (double(s["hd"]) + 4.0);
}

std::int64_t attn_decode_window_rows(const Shape& s) { return std::min(s["ctx"], s["sinks"] + s["window"]); }

double attn_decode_window_bytes(const Shape& s) {
    return 8.0 * double(s["b"]) * double(attn_decode_window_rows(s)) * double(s["kv_heads"]) * double(s["hd"]);
}

bool in_window(std::int64_t j, std::int64_t ctx, std::int64_t window, std::int64_t sinks) {
    return j < sinks || j >= ctx - window;
}

std::vector<double> attn_decode_exact(const Shape& s, const float* q, const ExactCache& kv,
                                      const std::function<bool(std::int64_t)>& keep) {
    const auto b = s["b"], h = s["heads"], g = s["kv_heads"], ctx = s["ctx"], hd = s["hd"];
    std::vector<std::int64_t> rows;  // the positions attended
    for (std::int64_t j = 0; j < ctx; ++j)
        if (!keep || keep(j)) rows.push_back(j);
    // Element e of row (sequence, position, kv head) r, in fp64.
    auto K = [&](std::int64_t r, std::int64_t e) {
        return kv.K8 ? double(kv.k_scale[r]) * kv.K8[r * hd + e] : double(kv.K[r * hd + e]);
    };
    auto V = [&](std::int64_t r, std::int64_t e) {
        return kv.V8 ? double(kv.v_scale[r]) * kv.V8[r * hd + e] : double(kv.V[r * hd + e]);
    };
    std::vector<double> o(std::size_t(b * h * hd), 0.0);
#pragma omp parallel for collapse(2) schedule(static)
    for (std::int64_t sq = 0; sq < b; ++sq)
        for (std::int64_t hh = 0; hh < h; ++hh) {
            const std::int64_t kvh = hh / (h / g);
            std::vector<double> sc(rows.size());
            double m = -INFINITY, sum = 0;
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const std::int64_t r = (sq * ctx + rows[i]) * g + kvh;
                double d = 0;
                for (std::int64_t e = 0; e < hd; ++e) d += double(q[(sq * h + hh) * hd + e]) * K(r, e);
                m = std::max(m, sc[i] = d / std::sqrt(double(hd)));
            }
            for (double& x : sc) sum += (x = std::exp(x - m));
            for (std::size_t i = 0; i < rows.size(); ++i) {
                const std::int64_t r = (sq * ctx + rows[i]) * g + kvh;
                for (std::int64_t e = 0; e < hd; ++e) o[std::size_t((sq * h + hh) * hd + e)] += sc[i] / sum * V(r, e);
            }
        }
    return o;
}

}  // namespace mw::kv_cache

MW_REGISTER_OP(attn_decode, {
    .name = "attn_decode", .lever = "kv_cache",
    .summary = "one query per sequence and head against a K/V cache [b, ctx, kv_heads, hd] (MHA/GQA/MQA by kv_heads)",
    // window, sinks: the sliding rung's (3) last positions and first
    // positions kept; every other rung ignores them.
    .axes = {"b", "heads", "kv_heads", "ctx", "hd", "window", "sinks"},
    // 512 MiB of cache: 16x this machine's 32 MiB L3, and the 300 MiB L3 of
    // the project's Xeon; GQA of Llama-3 8B's shape (32 heads on 8, hd 128).
    // A window of a quarter of the context with 4 sinks (StreamingLLM's).
    .default_shape = {{{"b", 4}, {"heads", 32}, {"kv_heads", 8}, {"ctx", 16384}, {"hd", 128}, {"window", 4096},
                       {"sinks", 4}}},
    .quick_shape = {{{"b", 1}, {"heads", 8}, {"kv_heads", 2}, {"ctx", 2048}, {"hd", 64}, {"window", 512},
                     {"sinks", 4}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return 4.0 * double(s["b"]) * s["heads"] * s["ctx"] * s["hd"]; },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        return mw::kv_cache::attn_decode_cache_bytes(s) + 8.0 * double(s["b"]) * s["heads"] * s["hd"];
    },
    .make_problem = mw::kv_cache::make_attn_decode,
    .oracle = mw::kv_cache::attn_decode_oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["ctx"]); },
              .tolerance_scale = 2.0,  // exp's conditioning, as for softmax
              .baseline_factor = 2.0},
    .validate = mw::kv_cache::validate_attn_decode,
    .flag_axes = {"sinks"},  // no sinks: a plain sliding window
    // The cache is read, q and o are a few KiB: judged by the read-only roof.
    .read_dominated = true });

MW_REGISTER_VARIANT(attn_decode_naive_cpu, {
    .name = "naive", .op = "attn_decode", .lever = "kv_cache",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "per query head, three sweeps over its kv head's cache: a group of G heads reads "
                 "the same K and V G times",
    .bytes = [](const mw::Shape& s, mw::DType) {
        return mw::kv_cache::attn_decode_cache_bytes(s) * double(s["heads"] / s["kv_heads"]);
    },
    .prepare = mw::kv_cache::prepare_naive });
