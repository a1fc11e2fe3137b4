// The fp32 decoder of the model stack (kernels/model/model_cpu.hpp).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/model/model_cpu.hpp"
#include "kernels/precision/gemv.hpp"

namespace mw::model::cpu {

namespace {

// Rows [d_out][d_in] of the stacked matrices W_a | W_b | ... (each [d_in, d_out_i]).
precision::QMatrix prepare(const precision::QuantSpec& spec, int d_in, std::initializer_list<std::pair<const float*, int>> parts) {
    int n_out = 0;
    for (const auto& p : parts) n_out += p.second;
    std::vector<float> rows(std::size_t(n_out) * d_in);
    int r = 0;
    for (const auto& [W, cols] : parts)
        for (int j = 0; j < cols; ++j, ++r)
            for (int i = 0; i < d_in; ++i) rows[std::size_t(r) * d_in + i] = W[std::size_t(i) * cols + j];
    return precision::quantize(spec, rows.data(), n_out, d_in);
}

}  // namespace

Decoder::Decoder(const Config& c, const float* params, precision::QuantSpec spec)
    : c_(c), rope_(c.head_dim(), c.max_seq, c.rope_base) {
    require_valid(c);
    const auto P = bind(c, params);
    const int d = c.d_model;
    for (const auto& W : P.layer) {
        LayerQ L;
        L.qkv = prepare(spec, d, {{W.wq, c.q_dim()}, {W.wk, c.kv_dim()}, {W.wv, c.kv_dim()}});
        L.wo = prepare(spec, c.q_dim(), {{W.wo, d}});
        L.w13 = prepare(spec, d, {{W.w1, c.d_ff}, {W.w3, c.d_ff}});
        L.w2 = prepare(spec, c.d_ff, {{W.w2, d}});
        L.attn_norm = W.attn_norm, L.mlp_norm = W.mlp_norm;
        L.k.resize(std::size_t(c.max_seq) * c.kv_dim());
        L.v.resize(L.k.size());
        layer_.push_back(std::move(L));
    }
    head_ = precision::quantize(spec, P.embed, c.vocab, d);
    embed_ = P.embed, final_norm_ = P.final_norm;
    x_.resize(std::size_t(d)), xn_.resize(std::size_t(d)), tmp_.resize(std::size_t(d));
    qkv_.resize(std::size_t(c.q_dim() + 2 * c.kv_dim())), o_.resize(std::size_t(c.q_dim()));
    h13_.resize(std::size_t(2 * c.d_ff)), h_.resize(std::size_t(c.d_ff)), logits_.resize(std::size_t(c.vocab));
    scores_.resize(std::size_t(c.max_seq));
}

double Decoder::weight_bytes() const {
    double b = head_.bytes();
    for (const auto& L : layer_) b += L.qkv.bytes() + L.wo.bytes() + L.w13.bytes() + L.w2.bytes();
    return b;
}

const float* Decoder::step(int token) {
    if (len_ >= c_.max_seq)
        throw std::invalid_argument("decode position " + std::to_string(len_) + " past max_seq " + std::to_string(c_.max_seq));
    if (token < 0 || token >= c_.vocab)
        throw std::invalid_argument("token " + std::to_string(token) + " outside 0.." + std::to_string(c_.vocab - 1));
    const int d = c_.d_model, hd = c_.head_dim(), H = c_.heads, qd = c_.q_dim(), kvd = c_.kv_dim(), f = c_.d_ff;
    const int group = H / c_.kv_heads, pos = len_;
    const float scale = 1.0f / std::sqrt(float(hd));
    float rstd = 0;
    std::copy(embed_ + std::size_t(token) * d, embed_ + std::size_t(token + 1) * d, x_.begin());
    for (auto& L : layer_) {
        rmsnorm_forward(x_.data(), L.attn_norm, xn_.data(), &rstd, 1, d, float(c_.norm_eps));
        precision::gemv(L.qkv, xn_.data(), 1, qkv_.data());
        float* q = qkv_.data();
        float* k = q + qd;
        const float* v = k + kvd;
        rope(q, &pos, 1, H, rope_, 1);
        rope(k, &pos, 1, c_.kv_heads, rope_, 1);
        std::copy(k, k + kvd, L.k.begin() + std::ptrdiff_t(pos) * kvd);
        std::copy(v, v + kvd, L.v.begin() + std::ptrdiff_t(pos) * kvd);
        for (int h = 0; h < H; ++h) {
            const int kh = h / group;
            const float* qh = q + h * hd;
            for (int j = 0; j <= pos; ++j) {
                const float* kj = L.k.data() + std::size_t(j) * kvd + kh * hd;
                float s = 0;
                for (int e = 0; e < hd; ++e) s += qh[e] * kj[e];
                scores_[std::size_t(j)] = s;
            }
            softmax_causal_row(scores_.data(), pos + 1, pos + 1, scale);
            float* oh = o_.data() + h * hd;
            std::fill(oh, oh + hd, 0.0f);
            for (int j = 0; j <= pos; ++j) {
                const float p = scores_[std::size_t(j)];
                const float* vj = L.v.data() + std::size_t(j) * kvd + kh * hd;
                for (int e = 0; e < hd; ++e) oh[e] += p * vj[e];
            }
        }
        precision::gemv(L.wo, o_.data(), 1, tmp_.data());
        for (int i = 0; i < d; ++i) x_[std::size_t(i)] += tmp_[std::size_t(i)];
        rmsnorm_forward(x_.data(), L.mlp_norm, xn_.data(), &rstd, 1, d, float(c_.norm_eps));
        precision::gemv(L.w13, xn_.data(), 1, h13_.data());
        swiglu_forward(h13_.data(), h13_.data() + f, h_.data(), f);
        precision::gemv(L.w2, h_.data(), 1, tmp_.data());
        for (int i = 0; i < d; ++i) x_[std::size_t(i)] += tmp_[std::size_t(i)];
    }
    rmsnorm_forward(x_.data(), final_norm_, xn_.data(), &rstd, 1, d, float(c_.norm_eps));
    precision::gemv(head_, xn_.data(), 1, logits_.data());
    ++len_;
    return logits_.data();
}

}  // namespace mw::model::cpu
