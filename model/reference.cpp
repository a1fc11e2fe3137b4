// The model stack's fp64 reference: the forward pass with its manual
// backward pass, and a cached token-by-token decoder (the model's geometry
// and seeded initialization are kernels/model/config.cpp). Plain loops, one sequence at a time; every
// formula is written out where it is used. This is the oracle the fp32 paths
// (kernels/model/) are checked against.
#include "model/model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "harness/inputs.hpp"
#include "harness/registry.hpp"

namespace mw::model {

namespace {

using Mat = std::vector<double>;  // row-major [rows, cols]

// y[T, n] = x[T, m] W[m, n]
Mat matmul(const Mat& x, const double* W, int T, int m, int n) {
    Mat y(std::size_t(T) * n, 0.0);
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) y[std::size_t(t) * n + j] += x[std::size_t(t) * m + i] * W[std::size_t(i) * n + j];
    return y;
}
// dx[T, m] += dy[T, n] W^T; dW[m, n] += x^T dy
void matmul_back(const Mat& x, const double* W, const Mat& dy, int T, int m, int n, Mat& dx, double* dW) {
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < m; ++i) {
            double s = 0;
            for (int j = 0; j < n; ++j) {
                s += dy[std::size_t(t) * n + j] * W[std::size_t(i) * n + j];
                dW[std::size_t(i) * n + j] += x[std::size_t(t) * m + i] * dy[std::size_t(t) * n + j];
            }
            dx[std::size_t(t) * m + i] += s;
        }
}

// y = x * r * g with r = 1/sqrt(mean(x^2) + eps), per row; returns r per row.
std::vector<double> rmsnorm(const Mat& x, const double* g, int T, int d, double eps, Mat& y) {
    std::vector<double> r(T);
    y.assign(std::size_t(T) * d, 0.0);
    for (int t = 0; t < T; ++t) {
        double ss = 0;
        for (int i = 0; i < d; ++i) ss += x[std::size_t(t) * d + i] * x[std::size_t(t) * d + i];
        r[t] = 1 / std::sqrt(ss / d + eps);
        for (int i = 0; i < d; ++i) y[std::size_t(t) * d + i] = x[std::size_t(t) * d + i] * r[t] * g[i];
    }
    return r;
}
// dx_j += r g_j dy_j - x_j r^3 / d * sum_i dy_i g_i x_i;  dg_i += dy_i x_i r
void rmsnorm_back(const Mat& x, const double* g, const std::vector<double>& r, const Mat& dy, int T, int d, Mat& dx,
                  double* dg) {
    for (int t = 0; t < T; ++t) {
        const double* xt = &x[std::size_t(t) * d];
        const double* dyt = &dy[std::size_t(t) * d];
        double dot = 0;
        for (int i = 0; i < d; ++i) dot += dyt[i] * g[i] * xt[i], dg[i] += dyt[i] * xt[i] * r[t];
        for (int i = 0; i < d; ++i)
            dx[std::size_t(t) * d + i] += r[t] * g[i] * dyt[i] - xt[i] * r[t] * r[t] * r[t] / d * dot;
    }
}

// Rotates each head's pairs (x[2j], x[2j+1]) by sign * pos * base^(-2j/hd).
void rope(double* x, int pos, int n_heads, int hd, double base, double sign) {
    for (int h = 0; h < n_heads; ++h)
        for (int j = 0; j < hd / 2; ++j) {
            const double a = sign * pos * std::pow(base, -2.0 * j / hd), cs = std::cos(a), sn = std::sin(a);
            double* p = x + h * hd + 2 * j;
            const double x0 = p[0], x1 = p[1];
            p[0] = x0 * cs - x1 * sn;
            p[1] = x0 * sn + x1 * cs;
        }
}

double silu(double a) { return a / (1 + std::exp(-a)); }

struct Forward {
    std::vector<RefBlockActs> layer;
    Mat x_last, xf, probs;  // probs: softmax of the logits, [T, vocab]
    std::vector<double> rf;
    double loss = 0;
};

Forward forward(const Config& c, const double* params, const int* tokens, const int* targets, int T,
                std::vector<double>* logits_out) {
    if (T <= 0 || T > c.max_seq)
        throw std::invalid_argument("sequence length " + std::to_string(T) + " outside 1.." + std::to_string(c.max_seq));
    const auto P = bind(c, params);
    const int d = c.d_model;
    Forward F;
    Mat x(std::size_t(T) * d);
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < d; ++i) x[std::size_t(t) * d + i] = P.embed[std::size_t(tokens[t]) * d + i];
    for (int l = 0; l < c.layers; ++l) {
        F.layer.push_back(ref_block_forward(c, P.layer[l], x, T));
        x = F.layer.back().x_out;
    }
    F.x_last = x;
    F.rf = rmsnorm(x, P.final_norm, T, d, c.norm_eps, F.xf);
    const int V = c.vocab;
    F.probs.assign(std::size_t(T) * V, 0.0);
    if (logits_out) logits_out->assign(std::size_t(T) * V, 0.0);
    for (int t = 0; t < T; ++t) {
        double* z = &F.probs[std::size_t(t) * V];
        for (int v = 0; v < V; ++v) {
            double s = 0;
            for (int i = 0; i < d; ++i) s += F.xf[std::size_t(t) * d + i] * P.embed[std::size_t(v) * d + i];
            z[v] = s;
        }
        if (logits_out) std::copy(z, z + V, logits_out->begin() + std::ptrdiff_t(t) * V);
        const double m = *std::max_element(z, z + V);
        double sum = 0;
        for (int v = 0; v < V; ++v) sum += std::exp(z[v] - m);
        F.loss += -(z[targets[t]] - m - std::log(sum));
        for (int v = 0; v < V; ++v) z[v] = std::exp(z[v] - m) / sum;
    }
    F.loss /= T;
    return F;
}

}  // namespace

RefBlockActs ref_block_forward(const Config& c, const LayerPtrs<const double*>& W, const std::vector<double>& x_in,
                               int T) {
    const int d = c.d_model, hd = c.head_dim(), H = c.heads, KV = c.kv_heads, qd = c.q_dim(), kvd = c.kv_dim(),
          f = c.d_ff, group = H / KV;
    const double scale = 1 / std::sqrt(double(hd));
    RefBlockActs A;
    A.x_in = x_in;
    Mat x = x_in;
    A.r1 = rmsnorm(x, W.attn_norm, T, d, c.norm_eps, A.xn1);
    A.q = matmul(A.xn1, W.wq, T, d, qd);
    A.k = matmul(A.xn1, W.wk, T, d, kvd);
    A.v = matmul(A.xn1, W.wv, T, d, kvd);
    for (int t = 0; t < T; ++t) {
        rope(&A.q[std::size_t(t) * qd], t, H, hd, c.rope_base, 1);
        rope(&A.k[std::size_t(t) * kvd], t, KV, hd, c.rope_base, 1);
    }
    A.p.assign(std::size_t(H) * T * T, 0.0);
    A.o.assign(std::size_t(T) * qd, 0.0);
    for (int h = 0; h < H; ++h) {
        const int kh = h / group;
        for (int i = 0; i < T; ++i) {
            double* p = &A.p[(std::size_t(h) * T + i) * T];
            double m = -INFINITY, sum = 0;
            for (int j = 0; j <= i; ++j) {
                double s = 0;
                for (int e = 0; e < hd; ++e)
                    s += A.q[std::size_t(i) * qd + h * hd + e] * A.k[std::size_t(j) * kvd + kh * hd + e];
                p[j] = s * scale;
                m = std::max(m, p[j]);
            }
            for (int j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - m));
            for (int j = 0; j <= i; ++j) p[j] /= sum;
            for (int j = 0; j <= i; ++j)
                for (int e = 0; e < hd; ++e)
                    A.o[std::size_t(i) * qd + h * hd + e] += p[j] * A.v[std::size_t(j) * kvd + kh * hd + e];
        }
    }
    const Mat attn = matmul(A.o, W.wo, T, qd, d);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += attn[i];
    A.x_mid = x;
    A.r2 = rmsnorm(x, W.mlp_norm, T, d, c.norm_eps, A.xn2);
    A.a = matmul(A.xn2, W.w1, T, d, f);
    A.b = matmul(A.xn2, W.w3, T, d, f);
    A.h.resize(A.a.size());
    for (std::size_t i = 0; i < A.a.size(); ++i) A.h[i] = silu(A.a[i]) * A.b[i];
    const Mat mlp = matmul(A.h, W.w2, T, f, d);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += mlp[i];
    A.x_out = std::move(x);
    return A;
}

void ref_block_backward(const Config& c, const LayerPtrs<const double*>& W, const LayerPtrs<double*>& GW,
                        const RefBlockActs& A, std::vector<double>& dx) {
    const int T = int(A.r1.size()), d = c.d_model, hd = c.head_dim(), H = c.heads, KV = c.kv_heads, qd = c.q_dim(),
          kvd = c.kv_dim(), f = c.d_ff, group = H / KV;
    const double scale = 1 / std::sqrt(double(hd));
    // MLP: x_out = x_mid + h W2, h = silu(a) * b.
    Mat dh(std::size_t(T) * f, 0.0);
    matmul_back(A.h, W.w2, dx, T, f, d, dh, GW.w2);
    Mat da(dh.size()), db(dh.size());
    for (std::size_t i = 0; i < dh.size(); ++i) {
        const double s = 1 / (1 + std::exp(-A.a[i]));
        da[i] = dh[i] * A.b[i] * s * (1 + A.a[i] * (1 - s));
        db[i] = dh[i] * silu(A.a[i]);
    }
    Mat dxn2(std::size_t(T) * d, 0.0);
    matmul_back(A.xn2, W.w1, da, T, d, f, dxn2, GW.w1);
    matmul_back(A.xn2, W.w3, db, T, d, f, dxn2, GW.w3);
    rmsnorm_back(A.x_mid, W.mlp_norm, A.r2, dxn2, T, d, dx, GW.mlp_norm);  // dx is now d(x_mid)
    // Attention: x_mid = x_in + o Wo.
    Mat dO(std::size_t(T) * qd, 0.0);
    matmul_back(A.o, W.wo, dx, T, qd, d, dO, GW.wo);
    Mat dq(std::size_t(T) * qd, 0.0), dk(std::size_t(T) * kvd, 0.0), dv(std::size_t(T) * kvd, 0.0);
    for (int h = 0; h < H; ++h) {
        const int kh = h / group;
        for (int i = 0; i < T; ++i) {
            const double* p = &A.p[(std::size_t(h) * T + i) * T];
            std::vector<double> dp(std::size_t(i) + 1);
            double dot = 0;
            for (int j = 0; j <= i; ++j) {
                for (int e = 0; e < hd; ++e) {
                    dp[j] += dO[std::size_t(i) * qd + h * hd + e] * A.v[std::size_t(j) * kvd + kh * hd + e];
                    dv[std::size_t(j) * kvd + kh * hd + e] += p[j] * dO[std::size_t(i) * qd + h * hd + e];
                }
                dot += p[j] * dp[j];
            }
            for (int j = 0; j <= i; ++j) {
                const double ds = p[j] * (dp[j] - dot) * scale;
                for (int e = 0; e < hd; ++e) {
                    dq[std::size_t(i) * qd + h * hd + e] += ds * A.k[std::size_t(j) * kvd + kh * hd + e];
                    dk[std::size_t(j) * kvd + kh * hd + e] += ds * A.q[std::size_t(i) * qd + h * hd + e];
                }
            }
        }
    }
    for (int t = 0; t < T; ++t) {  // the rotation's transpose is the rotation by -angle
        rope(&dq[std::size_t(t) * qd], t, H, hd, c.rope_base, -1);
        rope(&dk[std::size_t(t) * kvd], t, KV, hd, c.rope_base, -1);
    }
    Mat dxn1(std::size_t(T) * d, 0.0);
    matmul_back(A.xn1, W.wq, dq, T, d, qd, dxn1, GW.wq);
    matmul_back(A.xn1, W.wk, dk, T, d, kvd, dxn1, GW.wk);
    matmul_back(A.xn1, W.wv, dv, T, d, kvd, dxn1, GW.wv);
    rmsnorm_back(A.x_in, W.attn_norm, A.r1, dxn1, T, d, dx, GW.attn_norm);  // dx is now d(x_in)
}

double ref_loss(const Config& c, const double* params, const int* tokens, const int* targets, int T,
                std::vector<double>* logits) {
    return forward(c, params, tokens, targets, T, logits).loss;
}

double ref_loss_grad(const Config& c, const double* params, const int* tokens, const int* targets, int T,
                     double* grad) {
    Forward F = forward(c, params, tokens, targets, T, nullptr);
    const auto P = bind(c, params);
    const auto G = bind(c, grad);
    const int d = c.d_model, V = c.vocab;
    // Loss = mean over t of -log softmax(z_t)[target]: dz = (softmax - onehot) / T.
    Mat dz = F.probs;
    for (int t = 0; t < T; ++t) dz[std::size_t(t) * V + targets[t]] -= 1;
    for (double& v : dz) v /= T;
    // z = xf E^T: dxf = dz E, dE += dz^T xf.
    Mat dxf(std::size_t(T) * d, 0.0);
    for (int t = 0; t < T; ++t)
        for (int v = 0; v < V; ++v) {
            const double g = dz[std::size_t(t) * V + v];
            for (int i = 0; i < d; ++i) {
                dxf[std::size_t(t) * d + i] += g * P.embed[std::size_t(v) * d + i];
                G.embed[std::size_t(v) * d + i] += g * F.xf[std::size_t(t) * d + i];
            }
        }
    Mat dx(std::size_t(T) * d, 0.0);
    rmsnorm_back(F.x_last, P.final_norm, F.rf, dxf, T, d, dx, G.final_norm);
    for (int l = c.layers - 1; l >= 0; --l) ref_block_backward(c, P.layer[l], G.layer[l], F.layer[l], dx);
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < d; ++i) G.embed[std::size_t(tokens[t]) * d + i] += dx[std::size_t(t) * d + i];
    return F.loss;
}

RefCache ref_cache(const Config& c) {
    require_valid(c);
    RefCache k;
    k.k.assign(c.layers, std::vector<double>(std::size_t(c.max_seq) * c.kv_dim()));
    k.v = k.k;
    return k;
}

std::vector<double> ref_step(const Config& c, const double* params, int token, RefCache& cache) {
    if (cache.len >= c.max_seq)
        throw std::invalid_argument("decode position " + std::to_string(cache.len) + " past max_seq " +
                                    std::to_string(c.max_seq));
    if (token < 0 || token >= c.vocab)
        throw std::invalid_argument("token " + std::to_string(token) + " outside 0.." + std::to_string(c.vocab - 1));
    const auto P = bind(c, params);
    const int d = c.d_model, hd = c.head_dim(), H = c.heads, KV = c.kv_heads, qd = c.q_dim(), kvd = c.kv_dim(),
              f = c.d_ff, group = H / KV, pos = cache.len;
    const double scale = 1 / std::sqrt(double(hd));
    Mat x(P.embed + std::size_t(token) * d, P.embed + std::size_t(token + 1) * d), xn;
    for (int l = 0; l < c.layers; ++l) {
        const auto& W = P.layer[l];
        rmsnorm(x, W.attn_norm, 1, d, c.norm_eps, xn);
        Mat q = matmul(xn, W.wq, 1, d, qd), k = matmul(xn, W.wk, 1, d, kvd), v = matmul(xn, W.wv, 1, d, kvd);
        rope(q.data(), pos, H, hd, c.rope_base, 1);
        rope(k.data(), pos, KV, hd, c.rope_base, 1);
        if (cache.round) cache.round(k.data(), KV, hd), cache.round(v.data(), KV, hd);
        std::copy(k.begin(), k.end(), cache.k[l].begin() + std::ptrdiff_t(pos) * kvd);
        std::copy(v.begin(), v.end(), cache.v[l].begin() + std::ptrdiff_t(pos) * kvd);
        Mat o(qd, 0.0);
        for (int h = 0; h < H; ++h) {
            const int kh = h / group;
            std::vector<double> p(std::size_t(pos) + 1);
            double m = -INFINITY, sum = 0;
            for (int j = 0; j <= pos; ++j) {
                double s = 0;
                for (int e = 0; e < hd; ++e) s += q[h * hd + e] * cache.k[l][std::size_t(j) * kvd + kh * hd + e];
                m = std::max(m, p[j] = s * scale);
            }
            for (int j = 0; j <= pos; ++j) sum += (p[j] = std::exp(p[j] - m));
            for (int j = 0; j <= pos; ++j)
                for (int e = 0; e < hd; ++e) o[h * hd + e] += p[j] / sum * cache.v[l][std::size_t(j) * kvd + kh * hd + e];
        }
        const Mat attn = matmul(o, W.wo, 1, qd, d);
        for (int i = 0; i < d; ++i) x[i] += attn[i];
        rmsnorm(x, W.mlp_norm, 1, d, c.norm_eps, xn);
        const Mat a = matmul(xn, W.w1, 1, d, f), b = matmul(xn, W.w3, 1, d, f);
        Mat h(f);
        for (int i = 0; i < f; ++i) h[i] = silu(a[i]) * b[i];
        const Mat mlp = matmul(h, W.w2, 1, f, d);
        for (int i = 0; i < d; ++i) x[i] += mlp[i];
    }
    rmsnorm(x, P.final_norm, 1, d, c.norm_eps, xn);
    std::vector<double> z(c.vocab);
    for (int v = 0; v < c.vocab; ++v) {
        double s = 0;
        for (int i = 0; i < d; ++i) s += xn[i] * P.embed[std::size_t(v) * d + i];
        z[v] = s;
    }
    ++cache.len;
    return z;
}

std::vector<int> ref_greedy(const Config& c, const double* params, const std::vector<int>& prompt, int n,
                            std::vector<double>* margins, const std::function<void(double*, int, int)>& round) {
    if (prompt.empty()) throw std::invalid_argument("greedy decoding needs a prompt of at least one token");
    RefCache cache = ref_cache(c);
    cache.round = round;
    std::vector<double> z;
    for (int t : prompt) z = ref_step(c, params, t, cache);
    std::vector<int> out;
    if (margins) margins->clear();
    for (int i = 0; i < n; ++i) {
        // First maximum wins ties (the fp32 decoder uses the same rule).
        const int best = int(std::max_element(z.begin(), z.end()) - z.begin());
        double second = -INFINITY;
        for (int v = 0; v < c.vocab; ++v)
            if (v != best) second = std::max(second, z[v]);
        if (margins) margins->push_back(z[best] - second);
        out.push_back(best);
        if (i + 1 < n) z = ref_step(c, params, best, cache);
    }
    return out;
}

}  // namespace mw::model
