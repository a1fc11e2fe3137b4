// attention, fusion lever, rung 0 (CPU): scores and probabilities materialized.
//
// O = softmax(Q K^T / sqrt(d) [+ causal mask]) V for every (batch, head);
// Q, O: [b, h, s, d]; K, V: [b, hk, s, d], head i reading kv head
// i / (h / hk) (grouped-query attention when hk < h). fp32.
// This rung is eager-framework attention, three ops per head:
//   S = Q K^T / sqrt(d)    OpenBLAS sgemm into an s x s buffer  (write s^2)
//   P = softmax(S)         scalar exp, into a second s x s buffer (read + write s^2)
//   O = P V                OpenBLAS sgemm                       (read s^2)
// The two s x s buffers (2 x 64 MiB at s = 4096) are allocated in prepare
// and reused head after head: they are the peak memory this lever removes.
// Bytes per head: Q, K, V, O once each plus 4 s^2 floats of scores and
// probabilities; FLOPs 4 s^2 d per head (half with the causal mask, which
// this rung still computes in full and then masks).
//
// This file also defines the op: shapes, FLOPs, seeded inputs, fp64 oracle.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "harness/inputs.hpp"
#include "reference/fusion/attention.hpp"

namespace mw::fusion {

AttnShape attn_shape(const Shape& s) {
    AttnShape a{s["b"], s["h"], s["hk"], s["s"], s["d"], s["causal"] != 0, 0};
    a.scale = float(1.0 / std::sqrt(double(a.D)));
    return a;
}

double attention_flops(const Shape& s) {
    const AttnShape a = attn_shape(s);
    const double pairs = a.causal ? double(a.S) * (a.S + 1) / 2 : double(a.S) * a.S;
    return 4.0 * a.B * a.H * pairs * a.D;
}

double attention_compulsory_bytes(const Shape& s, DType) {
    const AttnShape a = attn_shape(s);
    return 4.0 * double(a.S) * a.D * a.B * (2.0 * a.H + 2.0 * a.Hk);
}

namespace {

Problem make_problem(const Shape& s, DType dtype, std::uint64_t seed) {
    const AttnShape a = attn_shape(s);
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("Q", DType::f32, a.B * a.H * a.S * a.D, {a.B, a.H, a.S, a.D}));
    p.inputs.push_back(Buffer::make("K", DType::f32, a.B * a.Hk * a.S * a.D, {a.B, a.Hk, a.S, a.D}));
    p.inputs.push_back(Buffer::make("V", DType::f32, a.B * a.Hk * a.S * a.D, {a.B, a.Hk, a.S, a.D}));
    p.outputs.push_back(Buffer::make("O", DType::f32, a.B * a.H * a.S * a.D, {a.B, a.H, a.S, a.D}));
    // Spread wide enough that the softmax is far from uniform.
    fill_uniform(p.in("Q"), seed, -2.0, 2.0);
    fill_uniform(p.in("K"), seed, -2.0, 2.0);
    fill_uniform(p.in("V"), seed, -1.0, 1.0);
    return p;
}

// The fp64 attention of Q, K and V, each input value passed through `in`
// first (the identity for the op's oracle).
template <class In> std::vector<std::vector<double>> oracle_of(const Problem& p, In in) {
    const AttnShape a = attn_shape(p.shape);
    const float* Q = p.in("Q").as<float>();
    const float* K = p.in("K").as<float>();
    const float* V = p.in("V").as<float>();
    std::vector<double> O(a.B * a.H * a.S * a.D);
    const double scale = 1.0 / std::sqrt(double(a.D));
#pragma omp parallel
    {
        std::vector<double> w(a.S);
#pragma omp for collapse(2) schedule(dynamic)
        for (long bh = 0; bh < a.B * a.H; ++bh)
            for (long i = 0; i < a.S; ++i) {
                const long b = bh / a.H, h = bh % a.H, kh = h / (a.H / a.Hk);
                const float* q = Q + (bh * a.S + i) * a.D;
                const float* k = K + (b * a.Hk + kh) * a.S * a.D;
                const float* v = V + (b * a.Hk + kh) * a.S * a.D;
                const long n = a.causal ? i + 1 : a.S;
                double m = -INFINITY, sum = 0;
                for (long j = 0; j < n; ++j) {
                    double dot = 0;
                    for (long c = 0; c < a.D; ++c) dot += in(q[c]) * in(k[j * a.D + c]);
                    w[j] = dot * scale;
                    m = std::max(m, w[j]);
                }
                for (long j = 0; j < n; ++j) sum += w[j] = std::exp(w[j] - m);
                double* o = O.data() + (bh * a.S + i) * a.D;
                for (long c = 0; c < a.D; ++c) o[c] = 0;
                for (long j = 0; j < n; ++j)
                    for (long c = 0; c < a.D; ++c) o[c] += w[j] / sum * in(v[j * a.D + c]);
            }
    }
    return {std::move(O)};
}

std::vector<std::vector<double>> oracle(const Problem& p) {
    return oracle_of(p, [](float x) { return double(x); });
}


Instance prepare_naive(Problem& p) {
    const AttnShape a = attn_shape(p.shape);
    const float* Q = p.in("Q").as<float>();
    const float* K = p.in("K").as<float>();
    const float* V = p.in("V").as<float>();
    float* O = p.out("O").as<float>();
    auto scores = std::make_shared<std::vector<float>>(a.S * a.S);
    auto probs = std::make_shared<std::vector<float>>(a.S * a.S);
    Instance inst;
    inst.run = [=] {
        const int S = int(a.S), D = int(a.D);
        float* Sm = scores->data();
        float* P = probs->data();
        for (long bh = 0; bh < a.B * a.H; ++bh) {
            const long b = bh / a.H, h = bh % a.H, kh = h / (a.H / a.Hk);
            const float* k = K + (b * a.Hk + kh) * a.S * a.D;
            const float* v = V + (b * a.Hk + kh) * a.S * a.D;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, D, a.scale, Q + bh * a.S * a.D, D, k, D,
                        0.0f, Sm, S);
#pragma omp parallel for schedule(static)
            for (long i = 0; i < a.S; ++i) {
                const float* s = Sm + i * a.S;
                float* pr = P + i * a.S;
                const long n = a.causal ? i + 1 : a.S;  // the mask: later keys get probability 0
                float m = -INFINITY, sum = 0;
                for (long j = 0; j < n; ++j) m = std::max(m, s[j]);
                for (long j = 0; j < n; ++j) sum += pr[j] = std::exp(s[j] - m);
                for (long j = 0; j < n; ++j) pr[j] /= sum;
                for (long j = n; j < a.S; ++j) pr[j] = 0;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, D, S, 1.0f, P, S, v, D, 0.0f,
                        O + bh * a.S * a.D, D);
        }
    };
    return inst;
}

std::string validate(const Shape& s) {
    if (s["h"] % s["hk"] != 0)
        return "h=" + std::to_string(s["h"]) + " must be a multiple of hk=" + std::to_string(s["hk"]);
    if (s["causal"] > 1) return "causal=" + std::to_string(s["causal"]) + " must be 0 or 1";
    return {};
}

}  // namespace

std::vector<std::vector<double>> oracle_bf16_inputs(const Problem& p) {
    return oracle_of(p, [](float x) { return double(bf16_to_f32(f32_to_bf16(x))); });
}

double attention_bytes_materialized(const Shape& s, DType dt) {
    const AttnShape a = attn_shape(s);
    return attention_compulsory_bytes(s, dt) + 4.0 * 4.0 * a.B * a.H * double(a.S) * a.S;
}

}  // namespace mw::fusion

MW_REGISTER_OP(attention, {
    .name = "attention",
    .lever = "fusion",
    .summary = "O = softmax(Q K^T / sqrt(d), optional causal mask) V per head; GQA when hk < h; fp32",
    .axes = {"b", "h", "hk", "s", "d", "causal"},
    .default_shape = {{{"b", 1}, {"h", 8}, {"hk", 8}, {"s", 4096}, {"d", 128}, {"causal", 0}}},
    .quick_shape = {{{"b", 1}, {"h", 4}, {"hk", 2}, {"s", 1024}, {"d", 64}, {"causal", 1}}},
    .dtypes = {mw::DType::f32},
    .flops = mw::fusion::attention_flops,
    .compulsory_bytes = mw::fusion::attention_compulsory_bytes,
    .make_problem = mw::fusion::make_problem,
    .oracle = mw::fusion::oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(std::max(s["s"], s["d"])); },
              .baseline_factor = 2.0},
    .validate = mw::fusion::validate,
    .flag_axes = {"causal"},
});

MW_REGISTER_VARIANT(attention_naive_cpu, {
    .name = "naive", .op = "attention", .lever = "fusion",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "eager attention: the s x s scores and probabilities written to memory between "
                 "two OpenBLAS GEMMs and a scalar softmax",
    .bytes = mw::fusion::attention_bytes_materialized,
    .prepare = mw::fusion::prepare_naive });
