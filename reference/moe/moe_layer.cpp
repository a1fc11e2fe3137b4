// moe_layer, rung 0 (the reference): the whole layer, routing included —
// level 08's exercise (levels/08-moe/exercise/moe_layer_cpu.cpp).
//
// The op: route each token with moe_route's rule (logits x W_r + bias,
// softmax, top k, larger logit first and the lower expert index among equal
// logits, the k probabilities renormalized), then y = x + sum_j w_j
// FFN_{e_j}(x) as moe_ffn. Experts 0 and 1 have the same router column, so
// their logits tie on every token: whichever of them a token takes when they
// straddle the k-th place is the tie rule's to decide, and it changes y.
// Useful FLOPs: moe_ffn's plus the router's 2 T d E.
//
// This rung: the router's dot products one token at a time, then every
// expert on every token, masked (moe_ffn's dense_masked): E/k times the
// useful expert FLOPs.
#include <cmath>
#include <cstring>

#include "harness/inputs.hpp"
#include "kernels/moe/dispatch.hpp"
#include "kernels/moe/route.hpp"
#include "reference/moe/moe.hpp"

namespace mw::moe {
namespace {

Problem make_layer(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto T = s["tokens"], d = s["d_model"], f = s["d_ff"], E = s["experts"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    add_router_inputs(p);
    p.inputs.push_back(Buffer::make("w_gate", DType::f32, std::size_t(E * d * f), {E, d, f}));
    p.inputs.push_back(Buffer::make("w_up", DType::f32, std::size_t(E * d * f), {E, d, f}));
    p.inputs.push_back(Buffer::make("w_down", DType::f32, std::size_t(E * f * d), {E, f, d}));
    p.outputs.push_back(Buffer::make("y", DType::f32, std::size_t(T * d), {T, d}));
    if (E > 1) {  // twin router columns: experts 0 and 1 tie on every token
        float* W = p.in("w_router").as<float>();
        for (long i = 0; i < d; ++i) W[i * E + 1] = W[i * E];
        p.in("bias").as<float>()[1] = p.in("bias").as<float>()[0];
    }
    fill_normal(p.in("w_gate"), mix_seed(seed, "w_gate"), 1.0 / std::sqrt(double(d)));
    fill_normal(p.in("w_up"), mix_seed(seed, "w_up"), 1.0 / std::sqrt(double(d)));
    fill_normal(p.in("w_down"), mix_seed(seed, "w_down"), 1.0 / std::sqrt(double(f)));
    return p;
}

std::vector<std::vector<double>> layer_oracle(const Problem& p) {
    const auto& s = p.shape;
    Routing r = route_exact(p.in("x").as<float>(), p.in("w_router").as<float>(), p.in("bias").as<float>(),
                            s["tokens"], s["d_model"], int(s["experts"]), int(s["top_k"]));
    return {ffn_exact(s, {p.in("x").as<float>(), r.experts.data(), r.weights.data(), p.in("w_gate").as<float>(),
                          p.in("w_up").as<float>(), p.in("w_down").as<float>()},
                      {})};
}

Instance prepare_layer_dense(Problem& p) {
    const long T = p.shape["tokens"], d = p.shape["d_model"], f = p.shape["d_ff"];
    const int E = int(p.shape["experts"]), k = int(p.shape["top_k"]);
    const float *x = p.in("x").as<float>(), *W = p.in("w_router").as<float>(), *bias = p.in("bias").as<float>();
    const Experts w{p.in("w_gate").as<float>(), p.in("w_up").as<float>(), p.in("w_down").as<float>(), d, f};
    float* y = p.out("y").as<float>();
    auto scratch = std::make_shared<std::vector<float>>(std::size_t(3 * T * f + T * d + T * E + 2 * T * k));
    Instance inst;
    inst.run = [=] {
        float* ye = scratch->data() + 3 * T * f;
        float* l = ye + T * d;
        float* wt = l + T * E;
        auto* ex = reinterpret_cast<std::int32_t*>(wt + T * k);
#pragma omp parallel for schedule(static)
        for (long t = 0; t < T; ++t) {
            for (int e = 0; e < E; ++e) {
                float acc = bias[e];
                for (long i = 0; i < d; ++i) acc += x[t * d + i] * W[i * E + e];
                l[t * E + e] = acc;
            }
            route_token(l + t * E, E, k, ex + t * k, wt + t * k);
        }
        std::memcpy(y, x, sizeof(float) * std::size_t(T * d));
        for (int e = 0; e < E; ++e) {
            expert_ffn(w, e, x, T, ye, scratch->data());
#pragma omp parallel for schedule(static)
            for (long t = 0; t < T; ++t) {
                float g = 0;
                for (int j = 0; j < k; ++j)
                    if (ex[t * k + j] == e) g = wt[t * k + j];
                for (long c = 0; c < d; ++c) y[t * d + c] = std::fma(g, ye[t * d + c], y[t * d + c]);
            }
        }
    };
    return inst;
}

}  // namespace
}  // namespace mw::moe

MW_REGISTER_OP(moe_layer, {
    .name = "moe_layer", .lever = "moe",
    .summary = "a whole MoE layer: top-k routing (twin experts 0 and 1 tie on every token), dispatch, SwiGLU "
               "experts, weighted combine (level 08's exercise)",
    .axes = {"tokens", "d_model", "d_ff", "experts", "top_k", "skew"},
    .default_shape = {{{"tokens", 2048}, {"d_model", 256}, {"d_ff", 704}, {"experts", 8}, {"top_k", 2}, {"skew", 0}}},
    .quick_shape = {{{"tokens", 256}, {"d_model", 64}, {"d_ff", 176}, {"experts", 8}, {"top_k", 2}, {"skew", 0}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) {
        return mw::moe::ffn_useful_flops(s) + 2.0 * double(s["tokens"]) * s["d_model"] * s["experts"];
    },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        return mw::moe::ffn_weight_bytes(s) + 8.0 * double(s["tokens"]) * s["d_model"] +
               4.0 * double(s["d_model"]) * s["experts"];
    },
    .unit = {"tokens", [](const mw::Shape& s) { return double(s["tokens"]); }},
    .make_problem = mw::moe::make_layer,
    .oracle = mw::moe::layer_oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["d_ff"]); }},
    .validate = mw::moe::validate_route_shape,
    .flag_axes = {"skew"} });

MW_REGISTER_VARIANT(moe_layer_dense_cpu, {
    .name = "dense_masked", .op = "moe_layer", .lever = "moe",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "router dot products per token, then every expert on every token, masked: E/k times the "
                 "useful expert FLOPs",
    .executed_flops = [](const mw::Shape& s) {
        return mw::moe::ffn_useful_flops(s) * double(s["experts"]) / double(s["top_k"]) +
               2.0 * double(s["tokens"]) * s["d_model"] * s["experts"];
    },
    .prepare = mw::moe::prepare_layer_dense });
