// moe_ffn, rung 0 (the reference): dense_masked, every expert on every token.
//
// The op (reference/moe/moe.hpp): y = x + sum_j w[t][j] FFN_{e[t][j]}(x[t]),
// each expert the model stack's SwiGLU MLP, for a routing given as inputs.
// Useful FLOPs 6 T k d d_ff; compulsory bytes: the E experts' weights
// (12 E d d_ff), x and y, the routing.
//
// This rung: for each expert, its FFN on all T tokens with the packed GEMM
// (gemm_ex) and the model's SwiGLU kernel, then y += g[t][e] * FFN_e(x[t])
// where g is the token's weight for e, or 0 when e is not one of its k: a
// dense layer with a mask. Simple and branch-free, and E/k times the useful
// FLOPs: at E = 8, k = 2 three quarters of the work is multiplied by zero.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "harness/inputs.hpp"
#include "kernels/moe/dispatch.hpp"
#include "reference/moe/moe.hpp"

namespace mw::moe {

long expert_capacity(const Shape& s) {
    const long c = s["capacity_pct"];
    if (c == 0) return -1;
    const long num = c * s["tokens"] * s["top_k"], den = 100 * s["experts"];
    return (num + den - 1) / den;
}

std::vector<char> kept_assignments(const std::int32_t* experts, long T, int k, int E, long capacity) {
    std::vector<char> kept(static_cast<std::size_t>(T * k), 1);
    if (capacity < 0) return kept;
    std::vector<long> taken(static_cast<std::size_t>(E), 0);
    for (int j = 0; j < k; ++j)  // every first choice before any second one
        for (long t = 0; t < T; ++t) {
            long& n = taken[std::size_t(experts[t * k + j])];
            kept[std::size_t(t * k + j)] = n < capacity;
            n += n < capacity;
        }
    return kept;
}

std::vector<double> ffn_exact(const Problem& p, const std::vector<char>& kept) {
    const auto& w = p.in("weights");
    std::vector<double> wt(w.as<float>(), w.as<float>() + w.count);
    return ffn_exact(p.shape, {p.in("x").as<float>(), p.in("experts").as<std::int32_t>(), wt.data(),
                               p.in("w_gate").as<float>(), p.in("w_up").as<float>(), p.in("w_down").as<float>()},
                     kept);
}

std::vector<double> ffn_exact(const Shape& s, const FfnInputs& in, const std::vector<char>& kept) {
    const long T = s["tokens"], d = s["d_model"], f = s["d_ff"];
    const int E = int(s["experts"]), k = int(s["top_k"]);
    const float* x = in.x;
    const std::int32_t* ex = in.experts;
    const double* wt = in.weights;
    const float *G = in.gate, *U = in.up, *D = in.down;
    // Each expert's assignments, in blocks of up to 16 tokens: a block reads
    // the expert's weights once (plain fp64 loops, but not 3 d d_ff weights
    // per token).
    constexpr long B = 16;
    std::vector<std::vector<long>> mine(static_cast<std::size_t>(E));
    for (long a = 0; a < T * k; ++a)
        if (kept.empty() || kept[std::size_t(a)]) mine[std::size_t(ex[a])].push_back(a);
    std::vector<std::pair<int, long>> blocks;  // (expert, first index into mine[e])
    for (int e = 0; e < E; ++e)
        for (long i = 0; i < long(mine[std::size_t(e)].size()); i += B) blocks.push_back({e, i});
    std::vector<double> out(static_cast<std::size_t>(T * k * d), 0.0);  // w FFN_e(x) per assignment
#pragma omp parallel
    {
        std::vector<double> a(static_cast<std::size_t>(B * f)), b(std::size_t(B * f)), h(std::size_t(B * f));
#pragma omp for schedule(dynamic, 1)
        for (long bi = 0; bi < long(blocks.size()); ++bi) {
            const auto [e, first] = blocks[std::size_t(bi)];
            const auto& list = mine[std::size_t(e)];
            const long n = std::min(B, long(list.size()) - first);
            std::fill(a.begin(), a.end(), 0.0);
            std::fill(b.begin(), b.end(), 0.0);
            for (long i = 0; i < d; ++i) {
                const float* g = G + (e * d + i) * f;
                const float* u = U + (e * d + i) * f;
                for (long r = 0; r < n; ++r) {
                    const double xv = x[(list[std::size_t(first + r)] / k) * d + i];
                    double *ar = a.data() + r * f, *br = b.data() + r * f;
                    for (long c = 0; c < f; ++c) ar[c] += xv * double(g[c]), br[c] += xv * double(u[c]);
                }
            }
            for (long i = 0; i < n * f; ++i)
                h[std::size_t(i)] = a[std::size_t(i)] / (1.0 + std::exp(-a[std::size_t(i)])) * b[std::size_t(i)];
            for (long r = 0; r < n; ++r) {
                const long asg = list[std::size_t(first + r)];
                double* o = out.data() + asg * d;
                for (long c = 0; c < f; ++c) {
                    const double hv = h[std::size_t(r * f + c)];
                    const float* dw = D + (e * f + c) * d;
                    for (long j = 0; j < d; ++j) o[j] += hv * double(dw[j]);
                }
                for (long j = 0; j < d; ++j) o[j] *= wt[asg];
            }
        }
    }
    std::vector<double> y(static_cast<std::size_t>(T * d));
#pragma omp parallel for schedule(static)
    for (long t = 0; t < T; ++t)
        for (long j = 0; j < d; ++j) {
            double v = x[t * d + j];
            for (int s2 = 0; s2 < k; ++s2) v += out[std::size_t((t * k + s2) * d + j)];
            y[std::size_t(t * d + j)] = v;
        }
    return y;
}

double ffn_useful_flops(const Shape& s) {
    return 6.0 * double(s["tokens"]) * s["top_k"] * s["d_model"] * s["d_ff"];
}
double ffn_weight_bytes(const Shape& s) { return 12.0 * double(s["experts"]) * s["d_model"] * s["d_ff"]; }
double ffn_activation_bytes(const Shape& s) {
    return 8.0 * double(s["tokens"]) * s["d_model"] + 8.0 * double(s["tokens"]) * s["top_k"];
}

std::vector<long> expert_loads(const Problem& p, long capacity) {
    const auto& s = p.shape;
    const int E = int(s["experts"]), k = int(s["top_k"]);
    const std::int32_t* ex = p.in("experts").as<std::int32_t>();
    const auto kept = kept_assignments(ex, s["tokens"], k, E, capacity);
    std::vector<long> load(static_cast<std::size_t>(E), 0);
    for (long a = 0; a < s["tokens"] * k; ++a) load[std::size_t(ex[a])] += kept[std::size_t(a)];
    return load;
}

std::map<std::string, double> ffn_counters(const Problem& p, long capacity) {
    const auto& s = p.shape;
    const long T = s["tokens"];
    const int E = int(s["experts"]), k = int(s["top_k"]);
    const std::int32_t* ex = p.in("experts").as<std::int32_t>();
    const auto kept = kept_assignments(ex, T, k, E, capacity);
    const auto load = expert_loads(p, capacity);
    std::map<std::string, double> c;
    double dropped = 0, tokens_dropped = 0;
    for (long t = 0; t < T; ++t) {
        int n = 0;
        for (int j = 0; j < k; ++j) n += !kept[std::size_t(t * k + j)];
        dropped += n;
        tokens_dropped += n == k;
    }
    const double busiest = double(*std::max_element(load.begin(), load.end()));
    c["busiest_expert_rows"] = busiest;
    c["busiest_over_mean"] = busiest / (double(T * k) / E);
    c["dropped_assignments"] = dropped;
    c["dropped_tokens"] = tokens_dropped;  // every choice dropped: y = x
    c["capacity"] = double(capacity);      // -1: unbounded
    return c;
}

namespace {

Problem make_ffn(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto T = s["tokens"], d = s["d_model"], f = s["d_ff"], E = s["experts"], k = s["top_k"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("x", DType::f32, std::size_t(T * d), {T, d}));
    p.inputs.push_back(Buffer::make("experts", DType::i32, std::size_t(T * k), {T, k}));
    p.inputs.push_back(Buffer::make("weights", DType::f32, std::size_t(T * k), {T, k}));
    p.inputs.push_back(Buffer::make("w_gate", DType::f32, std::size_t(E * d * f), {E, d, f}));
    p.inputs.push_back(Buffer::make("w_up", DType::f32, std::size_t(E * d * f), {E, d, f}));
    p.inputs.push_back(Buffer::make("w_down", DType::f32, std::size_t(E * f * d), {E, f, d}));
    p.outputs.push_back(Buffer::make("y", DType::f32, std::size_t(T * d), {T, d}));
    // The routing: moe_route's fp64 rule on the router's seeded inputs, with
    // the same x, so the tokens are routed as moe_route would route them.
    Buffer wr = Buffer::make("w_router", DType::f32, std::size_t(d * E)), bias = Buffer::make("bias", DType::f32, std::size_t(E));
    fill_router_inputs(p.in("x"), wr, bias, s, seed);
    Routing r = route_exact(p.in("x").as<float>(), wr.as<float>(), bias.as<float>(), T, d, int(E), int(k));
    std::copy(r.experts.begin(), r.experts.end(), p.in("experts").as<std::int32_t>());
    for (std::size_t i = 0; i < r.weights.size(); ++i) p.in("weights").as<float>()[i] = float(r.weights[i]);
    fill_normal(p.in("w_gate"), mix_seed(seed, "w_gate"), 1.0 / std::sqrt(double(d)));
    fill_normal(p.in("w_up"), mix_seed(seed, "w_up"), 1.0 / std::sqrt(double(d)));
    fill_normal(p.in("w_down"), mix_seed(seed, "w_down"), 1.0 / std::sqrt(double(f)));
    return p;
}

std::vector<std::vector<double>> ffn_oracle(const Problem& p) { return {ffn_exact(p, {})}; }

std::string validate_ffn(const Shape& s) {
    if (auto e = validate_route_shape(s); !e.empty()) return e;
    if (s["capacity_pct"] > 100000)
        return "capacity_pct = " + std::to_string(s["capacity_pct"]) + " is over 100000 (use 0 for unbounded)";
    return {};
}

}  // namespace

double ep::exchange_rung_bytes(const Shape& s, DType) {
    return ffn_weight_bytes(s) + ffn_activation_bytes(s) + 16.0 * double(s["tokens"]) * s["top_k"] * s["d_model"] +
           24.0 * double(s["tokens"]) * s["top_k"] * s["d_ff"];
}

FfnArgs ffn_args(Problem& p) {
    const long d = p.shape["d_model"], f = p.shape["d_ff"];
    return {p.shape["tokens"], d, f, int(p.shape["experts"]), int(p.shape["top_k"]),
            p.in("x").as<float>(), p.in("experts").as<std::int32_t>(), p.in("weights").as<float>(),
            Experts{p.in("w_gate").as<float>(), p.in("w_up").as<float>(), p.in("w_down").as<float>(), d, f},
            p.out("y").as<float>()};
}

namespace {

Instance prepare_dense_masked(Problem& p) {
    const auto [T, d, f, E, k, x, ex, wt, w, y] = ffn_args(p);
    auto scratch = std::make_shared<std::vector<float>>(std::size_t(3 * T * f + T * d));
    Instance inst;
    inst.run = [=] {
        float* ye = scratch->data() + 3 * T * f;
        std::memcpy(y, x, sizeof(float) * std::size_t(T * d));
        for (int e = 0; e < E; ++e) {
            expert_ffn(w, e, x, T, ye, scratch->data());
#pragma omp parallel for schedule(static)
            for (long t = 0; t < T; ++t) {
                float g = 0;  // the mask: the token's weight for e, or 0
                for (int j = 0; j < k; ++j)
                    if (ex[t * k + j] == e) g = wt[t * k + j];
                for (long c = 0; c < d; ++c) y[t * d + c] = std::fma(g, ye[t * d + c], y[t * d + c]);
            }
        }
    };
    inst.counters = [&p] { return ffn_counters(p, -1); };
    return inst;
}

}  // namespace
}  // namespace mw::moe

MW_REGISTER_OP(moe_ffn, {
    .name = "moe_ffn", .lever = "moe",
    .summary = "a mixture-of-experts SwiGLU FFN: y = x + sum_j w_j FFN_{e_j}(x) for a given top-k routing",
    .axes = {"tokens", "d_model", "d_ff", "experts", "top_k", "capacity_pct", "skew"},
    // The shape: 8 experts of Llama-7B-like width (d_ff 2816 = 2.75 d), top-2.
    .default_shape = {{{"tokens", 4096}, {"d_model", 1024}, {"d_ff", 2816}, {"experts", 8}, {"top_k", 2},
                       {"capacity_pct", 125}, {"skew", 0}}},
    .quick_shape = {{{"tokens", 256}, {"d_model", 128}, {"d_ff", 352}, {"experts", 8}, {"top_k", 2},
                     {"capacity_pct", 125}, {"skew", 0}}},
    .dtypes = {mw::DType::f32},
    .flops = mw::moe::ffn_useful_flops,
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        return mw::moe::ffn_weight_bytes(s) + mw::moe::ffn_activation_bytes(s);
    },
    .unit = {"tokens", [](const mw::Shape& s) { return double(s["tokens"]); }},
    .make_problem = mw::moe::make_ffn,
    .oracle = mw::moe::ffn_oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["d_ff"]); }},
    .validate = mw::moe::validate_ffn,
    .flag_axes = {"capacity_pct", "skew"} });

MW_REGISTER_VARIANT(moe_ffn_dense_masked_cpu, {
    .name = "dense_masked", .op = "moe_ffn", .lever = "moe",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "every expert on every token with the packed GEMM, masked by the routing weights: "
                 "E/k times the useful FLOPs",
    .bytes = [](const mw::Shape& s, mw::DType) {
        // The weights once, and per expert its T x d_ff activations (a, b, h) written and read.
        return mw::moe::ffn_weight_bytes(s) + mw::moe::ffn_activation_bytes(s) +
               double(s["experts"]) * (24.0 * s["tokens"] * s["d_ff"] + 8.0 * s["tokens"] * s["d_model"]);
    },
    .executed_flops = [](const mw::Shape& s) {
        return mw::moe::ffn_useful_flops(s) * double(s["experts"]) / double(s["top_k"]);
    },
    .prepare = mw::moe::prepare_dense_masked });
