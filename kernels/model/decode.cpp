// The fp32 decoder of the model stack (kernels/model/model_cpu.hpp).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "harness/disturbance.hpp"
#include "kernels/model/model_cpu.hpp"
#include "kernels/precision/gemv.hpp"

namespace mw::model::cpu {

namespace {

// Rows [d_out][d_in] of the stacked matrices W_a | W_b | ... (each [d_in, d_out_i]).
std::vector<float> stack_rows(int d_in, std::initializer_list<std::pair<const float*, int>> parts, int* n_out) {
    *n_out = 0;
    for (const auto& p : parts) *n_out += p.second;
    std::vector<float> rows(std::size_t(*n_out) * d_in);
    int r = 0;
    for (const auto& [W, cols] : parts)
        for (int j = 0; j < cols; ++j, ++r)
            for (int i = 0; i < d_in; ++i) rows[std::size_t(r) * d_in + i] = W[std::size_t(i) * cols + j];
    return rows;
}

kv_cache::KvGeometry geometry_of(const Config& c) { return {c.layers, c.kv_heads, c.head_dim()}; }

}  // namespace

void Decoder::Mat::apply(const float* x, std::int64_t n, float* y) const {
    if (packed) precision::gemv(panels, x, n, y);
    else precision::gemv(rows, x, n, y);
}

double Decoder::Mat::bytes() const { return packed ? panels.bytes() : rows.bytes(); }

namespace {

Decoder::Mat make_mat(const precision::QuantSpec& spec, const float* rows, int n_out, int d_in) {
    Decoder::Mat m;
    m.rows = precision::quantize(spec, rows, n_out, d_in);
    if (spec.format != precision::Format::f16) {
        m.panels = precision::repack(m.rows);
        m.packed = true;
        m.rows = {};
    }
    return m;
}

Decoder::Mat prepare(const precision::QuantSpec& spec, int d_in, std::initializer_list<std::pair<const float*, int>> parts) {
    int n_out = 0;
    const auto rows = stack_rows(d_in, parts, &n_out);
    return make_mat(spec, rows.data(), n_out, d_in);
}

}  // namespace

Decoder::Decoder(const Config& c, const float* params, precision::QuantSpec spec)
    : c_(c), rope_(c.head_dim(), c.max_seq, c.rope_base) {
    require_valid(c);
    own_ = std::make_unique<kv_cache::ContiguousStore>(geometry_of(c), 1, c.max_seq);
    store_ = own_.get();
    store_->open(0, c.max_seq);
    store_->grow(0, c.max_seq);
    build(params, spec);
}

Decoder::Decoder(const Config& c, const float* params, precision::QuantSpec spec, kv_cache::KvStore& store, int max_pos)
    : c_(c), store_(&store), rope_(c.head_dim(), max_pos, c.rope_base) {
    require_valid(c);
    const auto g = store.geometry(), want = geometry_of(c);
    if (g.layers != want.layers || g.kv_heads != want.kv_heads || g.head_dim != want.head_dim)
        throw std::invalid_argument("KV store geometry (" + std::to_string(g.layers) + " layers, " +
                                    std::to_string(g.kv_heads) + " kv heads of " + std::to_string(g.head_dim) +
                                    ") does not match the model's (" + std::to_string(want.layers) + ", " +
                                    std::to_string(want.kv_heads) + ", " + std::to_string(want.head_dim) + ")");
    build(params, spec);
}

Decoder::~Decoder() = default;

void Decoder::build(const float* params, precision::QuantSpec spec) {
    free_cores_ = std::make_unique<FreeCores>();
    const auto P = bind(c_, params);
    const int d = c_.d_model;
    for (const auto& W : P.layer) {
        LayerQ L;
        L.qkv = prepare(spec, d, {{W.wq, c_.q_dim()}, {W.wk, c_.kv_dim()}, {W.wv, c_.kv_dim()}});
        L.wo = prepare(spec, c_.q_dim(), {{W.wo, d}});
        L.w13 = prepare(spec, d, {{W.w1, c_.d_ff}, {W.w3, c_.d_ff}});
        L.w2 = prepare(spec, c_.d_ff, {{W.w2, d}});
        L.attn_norm = W.attn_norm, L.mlp_norm = W.mlp_norm;
        layer_.push_back(std::move(L));
    }
    head_ = make_mat(spec, P.embed, c_.vocab, d);
    embed_ = P.embed, final_norm_ = P.final_norm;
    resize(1);
}

void Decoder::resize(int n) {
    if (n <= rows_) return;
    rows_ = n;
    const std::size_t N = std::size_t(n);
    x_.resize(N * c_.d_model), xn_.resize(N * c_.d_model), tmp_.resize(N * c_.d_model);
    qkv_.resize(N * (c_.q_dim() + 2 * c_.kv_dim())), o_.resize(N * c_.q_dim());
    h13_.resize(N * 2 * c_.d_ff), h_.resize(N * c_.d_ff), logits_.resize(N * c_.vocab), rstd_.resize(N);
}

double Decoder::weight_bytes() const {
    double b = head_.bytes();
    for (const auto& L : layer_) b += L.qkv.bytes() + L.wo.bytes() + L.w13.bytes() + L.w2.bytes();
    return b;
}

void Decoder::reset() {
    if (!own_) throw std::logic_error("Decoder::reset: this decoder's sequences live in an external store");
    len_ = 0;
}

const float* Decoder::step(int token) {
    if (!own_) throw std::logic_error("Decoder::step(token): this decoder's sequences live in an external store");
    if (len_ >= c_.max_seq)
        throw std::invalid_argument("decode position " + std::to_string(len_) + " past max_seq " + std::to_string(c_.max_seq));
    const int seq = 0, pos = len_;
    const float* z = step(1, &seq, &pos, &token);
    ++len_;
    return z;
}

const float* Decoder::step(int n, const int* seq, const int* pos, const int* token) {
    if (n < 1) throw std::invalid_argument("decode step of " + std::to_string(n) + " rows");
    for (int i = 0; i < n; ++i) {
        if (token[i] < 0 || token[i] >= c_.vocab)
            throw std::invalid_argument("token " + std::to_string(token[i]) + " outside 0.." + std::to_string(c_.vocab - 1));
        if (pos[i] < 0 || pos[i] >= rope_.max_seq)
            throw std::invalid_argument("decode position " + std::to_string(pos[i]) + " outside 0.." +
                                        std::to_string(rope_.max_seq - 1));
        if (pos[i] >= store_->capacity(seq[i]))
            throw std::out_of_range("sequence " + std::to_string(seq[i]) + " has room for " +
                                    std::to_string(store_->capacity(seq[i])) + " positions, not position " +
                                    std::to_string(pos[i]));
    }
    resize(n);
    const FreeThreadsScope threads(*free_cores_);  // the cores others leave free
    const int d = c_.d_model, hd = c_.head_dim(), H = c_.heads, qd = c_.q_dim(), kvd = c_.kv_dim(), f = c_.d_ff;
    const int G = H / c_.kv_heads, ld = qd + 2 * kvd, KVH = c_.kv_heads;
    const float scale = 1.0f / std::sqrt(float(hd));
    const float eps = float(c_.norm_eps);
    // Attention runs on the threads only when there is enough of it: a
    // parallel region costs microseconds, a short cache's read less.
    constexpr std::int64_t kParallelPositions = 2048;
    std::int64_t cached = 0;
    for (int i = 0; i < n; ++i) cached += pos[i] + 1;
    for (int i = 0; i < n; ++i)
        std::copy(embed_ + std::size_t(token[i]) * d, embed_ + std::size_t(token[i] + 1) * d, x_.begin() + std::ptrdiff_t(i) * d);
    for (int l = 0; l < c_.layers; ++l) {
        const auto& L = layer_[std::size_t(l)];
        rmsnorm_forward(x_.data(), L.attn_norm, xn_.data(), rstd_.data(), n, d, eps);
        L.qkv.apply(xn_.data(), n, qkv_.data());
        for (int i = 0; i < n; ++i) {
            float* q = qkv_.data() + std::ptrdiff_t(i) * ld;
            float* k = q + qd;
            rope(q, pos + i, 1, H, rope_, 1);
            rope(k, pos + i, 1, KVH, rope_, 1);
            for (int e = 0; e < qd; ++e) q[e] *= scale;
            store_->write(seq[i], l, pos[i], k, k + kvd);
        }
#pragma omp parallel for schedule(dynamic, 1) if (n * KVH > 1 && cached >= kParallelPositions)
        for (int t = 0; t < n * KVH; ++t) {
            const int i = t / KVH, kh = t % KVH;
            store_->attend(seq[i], l, kh, pos[i] + 1, qkv_.data() + std::ptrdiff_t(i) * ld + kh * G * hd, G,
                           o_.data() + std::ptrdiff_t(i) * qd + kh * G * hd);
        }
        L.wo.apply(o_.data(), n, tmp_.data());
        for (std::size_t e = 0; e < std::size_t(n) * d; ++e) x_[e] += tmp_[e];
        rmsnorm_forward(x_.data(), L.mlp_norm, xn_.data(), rstd_.data(), n, d, eps);
        L.w13.apply(xn_.data(), n, h13_.data());
        for (int i = 0; i < n; ++i) {
            const float* a = h13_.data() + std::ptrdiff_t(i) * 2 * f;
            swiglu_forward(a, a + f, h_.data() + std::ptrdiff_t(i) * f, f);
        }
        L.w2.apply(h_.data(), n, tmp_.data());
        for (std::size_t e = 0; e < std::size_t(n) * d; ++e) x_[e] += tmp_[e];
    }
    rmsnorm_forward(x_.data(), final_norm_, xn_.data(), rstd_.data(), n, d, eps);
    head_.apply(xn_.data(), n, logits_.data());
    return logits_.data();
}

}  // namespace mw::model::cpu
