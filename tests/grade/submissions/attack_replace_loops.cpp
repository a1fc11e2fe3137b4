// Attack class 1, points not earned (level 07): the loops that call the
// student's rule are the project's (reference/speculative/chain.cpp), linked
// from the grader's worker library after the submission. A submission that
// defines all three itself is linked instead of them: here the sampling
// loop never calls the rule (it draws the pair from the target's law, the
// law the check expects) and writes the counts directly, so timed calls do
// almost no work; greedy and the decision rounds are honest copies, so
// tokens and decisions stay exact. On an archive linked member by member
// this scored full correctness and every speed point. The worker library is
// now linked whole: a second definition of any of its functions is a link
// error, no points.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/speculative/draw.hpp"
#include "reference/speculative/chain.hpp"

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r,
                                  int len, int* next, int* keep) {
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

namespace mw::speculative {

// The target alone, two tokens from token 0: no round, no rule.
bool sample_pairs(const double* P, const double*, int v, int, std::int64_t samples, RoundFn, std::uint64_t seed,
                  std::int32_t* counts, RoundCheck) {
    for (std::int64_t n = 0; n < samples; ++n) {
        const int a = draw(P, v, uniform(seed, std::uint64_t(n), 1));
        const int b = draw(P + std::size_t(a) * v, v, uniform(seed, std::uint64_t(n), 2));
        ++counts[std::size_t(a) * v + b];
    }
    return true;
}

namespace {
int greedy_choice(const double* T, const double* bias, int rows, int v, int x, int pos) {
    int best = -1;
    double bv = -std::numeric_limits<double>::infinity();
    for (int y = 0; y < v; ++y) {
        const double t = T[std::size_t(x) * v + y];
        if (t <= 0) continue;
        const double s = std::log(t) + bias[std::size_t(pos % rows) * v + y];
        if (s > bv) bv = s, best = y;
    }
    return best;
}
void draft_round(const double* P, const double* Q, int v, int k, int x, std::uint64_t seed, std::uint64_t stream, int* d,
                 double* q, double* p, double* u) {
    for (int j = 0; j <= k; ++j) {
        std::copy_n(P + std::ptrdiff_t(x) * v, v, p + std::ptrdiff_t(j) * v);
        if (j == k) break;
        std::copy_n(Q + std::ptrdiff_t(x) * v, v, q + std::ptrdiff_t(j) * v);
        x = d[j] = draw(q + std::size_t(j) * v, v, uniform(seed, stream, std::uint64_t(2 * j)));
        u[j] = uniform(seed, stream, std::uint64_t(2 * j + 1));
    }
}
}  // namespace

// The target's own greedy tokens: what the check compares with.
void greedy_tokens(const double* P, const double*, const double* bias, int rows, int v, int, int steps, RoundFn,
                   std::int32_t* out) {
    for (int t = 0, x = 0; t < steps; ++t) out[t] = x = greedy_choice(P, bias, rows, v, x, t);
}

// The project's decision rounds, as published, calling the honest rule.
void decide_rounds(const double* P, const double* Q, int v, int k, RoundFn round, std::uint64_t seed, std::int32_t* out) {
    const std::uint64_t s = seed ^ 0xdec1de5ULL;
    std::vector<int> d(static_cast<std::size_t>(k) + 1);
    std::vector<double> q(std::size_t(k) * v), p(std::size_t(k + 1) * v), u(static_cast<std::size_t>(k));
    for (int i = 0; i < kDecisionRounds; ++i) {
        const int x = std::min(v - 1, int(uniform(s, std::uint64_t(i), 999) * v));
        draft_round(P, Q, v, k, x, s, std::uint64_t(i), d.data(), q.data(), p.data(), u.data());
        const int len = std::min(16, int(uniform(s, std::uint64_t(i), 998) * 17));
        int next = -1, keep = -1;
        const int n = round(k, v, d.data(), q.data(), p.data(), u.data(), uniform(s, std::uint64_t(i), 1000), len, &next, &keep);
        const bool ok = n >= 0 && n <= k && next >= 0 && next < v;
        out[2 * i] = ok ? n : -1;
        out[2 * i + 1] = ok ? keep - len : -1;
    }
}

}  // namespace mw::speculative
