// Negative control (level 07): the whole prefix tested against one uniform,
// u[0] < prod_i p_i(d_i) / q_i(d_i), without clamping each ratio at 1 — a
// draft the draft model under-proposes (p > q) lends its excess to the
// next, which is then kept too often. (With min(1, p/q) in the product the
// rule is exact.) Rejected by the distribution check.
#include <vector>

#include "kernels/speculative/draw.hpp"

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r,
                                  int len, int* next, int* keep) {
    double prod = 1;
    std::vector<double> res(V);
    for (int i = 0; i < K; ++i) {
        const int d = draft[i];
        prod *= p[i * V + d] / q[i * V + d];
        if (u[0] < prod) continue;
        for (int x = 0; x < V; ++x) res[x] = p[i * V + x] > q[i * V + x] ? p[i * V + x] - q[i * V + x] : 0.0;
        *next = mw::speculative::draw(res.data(), V, r);
        *keep = len + 1 + i;
        return i;
    }
    *next = mw::speculative::draw(p + K * V, V, r);
    *keep = len + 1 + K;
    return K;
}
