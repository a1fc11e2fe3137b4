// Negative control for level 08 (moe-layer-cpu): the reference solution
// with ties broken toward the HIGHER expert index ('>=' where the rule
// needs '>'). Experts 0 and 1 tie on every token, so wherever they straddle
// the k-th place this picks expert 1 where the rule picks 0. Must lose its
// correctness points.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

// out[r][0:n] = sum_i in[r][i] w[i][0:n]: 8 rows share each weight row.
void block_product(const float* in, long rows, long k, const float* w, long n, float* out) {
    constexpr long R = 8;
    for (long r0 = 0; r0 < rows; r0 += R) {
        const long nr = std::min(R, rows - r0);
        for (long r = 0; r < nr; ++r) std::fill(out + (r0 + r) * n, out + (r0 + r + 1) * n, 0.0f);
        for (long c0 = 0; c0 < n; c0 += 512) {  // a strip of output columns stays in L1
            const long nc = std::min(512L, n - c0);
            for (long i = 0; i < k; ++i) {
                const float* wi = w + i * n + c0;
                for (long r = 0; r < nr; ++r) {
                    const float a = in[(r0 + r) * k + i];
                    float* o = out + (r0 + r) * n + c0;
                    for (long c = 0; c < nc; ++c) o[c] += a * wi[c];
                }
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
                if (!taken && (best < 0 || l[e] >= l[best])) best = e;
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
    // Each expert on its block, in blocks of 32 rows over the threads.
    std::vector<std::pair<long, long>> work;  // (expert, first row)
    for (long e = 0; e < E; ++e)
        for (long r = start[e]; r < start[e + 1]; r += 32) work.push_back({e, r});
#pragma omp parallel
    {
        std::vector<float> a(static_cast<std::size_t>(32 * f)), b(static_cast<std::size_t>(32 * f));
#pragma omp for schedule(dynamic, 1)
        for (long i = 0; i < long(work.size()); ++i) {
            const auto [e, r] = work[i];
            const long n = std::min(32L, start[e + 1] - r);
            block_product(xs.data() + r * d, n, d, w_gate + e * d * f, f, a.data());
            block_product(xs.data() + r * d, n, d, w_up + e * d * f, f, b.data());
            for (long c = 0; c < n * f; ++c) a[c] = a[c] / (1.0f + std::exp(-a[c])) * b[c];
            block_product(a.data(), n, f, w_down + e * f * d, d, ys.data() + r * d);
        }
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
