// Negative control (level 07): the rule is right, but the target's cache
// keeps every position the verify pass wrote, rejected drafts included —
// the next round is appended after them, at the wrong positions. Rejected
// by the greedy tokens (the target's choice depends on the position).
#include <vector>

#include "kernels/speculative/draw.hpp"

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r,
                                  int len, int* next, int* keep) {
    *keep = len + 1 + K;  // no rollback
    std::vector<double> res(V);
    for (int i = 0; i < K; ++i) {
        const int d = draft[i];
        if (u[i] * q[i * V + d] < p[i * V + d]) continue;
        for (int x = 0; x < V; ++x) res[x] = p[i * V + x] > q[i * V + x] ? p[i * V + x] - q[i * V + x] : 0.0;
        *next = mw::speculative::draw(res.data(), V, r);
        return i;
    }
    *next = mw::speculative::draw(p + K * V, V, r);
    return K;
}
