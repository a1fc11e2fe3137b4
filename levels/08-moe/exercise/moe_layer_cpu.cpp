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
// router). Then speed at T = 2048, d = 512, d_ff = 352, E = 64, k = 2 on 1
// thread (138 MB of expert weights, of which each token needs 2/64),
// relative to the project's sorted_grouped rung
// (optimized/moe/moe_layer_sorted_grouped.cpp: full speed marks need a fair
// share of its rate, see level.json).
//
// This stub is right and slow: it is the op's naive rung, dense_masked
// (reference/moe/moe_layer.cpp, lesson 08's step 0). Every expert runs on
// every token as a dense layer, with the project's packed SIMD GEMM, and the
// routing is a mask: a token's result from an expert it did not choose is
// multiplied by zero. At the speed shape that is E / k = 32 times the useful
// FLOPs. Keep the signature exactly as it is. The grader compiles this file
// (plus its own driver) with
//     g++ -std=c++20 -O3 -march=native -fopenmp
// and links the project's packed SIMD GEMM (mw::gemm::gemm_ex, declared in
// "kernels/vectorization/gemm_cpu.hpp"; the lever here is the dispatch, not
// the GEMM). Check yourself with:
//     memwall grade 08 --submission levels/08-moe/exercise/moe_layer_cpu.cpp --seed 1
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/vectorization/gemm_cpu.hpp"

extern "C" void student_moe_layer(const float* x, const float* w_router, const float* bias, const float* w_gate,
                                  const float* w_up, const float* w_down, float* y, int tokens, int d_model,
                                  int d_ff, int experts, int top_k) {
    const long T = tokens, d = d_model, f = d_ff, E = experts;
    const int k = top_k;
    // Routing, token by token: mask[t][e] is the token's weight for expert e,
    // zero for the E - k experts it did not choose.
    std::vector<float> mask(static_cast<std::size_t>(T * E), 0.0f), l(static_cast<std::size_t>(E));
    std::vector<int> chosen(static_cast<std::size_t>(k));
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
        for (int j = 0; j < k; ++j) mask[t * E + chosen[j]] = std::exp(l[chosen[j]] - m) / sum / sel;
    }
    // TODO: run each expert only on the tokens that chose it: sort the
    // (token, expert) pairs by expert (a counting sort), gather each expert's
    // rows into one block, run the expert once on that block, and add the
    // results back with their weights.
    using mw::gemm::View;
    std::vector<float> a(static_cast<std::size_t>(T * f)), b(a.size()), o(static_cast<std::size_t>(T * d));
    std::copy(x, x + T * d, y);
    for (long e = 0; e < E; ++e) {  // every expert on all T tokens
        mw::gemm::gemm_ex(View::rows(x, d), View::rows(w_gate + e * d * f, f), a.data(), f, int(T), int(f), int(d),
                          false);
        mw::gemm::gemm_ex(View::rows(x, d), View::rows(w_up + e * d * f, f), b.data(), f, int(T), int(f), int(d),
                          false);
        for (long c = 0; c < T * f; ++c) a[c] = a[c] / (1.0f + std::exp(-a[c])) * b[c];
        mw::gemm::gemm_ex(View::rows(a.data(), f), View::rows(w_down + e * f * d, d), o.data(), d, int(T), int(d),
                          int(f), false);
        for (long t = 0; t < T; ++t)  // the mask: zero for a token that did not choose e
            for (long c = 0; c < d; ++c) y[t * d + c] += mask[t * E + e] * o[t * d + c];
    }
}
