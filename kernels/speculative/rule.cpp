// The acceptance rule (kernels/speculative/rule.hpp).
#include "kernels/speculative/rule.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace mw::speculative {

int accept_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r, int* next) {
    std::vector<double> res(static_cast<std::size_t>(V));
    for (int i = 0; i < K; ++i) {
        const double* qi = q + std::size_t(i) * V;
        const double* pi = p + std::size_t(i) * V;
        const int d = draft[i];
        // u < p/q is u < min(1, p/q) for u in [0, 1): the min matters where
        // the ratio is used as a number (tests/speculative's controls).
        if (u[i] * qi[d] < pi[d]) continue;
        double mass = 0;
        for (int x = 0; x < V; ++x) mass += res[std::size_t(x)] = std::max(0.0, pi[x] - qi[x]);
        // A rejection has probability sum (q - p)+ = sum (p - q)+ > 0 here;
        // rounding can leave p == q with d rejected only at u*q == p.
        *next = mass > 0 ? draw(res.data(), V, r) : draw(pi, V, r);
        return i;
    }
    *next = draw(p + std::size_t(K) * V, V, r);
    return K;
}

int speculative_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r, int len,
                      int* next, int* keep) {
    const int n = accept_round(K, V, draft, q, p, u, r, next);
    *keep = len + 1 + n;  // the last kept token's position and the n accepted drafts'
    return n;
}

}  // namespace mw::speculative
