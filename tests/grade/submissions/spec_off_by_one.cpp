// Negative control (level 07): an off-by-one in the accepted prefix — the
// rejected draft is counted as accepted (n + 1), and its residual token
// follows it. Rejected by the greedy tokens and the distribution check.
#include <vector>

#include "kernels/speculative/draw.hpp"

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r,
                                  int len, int* next, int* keep) {
    std::vector<double> res(V);
    for (int i = 0; i < K; ++i) {
        const int d = draft[i];
        if (u[i] * q[i * V + d] < p[i * V + d]) continue;
        for (int x = 0; x < V; ++x) res[x] = p[i * V + x] > q[i * V + x] ? p[i * V + x] - q[i * V + x] : 0.0;
        *next = mw::speculative::draw(res.data(), V, r);
        *keep = len + 2 + i;
        return i + 1;
    }
    *next = mw::speculative::draw(p + K * V, V, r);
    *keep = len + 1 + K;
    return K;
}
