// The fp32 training step of the model stack (kernels/model/model_cpu.hpp).
// Shapes: N = B*T rows; x [N, d]; q [N, heads*hd]; k, v [N, kv_heads*hd];
// p [B, heads, T, T]; a, b, h [N, d_ff]. Weights are [d_in, d_out], so a
// projection is y = x W, its input gradient dx = dy W^T and its weight
// gradient dW += x^T dy — three gemm_ex calls on views, no transposed copies.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/model/model_cpu.hpp"
#include "kernels/vectorization/gemm_cpu.hpp"

namespace mw::model::cpu {

using gemm::View;

namespace {

// y[N, n] = x[N, m] W[m, n]
void proj(const float* x, const float* W, float* y, std::int64_t N, int m, int n) {
    gemm::gemm_ex(View::rows(x, m), View::rows(W, n), y, n, int(N), n, m, false);
}
// dx[N, m] (+)= dy W^T;  dW[m, n] += x^T dy
void proj_back(const float* x, const float* W, const float* dy, float* dx, bool dx_accumulate, float* dW,
               std::int64_t N, int m, int n) {
    gemm::gemm_ex(View::rows(dy, n), View::transposed(W, n), dx, m, int(N), m, n, dx_accumulate);
    gemm::gemm_ex(View::transposed(x, m), View::rows(dy, n), dW, n, m, n, int(N), true);
}

}  // namespace

TrainStep::TrainStep(const Config& c, int batch, int seq)
    : c_(c), B_(batch), T_(seq), T_cap_(seq), N_(std::int64_t(batch) * seq), rope_(c.head_dim(), c.max_seq, c.rope_base) {
    require_valid(c);
    if (batch <= 0) throw std::invalid_argument("batch = " + std::to_string(batch) + ": must be positive");
    if (seq <= 0 || seq > c.max_seq)
        throw std::invalid_argument("seq = " + std::to_string(seq) + ": must be in 1.." + std::to_string(c.max_seq));
    const std::size_t N = std::size_t(N_), d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), f = c.d_ff;
    pos_.resize(N);
    for (std::size_t r = 0; r < N; ++r) pos_[r] = int(r % std::size_t(seq));
    x_.assign(std::size_t(c.layers) + 1, std::vector<float>(N * d));
    layer_.resize(std::size_t(c.layers));
    for (auto& L : layer_) {
        L.xn1.resize(N * d), L.r1.resize(N), L.q.resize(N * qd), L.k.resize(N * kvd), L.v.resize(N * kvd);
        L.p.resize(std::size_t(B_) * c.heads * T_ * T_), L.o.resize(N * qd), L.x_mid.resize(N * d);
        L.xn2.resize(N * d), L.r2.resize(N), L.a.resize(N * f), L.b.resize(N * f), L.h.resize(N * f);
    }
    xf_.resize(N * d), rf_.resize(N), z_.resize(N * std::size_t(c.vocab)), dz_.resize(z_.size());
    dx_.resize(N * d), dxn_.resize(N * d), dO_.resize(N * qd), dq_.resize(N * qd), dk_.resize(N * kvd);
    dv_.resize(N * kvd), dh_.resize(N * f), da_.resize(N * f), db_.resize(N * f);
    head_scratch_.assign(std::size_t(omp_get_max_threads()), std::vector<float>(std::size_t(T_) * T_));
}

void TrainStep::set_seq(int seq) {
    if (seq <= 0 || seq > T_cap_)
        throw std::invalid_argument("seq = " + std::to_string(seq) + ": must be in 1.." + std::to_string(T_cap_));
    T_ = seq;
    N_ = std::int64_t(B_) * seq;
    for (std::size_t r = 0; r < std::size_t(N_); ++r) pos_[r] = int(r % std::size_t(seq));
}

// Causal attention skips the score blocks above the diagonal: rows are
// taken kRowBlock at a time, and row block [i0, i1) only meets keys [0, i1).
// 96 rows is a whole number of the AVX-512 kernel's 12-row tiles and its
// key ranges whole 32-column panels, so no tile computes padding; at
// T = 256 two thirds of the square are computed and the masked rest is
// never multiplied.
constexpr int kRowBlock = 96;

// Per (sequence, kv head): for each query head of its group, S = Q K^T,
// causal softmax rows (scaled by 1/sqrt(hd)), O = P V.
void TrainStep::attention_forward(Layer& L) {
    const int T = T_, hd = c_.head_dim(), H = c_.heads, KV = c_.kv_heads, qd = c_.q_dim(), kvd = c_.kv_dim();
    const int group = H / KV;
    const float scale = 1.0f / std::sqrt(float(hd));
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B_; ++b)
        for (int kh = 0; kh < KV; ++kh) {
            const float* K = L.k.data() + std::size_t(b) * T * kvd + kh * hd;
            const float* Vv = L.v.data() + std::size_t(b) * T * kvd + kh * hd;
            for (int h = kh * group; h < (kh + 1) * group; ++h) {
                const float* Q = L.q.data() + std::size_t(b) * T * qd + h * hd;
                float* P = L.p.data() + (std::size_t(b) * H + h) * T * T;
                float* O = L.o.data() + std::size_t(b) * T * qd + h * hd;
                for (int i0 = 0; i0 < T; i0 += kRowBlock) {
                    const int i1 = std::min(T, i0 + kRowBlock), rows = i1 - i0;
                    float* Pb = P + std::size_t(i0) * T;
                    gemm::gemm_ex_serial(View::rows(Q + std::size_t(i0) * qd, qd), View::transposed(K, kvd), Pb, T, rows,
                                         i1, hd, false);
                    for (int i = i0; i < i1; ++i) softmax_causal_row(P + std::size_t(i) * T, i + 1, T, scale);
                    gemm::gemm_ex_serial(View::rows(Pb, T), View::rows(Vv, kvd), O + std::size_t(i0) * qd, qd, rows, hd,
                                         i1, false);
                }
            }
        }
}

// dP = dO V^T; dV += P^T dO; dS = P (dP - rowsum(dP P)) / sqrt(hd);
// dQ = dS K; dK += dS^T Q. Heads of one group share dK, dV, so one task
// owns a whole group. Blocks above the diagonal are skipped as in the
// forward pass: dP and dQ by row block, dV and dK by key block [j0, j1),
// which only queries i >= j0 reach.
void TrainStep::attention_backward(const Layer& L, const float* dO, float* dq, float* dk, float* dv) {
    const int T = T_, hd = c_.head_dim(), H = c_.heads, KV = c_.kv_heads, qd = c_.q_dim(), kvd = c_.kv_dim();
    const int group = H / KV;
    const float scale = 1.0f / std::sqrt(float(hd));
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B_; ++b)
        for (int kh = 0; kh < KV; ++kh) {
            float* dS = head_scratch_[std::size_t(omp_get_thread_num())].data();
            const float* K = L.k.data() + std::size_t(b) * T * kvd + kh * hd;
            const float* Vv = L.v.data() + std::size_t(b) * T * kvd + kh * hd;
            float* dK = dk + std::size_t(b) * T * kvd + kh * hd;
            float* dV = dv + std::size_t(b) * T * kvd + kh * hd;
            for (int h = kh * group; h < (kh + 1) * group; ++h) {
                const bool first = h == kh * group;
                const float* Q = L.q.data() + std::size_t(b) * T * qd + h * hd;
                const float* dOh = dO + std::size_t(b) * T * qd + h * hd;
                const float* P = L.p.data() + (std::size_t(b) * H + h) * T * T;
                for (int i0 = 0; i0 < T; i0 += kRowBlock) {
                    const int i1 = std::min(T, i0 + kRowBlock), rows = i1 - i0;
                    gemm::gemm_ex_serial(View::rows(dOh + std::size_t(i0) * qd, qd), View::transposed(Vv, kvd),
                                         dS + std::size_t(i0) * T, T, rows, i1, hd, false);
                    for (int i = i0; i < i1; ++i) {
                        float* s = dS + std::size_t(i) * T;
                        const float* p = P + std::size_t(i) * T;
                        float dot = 0;
                        for (int j = 0; j <= i; ++j) dot += p[j] * s[j];
                        for (int j = 0; j <= i; ++j) s[j] = p[j] * (s[j] - dot) * scale;
                        std::fill(s + i + 1, s + i1, 0.0f);
                    }
                    gemm::gemm_ex_serial(View::rows(dS + std::size_t(i0) * T, T), View::rows(K, kvd),
                                         dq + std::size_t(b) * T * qd + h * hd + std::size_t(i0) * qd, qd, rows, hd, i1,
                                         false);
                }
                for (int j0 = 0; j0 < T; j0 += kRowBlock) {
                    const int j1 = std::min(T, j0 + kRowBlock);
                    const std::size_t at = std::size_t(j0) * T + std::size_t(j0);  // [j0, j0] of a T x T matrix
                    gemm::gemm_ex_serial(View::transposed(P + at, T), View::rows(dOh + std::size_t(j0) * qd, qd),
                                         dV + std::size_t(j0) * kvd, kvd, j1 - j0, hd, T - j0, !first);
                    gemm::gemm_ex_serial(View::transposed(dS + at, T), View::rows(Q + std::size_t(j0) * qd, qd),
                                         dK + std::size_t(j0) * kvd, kvd, j1 - j0, hd, T - j0, !first);
                }
            }
        }
}

double TrainStep::forward(const float* params, const int* tokens, const int* targets, float* logits) {
    const auto P = bind(c_, params);
    const int d = c_.d_model, qd = c_.q_dim(), kvd = c_.kv_dim(), f = c_.d_ff, V = c_.vocab;
    const std::int64_t N = N_;
    for (std::int64_t r = 0; r < N; ++r) {
        if (tokens[r] < 0 || tokens[r] >= V || targets[r] < 0 || targets[r] >= V)
            throw std::invalid_argument("token at row " + std::to_string(r) + " outside 0.." + std::to_string(V - 1));
        std::copy(P.embed + std::size_t(tokens[r]) * d, P.embed + std::size_t(tokens[r] + 1) * d,
                  x_[0].data() + r * d);
    }
    for (int l = 0; l < c_.layers; ++l) {
        const auto& W = P.layer[std::size_t(l)];
        Layer& L = layer_[std::size_t(l)];
        const float* x = x_[std::size_t(l)].data();
        rmsnorm_forward(x, W.attn_norm, L.xn1.data(), L.r1.data(), N, d, float(c_.norm_eps));
        proj(L.xn1.data(), W.wq, L.q.data(), N, d, qd);
        proj(L.xn1.data(), W.wk, L.k.data(), N, d, kvd);
        proj(L.xn1.data(), W.wv, L.v.data(), N, d, kvd);
        rope(L.q.data(), pos_.data(), N, c_.heads, rope_, 1);
        rope(L.k.data(), pos_.data(), N, c_.kv_heads, rope_, 1);
        attention_forward(L);
        std::copy(x, x + N * d, L.x_mid.data());
        gemm::gemm_ex(View::rows(L.o.data(), qd), View::rows(W.wo, d), L.x_mid.data(), d, int(N), d, qd, true);
        rmsnorm_forward(L.x_mid.data(), W.mlp_norm, L.xn2.data(), L.r2.data(), N, d, float(c_.norm_eps));
        proj(L.xn2.data(), W.w1, L.a.data(), N, d, f);
        proj(L.xn2.data(), W.w3, L.b.data(), N, d, f);
        swiglu_forward(L.a.data(), L.b.data(), L.h.data(), N * f);
        float* xo = x_[std::size_t(l) + 1].data();
        std::copy(L.x_mid.data(), L.x_mid.data() + N * d, xo);
        gemm::gemm_ex(View::rows(L.h.data(), f), View::rows(W.w2, d), xo, d, int(N), d, f, true);
    }
    rmsnorm_forward(x_.back().data(), P.final_norm, xf_.data(), rf_.data(), N, d, float(c_.norm_eps));
    gemm::gemm_ex(View::rows(xf_.data(), d), View::transposed(P.embed, d), z_.data(), V, int(N), V, d, false);
    if (logits) std::copy(z_.data(), z_.data() + N * V, logits);
    return cross_entropy(z_.data(), targets, N, V, dz_.data(), 1.0f / float(N)) / double(N);
}

double TrainStep::forward_backward(const float* params, float* grads, const int* tokens, const int* targets) {
    const double loss = forward(params, tokens, targets);
    const auto P = bind(c_, params);
    const auto G = bind(c_, grads);
    const int d = c_.d_model, qd = c_.q_dim(), kvd = c_.kv_dim(), f = c_.d_ff, V = c_.vocab;
    const std::int64_t N = N_;
    // Head: z = xf E^T, dz from cross_entropy; dxf = dz E; dE += dz^T xf.
    float* dxf = dxn_.data();
    gemm::gemm_ex(View::rows(dz_.data(), V), View::rows(P.embed, d), dxf, d, int(N), d, V, false);
    gemm::gemm_ex(View::transposed(dz_.data(), V), View::rows(xf_.data(), d), G.embed, d, V, d, int(N), true);
    std::fill(dx_.begin(), dx_.end(), 0.0f);
    rmsnorm_backward(x_.back().data(), P.final_norm, rf_.data(), dxf, dx_.data(), G.final_norm, N, d);
    for (int l = c_.layers - 1; l >= 0; --l) {
        const auto& W = P.layer[std::size_t(l)];
        const auto& GW = G.layer[std::size_t(l)];
        const Layer& L = layer_[std::size_t(l)];
        // MLP: x_out = x_mid + h W2 (dx_ holds d x_out and becomes d x_mid).
        proj_back(L.h.data(), W.w2, dx_.data(), dh_.data(), false, GW.w2, N, f, d);
        swiglu_backward(L.a.data(), L.b.data(), dh_.data(), da_.data(), db_.data(), N * f);
        proj_back(L.xn2.data(), W.w1, da_.data(), dxn_.data(), false, GW.w1, N, d, f);
        proj_back(L.xn2.data(), W.w3, db_.data(), dxn_.data(), true, GW.w3, N, d, f);
        rmsnorm_backward(L.x_mid.data(), W.mlp_norm, L.r2.data(), dxn_.data(), dx_.data(), GW.mlp_norm, N, d);
        // Attention: x_mid = x_in + o Wo (dx_ becomes d x_in).
        proj_back(L.o.data(), W.wo, dx_.data(), dO_.data(), false, GW.wo, N, qd, d);
        attention_backward(L, dO_.data(), dq_.data(), dk_.data(), dv_.data());
        rope(dq_.data(), pos_.data(), N, c_.heads, rope_, -1);
        rope(dk_.data(), pos_.data(), N, c_.kv_heads, rope_, -1);
        proj_back(L.xn1.data(), W.wq, dq_.data(), dxn_.data(), false, GW.wq, N, d, qd);
        proj_back(L.xn1.data(), W.wk, dk_.data(), dxn_.data(), true, GW.wk, N, d, kvd);
        proj_back(L.xn1.data(), W.wv, dv_.data(), dxn_.data(), true, GW.wv, N, d, kvd);
        rmsnorm_backward(x_[std::size_t(l)].data(), W.attn_norm, L.r1.data(), dxn_.data(), dx_.data(), GW.attn_norm, N, d);
    }
    // Embedding gather: rows of dE receive the gradient of every row that read them.
    for (std::int64_t r = 0; r < N; ++r) {
        float* ge = G.embed + std::size_t(tokens[r]) * d;
        const float* g = dx_.data() + r * d;
        for (int i = 0; i < d; ++i) ge[i] += g[i];
    }
    return loss;
}

AdamW::AdamW(const Config& c) {
    const std::size_t n = param_count(c);
    m.assign(n, 0.0f), v.assign(n, 0.0f), decay.assign(n, 0);
    for (const auto& t : layout(c))
        if (t.shape.size() == 2) std::fill(decay.begin() + std::ptrdiff_t(t.offset), decay.begin() + std::ptrdiff_t(t.offset + t.count), 1);
}

void AdamW::update(float* params, const float* grads, float lr_now) {
    ++step;
    const float bc1 = 1.0f - std::pow(beta1, float(step)), bc2 = 1.0f - std::pow(beta2, float(step));
    const std::int64_t n = std::int64_t(m.size());
    const float b1 = beta1, b2 = beta2, e = eps, wd = weight_decay;
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
        const float g = grads[i];
        m[std::size_t(i)] = b1 * m[std::size_t(i)] + (1 - b1) * g;
        v[std::size_t(i)] = b2 * v[std::size_t(i)] + (1 - b2) * g * g;
        const float mh = m[std::size_t(i)] / bc1, vh = v[std::size_t(i)] / bc2;
        params[i] -= lr_now * (mh / (std::sqrt(vh) + e) + (decay[std::size_t(i)] ? wd * params[i] : 0.0f));
    }
}

double clip_grad_norm(float* grads, std::size_t n, double max_norm) {
    // Fixed chunks summed in order: the same norm on every run and thread count.
    constexpr std::size_t kChunk = 1 << 16;
    std::vector<double> part((n + kChunk - 1) / kChunk, 0.0);
#pragma omp parallel for schedule(static)
    for (std::size_t c = 0; c < part.size(); ++c) {
        double s = 0;
        for (std::size_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) s += double(grads[i]) * grads[i];
        part[c] = s;
    }
    double ss = 0;
    for (double s : part) ss += s;
    const double norm = std::sqrt(ss);
    if (norm > max_norm) {
        const float s = float(max_norm / norm);
#pragma omp parallel for simd schedule(static)
        for (std::size_t i = 0; i < n; ++i) grads[i] *= s;
    }
    return norm;
}

}  // namespace mw::model::cpu
