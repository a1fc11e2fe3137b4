// Negative control (level 07): the acceptance test is right, but a
// rejection draws from p instead of the residual (p - q)+ — tokens the
// draft already proposes are produced twice over. Greedy is unaffected (the
// target's argmax either way): only the distribution check rejects it.
#include "kernels/speculative/draw.hpp"

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r,
                                  int len, int* next, int* keep) {
    for (int i = 0; i < K; ++i) {
        const int d = draft[i];
        if (u[i] * q[i * V + d] < p[i * V + d]) continue;
        *next = mw::speculative::draw(p + i * V, V, r);
        *keep = len + 1 + i;
        return i;
    }
    *next = mw::speculative::draw(p + K * V, V, r);
    *keep = len + 1 + K;
    return K;
}
