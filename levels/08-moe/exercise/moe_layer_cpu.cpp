// Exercise moe-layer-cpu (level 08, moe): a mixture-of-experts layer — route
// every token to k of E experts, run each expert on its tokens, add the
// results back weighted.
//
// Shapes: x [T][d], w_router [d][E], bias [E], w_gate and w_up [E][d][d_ff],
// w_down [E][d_ff][d], y [T][d] (T = tokens, d = d_model, E = experts).
//
//   routing   l[t][e] = bias[e] + sum_i x[t][i] w_router[i][e]
//             p[t] = softmax(l[t]) over the E experts
//             the k experts of largest logit; among EQUAL logits the LOWER
//             expert index comes first (experts 0 and 1 have the same router
//             column, so they tie on every token: this rule decides which one
//             a token gets when they straddle the k-th place)
//             w[t][j] = p[t][e_j] / sum over the k chosen of p  (renormalized)
//   expert e  FFN_e(v) = (silu(v Wg_e) * (v Wu_e)) Wd_e,  silu(a) = a / (1 + exp(-a))
//   output    y[t] = x[t] + sum_j w[t][j] FFN_{e_j}(x[t])
//
// Every token keeps all k of its experts: no capacity, nothing dropped.
// Inputs are const: the grader checks that they are unchanged, and y is full
// of NaN before every call. Nothing carries over from one call to the next.
//
// Correctness is judged against the op's fp64 oracle on odd shapes (one
// token, widths that end inside a vector, one expert, k = 1 to 3, a skewed
// router). Then speed at T = 1024, d = 512, d_ff = 1408, E = 8, k = 2 on 2
// threads (69 MB of expert weights: more than the L3), relative to the
// project's sorted_grouped rung
// (optimized/moe/moe_layer_sorted_grouped.cpp, which multiplies with a packed
// SIMD GEMM: full speed marks need a fair share of its rate, see level.json).
//
// This stub is right and slow: one thread, and each token runs its k experts
// alone — a vector-matrix product that reads all 3 d d_ff of an expert's
// weights for one token. Keep the signature exactly as it is. The grader
// compiles this file (plus its own driver) with
//     g++ -std=c++20 -O3 -march=native -fopenmp
// and links the project's packed SIMD GEMM: include
// "kernels/vectorization/gemm_cpu.hpp" and call mw::gemm::gemm_ex for an
// expert's block, if you like (the lever here is the dispatch, not the GEMM).
// Check yourself with:
//     memwall grade 08 --submission levels/08-moe/exercise/moe_layer_cpu.cpp --seed 1
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

// out[r][0:n] = sum_i in[r][i] w[i][0:n] for `rows` rows: a small blocked
// product (4 rows share each weight row while it is in L1). Yours to use.
void block_product(const float* in, long rows, long k, const float* w, long n, float* out) {
    for (long r0 = 0; r0 < rows; r0 += 4) {
        const long nr = std::min(4L, rows - r0);
        for (long r = 0; r < nr; ++r) std::fill(out + (r0 + r) * n, out + (r0 + r + 1) * n, 0.0f);
        for (long i = 0; i < k; ++i) {
            const float* wi = w + i * n;
            for (long r = 0; r < nr; ++r) {
                const float a = in[(r0 + r) * k + i];
                float* o = out + (r0 + r) * n;
                for (long c = 0; c < n; ++c) o[c] += a * wi[c];
            }
        }
    }
}

}  // namespace

extern "C" void student_moe_layer(const float* x, const float* w_router, const float* bias, const float* w_gate,
                                  const float* w_up, const float* w_down, float* y, int tokens, int d_model,
                                  int d_ff, int experts, int top_k) {
    const long T = tokens, d = d_model, f = d_ff, E = experts;
    const int k = top_k;
    std::vector<float> l(static_cast<std::size_t>(E)), a(static_cast<std::size_t>(f)),
        b(static_cast<std::size_t>(f)), o(static_cast<std::size_t>(d));
    std::vector<int> chosen(static_cast<std::size_t>(k));
    // TODO: route every token first, then sort the (token, expert) pairs by
    // expert (a counting sort), run each expert once on its tokens' rows
    // gathered into one block, and add the results back with their weights,
    // on every core.
    for (long t = 0; t < T; ++t) {
        const float* xt = x + t * d;
        for (long e = 0; e < E; ++e) {
            float acc = bias[e];
            for (long i = 0; i < d; ++i) acc += xt[i] * w_router[i * E + e];
            l[e] = acc;
        }
        // Top k: take the largest not yet taken, k times; '>' keeps the lower
        // index among equals.
        float m = *std::max_element(l.begin(), l.end()), sum = 0, sel = 0;
        for (long e = 0; e < E; ++e) sum += std::exp(l[e] - m);
        for (int j = 0; j < k; ++j) {
            int best = -1;
            for (int e = 0; e < int(E); ++e)
                if (std::find(chosen.begin(), chosen.begin() + j, e) == chosen.begin() + j &&
                    (best < 0 || l[e] > l[best]))
                    best = e;
            chosen[j] = best;
            sel += std::exp(l[best] - m) / sum;
        }
        float* yt = y + t * d;
        std::copy(xt, xt + d, yt);
        for (int j = 0; j < k; ++j) {
            const long e = chosen[j];
            const float w = std::exp(l[e] - m) / sum / sel;
            block_product(xt, 1, d, w_gate + e * d * f, f, a.data());
            block_product(xt, 1, d, w_up + e * d * f, f, b.data());
            for (long c = 0; c < f; ++c) a[c] = a[c] / (1.0f + std::exp(-a[c])) * b[c];
            block_product(a.data(), 1, f, w_down + e * f * d, d, o.data());
            for (long c = 0; c < d; ++c) yt[c] += w * o[c];
        }
    }
}
