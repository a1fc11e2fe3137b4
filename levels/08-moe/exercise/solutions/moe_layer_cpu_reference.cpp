// A reference solution of moe-layer-cpu (level 08), for the grader's tests:
// route every token, counting-sort the (token, expert) pairs by expert, run
// each expert once on its gathered block with the project's packed SIMD GEMM
// (gemm_ex, from level 08's worker library: the lever is the dispatch, not
// the GEMM), then add each token's k results with their weights, in
// ascending expert order.
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
    std::vector<std::int32_t> ex(static_cast<std::size_t>(T * k));
    std::vector<float> wt(static_cast<std::size_t>(T * k));
    // Routing: one token per iteration.
#pragma omp parallel for schedule(static)
    for (long t = 0; t < T; ++t) {
        std::vector<float> l(static_cast<std::size_t>(E));
        for (long e = 0; e < E; ++e) l[e] = bias[e];
        for (long i = 0; i < d; ++i)
            for (long e = 0; e < E; ++e) l[e] += x[t * d + i] * w_router[i * E + e];
        const float m = *std::max_element(l.begin(), l.end());
        float sum = 0, sel = 0;
        for (long e = 0; e < E; ++e) sum += std::exp(l[e] - m);
        for (int j = 0; j < k; ++j) {
            int best = -1;
            for (int e = 0; e < int(E); ++e) {
                bool taken = false;
                for (int q = 0; q < j; ++q) taken |= ex[t * k + q] == e;
                if (!taken && (best < 0 || l[e] > l[best])) best = e;
            }
            ex[t * k + j] = best;
            sel += std::exp(l[best] - m) / sum;
        }
        for (int j = 0; j < k; ++j) wt[t * k + j] = std::exp(l[ex[t * k + j]] - m) / sum / sel;
    }
    // Counting sort by expert.
    std::vector<long> start(static_cast<std::size_t>(E + 1), 0);
    for (long a = 0; a < T * k; ++a) ++start[ex[a] + 1];
    for (long e = 0; e < E; ++e) start[e + 1] += start[e];
    std::vector<long> next(start.begin(), start.end() - 1), row_of(static_cast<std::size_t>(T * k));
    std::vector<float> xs(static_cast<std::size_t>(T * k * d)), ys(static_cast<std::size_t>(T * k * d));
    for (long a = 0; a < T * k; ++a) row_of[a] = next[ex[a]]++;
#pragma omp parallel for schedule(static)
    for (long a = 0; a < T * k; ++a) std::copy(x + (a / k) * d, x + (a / k + 1) * d, xs.data() + row_of[a] * d);
    // Each expert once, on its block of rows, with the project's packed SIMD
    // GEMM (linked from level 08's worker library; it splits over the threads).
    using mw::gemm::View;
    std::vector<float> a(static_cast<std::size_t>(T * k * f)), b(a.size());
    for (long e = 0; e < E; ++e) {
        const long r = start[e], n = start[e + 1] - r;
        if (n == 0) continue;
        mw::gemm::gemm_ex(View::rows(xs.data() + r * d, d), View::rows(w_gate + e * d * f, f), a.data(), f, int(n),
                          int(f), int(d), false);
        mw::gemm::gemm_ex(View::rows(xs.data() + r * d, d), View::rows(w_up + e * d * f, f), b.data(), f, int(n),
                          int(f), int(d), false);
#pragma omp parallel for schedule(static)
        for (long c = 0; c < n * f; ++c) a[c] = a[c] / (1.0f + std::exp(-a[c])) * b[c];
        mw::gemm::gemm_ex(View::rows(a.data(), f), View::rows(w_down + e * f * d, d), ys.data() + r * d, d, int(n),
                          int(d), int(f), false);
    }
    // Weighted combine.
#pragma omp parallel for schedule(static)
    for (long t = 0; t < T; ++t) {
        std::copy(x + t * d, x + (t + 1) * d, y + t * d);
        for (int j = 0; j < k; ++j) {
            const float w = wt[t * k + j];
            const float* yr = ys.data() + row_of[t * k + j] * d;
            for (long c = 0; c < d; ++c) y[t * d + c] += w * yr[c];
        }
    }
}
