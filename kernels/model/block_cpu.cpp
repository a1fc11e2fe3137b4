// One transformer block in fp32 (kernels/model/block_cpu.hpp). Shapes: N =
// B*T rows; x [N, d]; q [N, heads*hd]; k, v [N, kv_heads*hd]; p [B, heads,
// T, T]; a, b, h [N, d_ff]. Weights are [d_in, d_out], so a projection is
// y = x W, its input gradient dx = dy W^T and its weight gradient
// dW += x^T dy — three gemm_ex calls on views, no transposed copies.
#include "kernels/model/block_cpu.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/vectorization/gemm_cpu.hpp"

namespace mw::model::cpu {

using gemm::View;

namespace {

// Where one sequence's head lives in the [B*T, heads*hd] (q, o) and
// [B*T, kv_heads*hd] (k, v) activations, and the attention scale.
struct HeadLayout {
    int T, hd, H, KV, qd, kvd, group;
    float scale;
    HeadLayout(const Config& c, int T)
        : T(T), hd(c.head_dim()), H(c.heads), KV(c.kv_heads), qd(c.q_dim()), kvd(c.kv_dim()), group(H / KV),
          scale(1.0f / std::sqrt(float(hd))) {}
    std::size_t q(int b, int h) const { return std::size_t(b) * T * qd + std::size_t(h) * hd; }
    std::size_t kv(int b, int kh) const { return std::size_t(b) * T * kvd + std::size_t(kh) * hd; }
};

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

// Causal attention skips the score blocks above the diagonal: rows are
// taken kRowBlock at a time, and row block [i0, i1) only meets keys [0, i1).
// 96 rows is a whole number of the AVX-512 kernel's 12-row tiles and its
// key ranges whole 32-column panels, so no tile computes padding; at
// T = 256 two thirds of the square are computed and the masked rest is
// never multiplied.
constexpr int kRowBlock = 96;

}  // namespace

BlockSizes::BlockSizes(const Config& c, int batch, int seq) {
    const std::size_t N = std::size_t(batch) * std::size_t(seq), d = std::size_t(c.d_model);
    xn1 = x_mid = xn2 = N * d;
    r1 = r2 = N;
    q = o = N * std::size_t(c.q_dim());
    k = v = N * std::size_t(c.kv_dim());
    p = std::size_t(batch) * std::size_t(c.heads) * std::size_t(seq) * std::size_t(seq);
    a = b = h = N * std::size_t(c.d_ff);
}

BlockStore::BlockStore(const BlockSizes& s, bool gemm_outputs, bool cheap) {
    data.resize((gemm_outputs ? s.gemm_outputs() : 0) + (cheap ? s.cheap() : 0));
    float* at = data.data();
    auto take = [&](float*& p, std::size_t n, bool want) {
        if (want) p = at, at += n;
    };
    take(acts.xn1, s.xn1, cheap), take(acts.r1, s.r1, cheap), take(acts.q, s.q, gemm_outputs);
    take(acts.k, s.k, gemm_outputs), take(acts.v, s.v, gemm_outputs), take(acts.p, s.p, cheap);
    take(acts.o, s.o, gemm_outputs), take(acts.x_mid, s.x_mid, gemm_outputs), take(acts.xn2, s.xn2, cheap);
    take(acts.r2, s.r2, cheap), take(acts.a, s.a, gemm_outputs), take(acts.b, s.b, gemm_outputs);
    take(acts.h, s.h, cheap);
}

BlockActs combine(const BlockActs& kept, const BlockActs& cheap) {
    BlockActs A = kept;
    A.xn1 = cheap.xn1, A.r1 = cheap.r1, A.p = cheap.p, A.xn2 = cheap.xn2, A.r2 = cheap.r2, A.h = cheap.h;
    return A;
}

Block::Block(const Config& c, int batch, int seq)
    : c_(c), B_(batch), T_(seq), T_cap_(seq), N_(std::int64_t(batch) * seq), rope_(c.head_dim(), c.max_seq, c.rope_base) {
    require_valid(c);
    if (batch <= 0) throw std::invalid_argument("batch = " + std::to_string(batch) + ": must be positive");
    if (seq <= 0 || seq > c.max_seq)
        throw std::invalid_argument("seq = " + std::to_string(seq) + ": must be in 1.." + std::to_string(c.max_seq));
    const std::size_t N = std::size_t(N_), d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), f = c.d_ff;
    pos_.resize(N);
    set_seq(seq);
    dxn_.resize(N * d), dO_.resize(N * qd), dq_.resize(N * qd), dk_.resize(N * kvd), dv_.resize(N * kvd);
    dh_.resize(N * f), da_.resize(N * f), db_.resize(N * f);
    head_scratch_.assign(std::size_t(omp_get_max_threads()), std::vector<float>(std::size_t(T_) * T_));
}

void Block::set_seq(int seq) {
    if (seq <= 0 || seq > T_cap_)
        throw std::invalid_argument("seq = " + std::to_string(seq) + ": must be in 1.." + std::to_string(T_cap_));
    T_ = seq;
    N_ = std::int64_t(B_) * seq;
    for (std::size_t r = 0; r < std::size_t(N_); ++r) pos_[r] = int(r % std::size_t(seq));
}

std::size_t Block::scratch_bytes() const {
    std::size_t n = dxn_.size() + dO_.size() + dq_.size() + dk_.size() + dv_.size() + dh_.size() + da_.size() + db_.size();
    for (const auto& s : head_scratch_) n += s.size();
    return n * sizeof(float);
}

// Per (sequence, kv head): for each query head of its group, S = Q K^T,
// causal softmax rows (scaled by 1/sqrt(hd)), then O = P V unless only the
// probabilities are wanted (a recomputation for the backward pass).
void Block::attention_forward(const BlockActs& A, bool with_output) {
    const HeadLayout L(c_, T_);
    const int T = L.T, hd = L.hd, qd = L.qd, kvd = L.kvd;
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B_; ++b)
        for (int kh = 0; kh < L.KV; ++kh) {
            const float* K = A.k + L.kv(b, kh);
            const float* Vv = A.v + L.kv(b, kh);
            for (int h = kh * L.group; h < (kh + 1) * L.group; ++h) {
                const float* Q = A.q + L.q(b, h);
                float* P = A.p + (std::size_t(b) * L.H + h) * T * T;
                float* O = A.o + L.q(b, h);
                for (int i0 = 0; i0 < T; i0 += kRowBlock) {
                    const int i1 = std::min(T, i0 + kRowBlock), rows = i1 - i0;
                    float* Pb = P + std::size_t(i0) * T;
                    gemm::gemm_ex_serial(View::rows(Q + std::size_t(i0) * qd, qd), View::transposed(K, kvd), Pb, T, rows,
                                         i1, hd, false);
                    for (int i = i0; i < i1; ++i) softmax_causal_row(P + std::size_t(i) * T, i + 1, T, L.scale);
                    if (with_output)
                        gemm::gemm_ex_serial(View::rows(Pb, T), View::rows(Vv, kvd), O + std::size_t(i0) * qd, qd, rows,
                                             hd, i1, false);
                }
            }
        }
}

// dP = dO V^T; dV += P^T dO; dS = P (dP - rowsum(dP P)) / sqrt(hd);
// dQ = dS K; dK += dS^T Q. Heads of one group share dK, dV, so one task
// owns a whole group. Blocks above the diagonal are skipped as in the
// forward pass: dP and dQ by row block, dV and dK by key block [j0, j1),
// which only queries i >= j0 reach.
void Block::attention_backward(const BlockActs& A, const float* dO, float* dq, float* dk, float* dv) {
    const HeadLayout L(c_, T_);
    const int T = L.T, hd = L.hd, qd = L.qd, kvd = L.kvd;
    const float scale = L.scale;
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B_; ++b)
        for (int kh = 0; kh < L.KV; ++kh) {
            float* dS = head_scratch_[std::size_t(omp_get_thread_num())].data();
            const float* K = A.k + L.kv(b, kh);
            const float* Vv = A.v + L.kv(b, kh);
            float* dK = dk + L.kv(b, kh);
            float* dV = dv + L.kv(b, kh);
            for (int h = kh * L.group; h < (kh + 1) * L.group; ++h) {
                const bool first = h == kh * L.group;
                const float* Q = A.q + L.q(b, h);
                const float* dOh = dO + L.q(b, h);
                const float* P = A.p + (std::size_t(b) * L.H + h) * T * T;
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
                                         dq + L.q(b, h) + std::size_t(i0) * qd, qd, rows, hd, i1,
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

void Block::norm_attn_in(const LayerW& W, const float* x, const BlockActs& A) {
    rmsnorm_forward(x, W.attn_norm, A.xn1, A.r1, N_, c_.d_model, float(c_.norm_eps));
}

void Block::forward(const LayerW& W, const float* x, const BlockActs& A, float* x_out) {
    const int d = c_.d_model, qd = c_.q_dim(), kvd = c_.kv_dim(), f = c_.d_ff;
    const std::int64_t N = N_;
    norm_attn_in(W, x, A);
    proj(A.xn1, W.wq, A.q, N, d, qd);
    proj(A.xn1, W.wk, A.k, N, d, kvd);
    proj(A.xn1, W.wv, A.v, N, d, kvd);
    rope(A.q, pos_.data(), N, c_.heads, rope_, 1);
    rope(A.k, pos_.data(), N, c_.kv_heads, rope_, 1);
    attention_forward(A, true);
    std::copy(x, x + N * d, A.x_mid);
    gemm::gemm_ex(View::rows(A.o, qd), View::rows(W.wo, d), A.x_mid, d, int(N), d, qd, true);
    rmsnorm_forward(A.x_mid, W.mlp_norm, A.xn2, A.r2, N, d, float(c_.norm_eps));
    proj(A.xn2, W.w1, A.a, N, d, f);
    proj(A.xn2, W.w3, A.b, N, d, f);
    swiglu_forward(A.a, A.b, A.h, N * f);
    std::copy(A.x_mid, A.x_mid + N * d, x_out);
    gemm::gemm_ex(View::rows(A.h, f), View::rows(W.w2, d), x_out, d, int(N), d, f, true);
}

void Block::recompute_cheap(const LayerW& W, const float* x, const BlockActs& A) {
    norm_attn_in(W, x, A);
    attention_forward(A, false);
    rmsnorm_forward(A.x_mid, W.mlp_norm, A.xn2, A.r2, N_, c_.d_model, float(c_.norm_eps));
    swiglu_forward(A.a, A.b, A.h, N_ * c_.d_ff);
}

void Block::backward(const LayerW& W, const LayerG& G, const float* x, const BlockActs& A, float* dx) {
    const int d = c_.d_model, qd = c_.q_dim(), kvd = c_.kv_dim(), f = c_.d_ff;
    const std::int64_t N = N_;
    // MLP: x_out = x_mid + h W2 (dx holds d x_out and becomes d x_mid).
    proj_back(A.h, W.w2, dx, dh_.data(), false, G.w2, N, f, d);
    swiglu_backward(A.a, A.b, dh_.data(), da_.data(), db_.data(), N * f);
    proj_back(A.xn2, W.w1, da_.data(), dxn_.data(), false, G.w1, N, d, f);
    proj_back(A.xn2, W.w3, db_.data(), dxn_.data(), true, G.w3, N, d, f);
    rmsnorm_backward(A.x_mid, W.mlp_norm, A.r2, dxn_.data(), dx, G.mlp_norm, N, d);
    // Attention: x_mid = x + o Wo (dx becomes d x).
    proj_back(A.o, W.wo, dx, dO_.data(), false, G.wo, N, qd, d);
    attention_backward(A, dO_.data(), dq_.data(), dk_.data(), dv_.data());
    rope(dq_.data(), pos_.data(), N, c_.heads, rope_, -1);
    rope(dk_.data(), pos_.data(), N, c_.kv_heads, rope_, -1);
    proj_back(A.xn1, W.wq, dq_.data(), dxn_.data(), false, G.wq, N, d, qd);
    proj_back(A.xn1, W.wk, dk_.data(), dxn_.data(), true, G.wk, N, d, kvd);
    proj_back(A.xn1, W.wv, dv_.data(), dxn_.data(), true, G.wv, N, d, kvd);
    rmsnorm_backward(x, W.attn_norm, A.r1, dxn_.data(), dx, G.attn_norm, N, d);
}

}  // namespace mw::model::cpu
