// moe_route, rung 0 (the reference): the router of a mixture-of-experts layer.
//
// The op (reference/moe/moe.hpp): logits l = x W_r + bias, p = softmax(l) over
// the E experts, the k largest (larger logit first; equal logits: the lower
// expert index first), their probabilities renormalized to sum to 1. FLOPs
// 2 T d E (the softmax and the selection are O(T E)); bytes: x and W_r read
// once, the T k indices and weights written.
//
// This rung: per token, one dot product per expert read down a column of W_r
// (stride E), the softmax, then k passes of "take the largest not yet taken".
// The router is a skinny GEMM (E is 8 to 256): its cost is reading x, once.
#include <algorithm>
#include <cmath>

#include "harness/inputs.hpp"
#include "reference/moe/moe.hpp"

namespace mw::moe {

namespace {

// Rounds every element to a multiple of 1/scale inside [-lim, lim]: the grid
// that keeps the logits exact in fp32 (see moe.hpp).
void to_grid(Buffer& b, double scale, double lim) {
    float* v = b.as<float>();
    for (std::size_t i = 0; i < b.count; ++i) v[i] = float(std::clamp(std::nearbyint(double(v[i]) * scale), -lim * scale, lim * scale) / scale);
}

}  // namespace

void fill_router_inputs(Buffer& x, Buffer& w_router, Buffer& bias, const Shape& s, std::uint64_t seed) {
    const long d = s["d_model"];
    const int E = int(s["experts"]);
    fill_normal(x, mix_seed(seed, "x"));
    to_grid(x, 8, 4);  // |x| <= 4 in 1/8ths: 6 bits
    fill_normal(w_router, mix_seed(seed, "w_router"), 1.0 / std::sqrt(double(d)));
    to_grid(w_router, 256, 0.25);  // |w| <= 1/4 in 1/256ths: 7 bits; a product is k / 2048, |k| <= 2^11
    float* b = bias.as<float>();
    std::fill(b, b + E, 0.0f);
    if (s["skew"] > 0 && E > 1) {
        // Two seeded hot experts; s/4 is a multiple of 1/4, on the grid.
        const std::uint64_t h = mix_seed(seed, "hot_experts");
        const int a = int(h % std::uint64_t(E)), c = int((a + 1 + (h >> 32) % std::uint64_t(E - 1)) % E);
        b[a] = b[c] = float(double(s["skew"]) / 4);
    }
}

Routing route_exact(const float* x, const float* w_router, const float* bias, long T, long d, int E, int k) {
    Routing r;
    r.experts.resize(std::size_t(T * k));
    r.weights.resize(std::size_t(T * k));
    r.probs.resize(std::size_t(T * E));
#pragma omp parallel for schedule(static)
    for (long t = 0; t < T; ++t) {
        std::vector<double> l(static_cast<std::size_t>(E));
        for (int e = 0; e < E; ++e) {
            double acc = bias[e];
            for (long i = 0; i < d; ++i) acc += double(x[t * d + i]) * double(w_router[i * E + e]);
            l[std::size_t(e)] = acc;
        }
        const double m = *std::max_element(l.begin(), l.end());
        double sum = 0;
        for (int e = 0; e < E; ++e) sum += std::exp(l[std::size_t(e)] - m);
        for (int e = 0; e < E; ++e) r.probs[std::size_t(t * E + e)] = std::exp(l[std::size_t(e)] - m) / sum;
        // A stable sort by descending logit keeps equal logits in index order.
        std::vector<int> order(static_cast<std::size_t>(E));
        for (int e = 0; e < E; ++e) order[std::size_t(e)] = e;
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[std::size_t(a)] > l[std::size_t(b)]; });
        double top = 0;
        for (int j = 0; j < k; ++j) top += r.probs[std::size_t(t * E + order[std::size_t(j)])];
        for (int j = 0; j < k; ++j) {
            const int e = order[std::size_t(j)];
            r.experts[std::size_t(t * k + j)] = e;
            r.weights[std::size_t(t * k + j)] = r.probs[std::size_t(t * E + e)] / top;
        }
    }
    return r;
}

void add_router_inputs(Problem& p) {
    const auto T = p.shape["tokens"], d = p.shape["d_model"], E = p.shape["experts"];
    p.inputs.push_back(Buffer::make("x", DType::f32, std::size_t(T * d), {T, d}));
    p.inputs.push_back(Buffer::make("w_router", DType::f32, std::size_t(d * E), {d, E}));
    p.inputs.push_back(Buffer::make("bias", DType::f32, std::size_t(E), {E}));
    fill_router_inputs(p.in("x"), p.in("w_router"), p.in("bias"), p.shape, p.seed);
}

namespace {

Problem make_route(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto T = s["tokens"], k = s["top_k"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    add_router_inputs(p);
    p.outputs.push_back(Buffer::make("experts", DType::i32, std::size_t(T * k), {T, k}));
    p.outputs.push_back(Buffer::make("weights", DType::f32, std::size_t(T * k), {T, k}));
    return p;
}

std::vector<std::vector<double>> route_oracle(const Problem& p) {
    const auto& s = p.shape;
    Routing r = route_exact(p.in("x").as<float>(), p.in("w_router").as<float>(), p.in("bias").as<float>(),
                            s["tokens"], s["d_model"], int(s["experts"]), int(s["top_k"]));
    return {{r.experts.begin(), r.experts.end()}, r.weights};
}

}  // namespace

std::string validate_route_shape(const Shape& s) {
    if (s["top_k"] > s["experts"])
        return "top_k = " + std::to_string(s["top_k"]) + " must be at most experts = " + std::to_string(s["experts"]);
    if (s["top_k"] > 8) return "top_k = " + std::to_string(s["top_k"]) + " is over 8, the most supported";
    // The grid keeps |logit| sums under 2^24 / 2048 only up to d = 8192.
    if (s["d_model"] > 8192)
        return "d_model = " + std::to_string(s["d_model"]) + " is over 8192, where the router's logits stop being exact in fp32";
    if (s["experts"] > 1024) return "experts = " + std::to_string(s["experts"]) + " is over 1024";
    return {};
}

std::map<std::string, double> route_counters(const Problem& p) {
    const auto& s = p.shape;
    const long T = s["tokens"];
    const int E = int(s["experts"]), k = int(s["top_k"]);
    const std::int32_t* ex = p.out("experts").as<std::int32_t>();
    // P_e from the fp64 rule (the variant's probabilities are not an output;
    // the indices counted are the variant's own).
    Routing r = route_exact(p.in("x").as<float>(), p.in("w_router").as<float>(), p.in("bias").as<float>(), T,
                            s["d_model"], E, k);
    std::vector<double> f(static_cast<std::size_t>(E), 0), P(std::size_t(E), 0);
    for (long i = 0; i < T * k; ++i)
        if (ex[i] >= 0 && ex[i] < E) f[std::size_t(ex[i])] += 1;
    for (long t = 0; t < T; ++t)
        for (int e = 0; e < E; ++e) P[std::size_t(e)] += r.probs[std::size_t(t * E + e)] / double(T);
    std::map<std::string, double> c;
    double aux = 0, most = 0;
    for (int e = 0; e < E; ++e) {
        c["assigned_expert_" + std::to_string(e)] = f[std::size_t(e)];
        most = std::max(most, f[std::size_t(e)]);
        aux += f[std::size_t(e)] / double(T * k) * P[std::size_t(e)];
    }
    c["aux_loss"] = double(E) * aux;  // 1 when perfectly balanced
    c["busiest_over_mean"] = most / (double(T * k) / E);
    return c;
}

namespace {

Instance prepare_naive(Problem& p) {
    const long T = p.shape["tokens"], d = p.shape["d_model"];
    const int E = int(p.shape["experts"]), k = int(p.shape["top_k"]);
    const float *x = p.in("x").as<float>(), *W = p.in("w_router").as<float>(), *bias = p.in("bias").as<float>();
    std::int32_t* ex = p.out("experts").as<std::int32_t>();
    float* w = p.out("weights").as<float>();
    Instance inst;
    inst.run = [=] {
#pragma omp parallel
        {
            std::vector<float> l(static_cast<std::size_t>(E)), prob(static_cast<std::size_t>(E));
            std::vector<char> taken(static_cast<std::size_t>(E));
#pragma omp for schedule(static)
            for (long t = 0; t < T; ++t) {
                float m = -INFINITY, sum = 0;
                for (int e = 0; e < E; ++e) {
                    float acc = bias[e];
                    for (long i = 0; i < d; ++i) acc += x[t * d + i] * W[i * E + e];
                    m = std::max(m, l[std::size_t(e)] = acc);
                }
                for (int e = 0; e < E; ++e) sum += prob[std::size_t(e)] = std::exp(l[std::size_t(e)] - m);
                for (int e = 0; e < E; ++e) prob[std::size_t(e)] /= sum;
                std::fill(taken.begin(), taken.end(), 0);
                float top = 0;
                for (int j = 0; j < k; ++j) {
                    int best = -1;  // strictly larger wins: the lowest index among equals
                    for (int e = 0; e < E; ++e)
                        if (!taken[std::size_t(e)] && (best < 0 || l[std::size_t(e)] > l[std::size_t(best)])) best = e;
                    taken[std::size_t(best)] = 1;
                    ex[t * k + j] = best;
                    top += prob[std::size_t(best)];
                }
                for (int j = 0; j < k; ++j) w[t * k + j] = prob[std::size_t(ex[t * k + j])] / top;
            }
        }
    };
    inst.counters = [&p] { return route_counters(p); };
    return inst;
}

}  // namespace

}  // namespace mw::moe

MW_REGISTER_OP(moe_route, {
    .name = "moe_route", .lever = "moe",
    .summary = "router logits -> softmax -> top-k experts and their renormalized weights (indices exact, weights by tolerance)",
    .axes = {"tokens", "d_model", "experts", "top_k", "skew"},
    .default_shape = {{{"tokens", 4096}, {"d_model", 1024}, {"experts", 8}, {"top_k", 2}, {"skew", 0}}},
    .quick_shape = {{{"tokens", 256}, {"d_model", 256}, {"experts", 8}, {"top_k", 2}, {"skew", 0}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return 2.0 * double(s["tokens"]) * s["d_model"] * s["experts"]; },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * (double(s["tokens"]) * s["d_model"] + double(s["d_model"]) * s["experts"] + s["experts"]) +
               8.0 * double(s["tokens"]) * s["top_k"];
    },
    .make_problem = mw::moe::make_route,
    .oracle = mw::moe::route_oracle,
    .check = {.per_output = {{"experts", mw::CheckMode::exact}},
              .reduction_length = [](const mw::Shape& s) { return double(s["experts"]); },
              .tolerance_scale = 2.0},  // exp's conditioning, as for softmax
    .validate = mw::moe::validate_route_shape,
    .flag_axes = {"skew"} });

MW_REGISTER_VARIANT(moe_route_naive_cpu, {
    .name = "naive", .op = "moe_route", .lever = "moe",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "per token, one strided dot product per expert, the softmax, and k selection passes",
    .prepare = mw::moe::prepare_naive });
