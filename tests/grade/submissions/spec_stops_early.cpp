// Attack control (level 07): the rule is right, but one sampling round in a
// thousand (the first cut comes at the sixth) returns an out-of-range
// count, which ends the worker's sampling loop early. Six pairs counted
// pool into one chi-square bin, where the check always passed, and a
// thousand fit the law as well as any; the grader now holds the counts to
// the shape's `samples`. Greedy rounds (r = 0.5, one-hot rows) run on, so
// the tokens stay right.
#include "kernels/speculative/draw.hpp"

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r,
                                  int len, int* next, int* keep) {
    static long calls = 0;
    if (r != 0.5 && ++calls % 1000 == 6) return -1;
    for (int i = 0; i < K; ++i) {
        const int d = draft[i];
        if (u[i] * q[i * V + d] < p[i * V + d]) continue;
        double res[64], mass = 0;
        for (int x = 0; x < V; ++x) mass += res[x] = p[i * V + x] > q[i * V + x] ? p[i * V + x] - q[i * V + x] : 0.0;
        *next = mass > 0 ? mw::speculative::draw(res, V, r) : mw::speculative::draw(p + i * V, V, r);
        *keep = len + 1 + i;
        return i;
    }
    *next = mw::speculative::draw(p + K * V, V, r);
    *keep = len + 1 + K;
    return K;
}
