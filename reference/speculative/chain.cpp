// Speculative decoding of seeded Markov chains (reference/speculative/chain.hpp).
#include "reference/speculative/chain.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mw::speculative {

Chain make_chain(int v, std::uint64_t seed) {
    Chain c;
    c.v = v;
    c.P.assign(std::size_t(v) * v, 0.0);
    c.Q.assign(std::size_t(v) * v, 0.0);
    for (int x = 0; x < v; ++x) {
        double sp = 0, sq = 0;
        for (int y = 0; y < v; ++y) {
            // Weights spread over about two orders of magnitude; the draft's
            // are the target's, distorted.
            const double a = uniform(seed, std::uint64_t(x), std::uint64_t(y));
            const double b = uniform(seed, std::uint64_t(x) + 1000, std::uint64_t(y));
            double p = std::exp(4.0 * a), q = std::exp(4.0 * (0.5 * a + 0.5 * b));
            if (v > 2 && y == (x + 1) % v) q = 0;  // only the residual can produce this one
            if (v > 2 && y == (x + 2) % v) p = 0;  // the draft proposes it; it must always be rejected
            sp += c.P[std::size_t(x) * v + y] = p;
            sq += c.Q[std::size_t(x) * v + y] = q;
        }
        for (int y = 0; y < v; ++y) c.P[std::size_t(x) * v + y] /= sp, c.Q[std::size_t(x) * v + y] /= sq;
    }
    return c;
}

std::vector<double> make_bias(int rows, int v, std::uint64_t seed) {
    std::vector<double> b(std::size_t(rows) * v);
    for (int t = 0; t < rows; ++t)
        for (int y = 0; y < v; ++y) b[std::size_t(t) * v + y] = 1.5 * uniform(seed, 5000 + std::uint64_t(t), std::uint64_t(y));
    return b;
}

std::vector<double> pair_probs(const double* P, int v) {
    std::vector<double> o(std::size_t(v) * v);
    for (int a = 0; a < v; ++a)
        for (int b = 0; b < v; ++b) o[std::size_t(a) * v + b] = P[a] * P[std::size_t(a) * v + b];
    return o;
}

namespace {

// The drafts the rule keeps given the round's uniforms: the longest prefix
// with u[i] q_i(d_i) < p_i(d_i) — not a matter of law.
int accepted_prefix(const int* d, const double* q, const double* p, const double* u, int v, int k) {
    int i = 0;
    while (i < k && u[i] * q[std::size_t(i) * v + std::size_t(d[i])] < p[std::size_t(i) * v + std::size_t(d[i])]) ++i;
    return i;
}

// A round's cache length before it: 0..16, seeded, alike in sampled and
// decision rounds, so that a RoundFn cannot tell which kind it is deciding.
int round_len(std::uint64_t seed, std::uint64_t stream) { return std::min(16, int(uniform(seed, stream, 998) * 17)); }

// One round's inputs from token x: k drafts drawn from the draft's rows
// (d, q), the target's k + 1 rows (p), the acceptance uniforms (u), all from
// (seed, stream).
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

bool sample_pairs(const double* P, const double* Q, int v, int k, std::int64_t samples, RoundFn round, std::uint64_t seed,
                  std::int32_t* counts, RoundCheck check) {
    const int V = v;
    std::vector<int> d(static_cast<std::size_t>(k) + 1);
    std::vector<double> q(std::size_t(k + 1) * V), p(std::size_t(k + 1) * V), u(static_cast<std::size_t>(k) + 1);
    for (std::int64_t n = 0; n < samples; ++n) {
        int out[2], got = 0, last = 0;
        for (std::uint64_t r = 0; got < 2; ++r) {
            const std::uint64_t stream = std::uint64_t(n) * 64 + r;
            draft_round(P, Q, V, k, last, seed, stream, d.data(), q.data(), p.data(), u.data());
            const int len = round_len(seed, stream);
            int next = -1, keep = -1;
            const int acc = round(k, V, d.data(), q.data(), p.data(), u.data(), uniform(seed, stream, 1000), len, &next, &keep);
            // A broken rule — a count out of range, or other than the
            // uniforms decide, or a cache that keeps the wrong positions —
            // ends the loop: the counts stay short and the check fails.
            if (acc < 0 || acc > k || next < 0 || next >= V) return false;
            if (check == RoundCheck::rule &&
                (acc != accepted_prefix(d.data(), q.data(), p.data(), u.data(), V, k) || keep != len + 1 + acc))
                return false;
            for (int j = 0; j < acc && got < 2; ++j) out[got++] = last = d[std::size_t(j)];
            if (got < 2) out[got++] = last = next;
        }
        ++counts[std::size_t(out[0]) * V + out[1]];
    }
    return true;
}

namespace {

// One-hot at argmax_y log T[x][y] + bias[pos][y] (the first maximum).
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

}  // namespace

void greedy_tokens(const double* P, const double* Q, const double* bias, int rows, int v, int k, int steps, RoundFn round,
                   std::int32_t* out) {
    std::vector<int> d(static_cast<std::size_t>(k) + 1);
    std::vector<double> q(std::size_t(k + 1) * v), p(std::size_t(k + 1) * v), u(static_cast<std::size_t>(k) + 1, 0.5);
    int emitted = 0, last = 0, len = 0;  // len: the target cache's positions (token 0 at position 0 is not in it yet)
    while (emitted < steps) {
        const int K = std::min(k, steps - emitted - 1);
        int x = last;
        std::fill(q.begin(), q.end(), 0.0);
        std::fill(p.begin(), p.end(), 0.0);
        for (int j = 0; j <= K; ++j) {
            // Row j: input x at position len + j.
            p[std::size_t(j) * v + std::size_t(greedy_choice(P, bias, rows, v, x, len + j))] = 1;
            if (j == K) break;
            x = d[std::size_t(j)] = greedy_choice(Q, bias, rows, v, x, len + j);
            q[std::size_t(j) * v + std::size_t(x)] = 1;
        }
        int next = -1, keep = -1;
        const int n = round(K, v, d.data(), q.data(), p.data(), u.data(), 0.5, len, &next, &keep);
        if (n < 0 || n > K || next < 0 || next >= v || keep < len + 1 || keep > len + K + 1) break;
        for (int j = 0; j < n && emitted < steps; ++j) out[emitted++] = last = d[std::size_t(j)];
        if (emitted < steps) out[emitted++] = last = next;
        len = keep;
    }
    for (int i = emitted; i < steps; ++i) out[i] = -1;
}

std::vector<int> greedy_oracle(const double* P, const double* bias, int rows, int v, int steps) {
    std::vector<int> o;
    int x = 0;
    for (int t = 0; t < steps; ++t) o.push_back(x = greedy_choice(P, bias, rows, v, x, t));
    return o;
}

void decide_rounds(const double* P, const double* Q, int v, int k, RoundFn round, std::uint64_t seed, std::int32_t* out) {
    const std::uint64_t s = seed ^ 0xdec1de5ULL;  // streams of their own
    std::vector<int> d(static_cast<std::size_t>(k) + 1);
    std::vector<double> q(std::size_t(k) * v), p(std::size_t(k + 1) * v), u(static_cast<std::size_t>(k));
    for (int i = 0; i < kDecisionRounds; ++i) {
        const int x = std::min(v - 1, int(uniform(s, std::uint64_t(i), 999) * v));
        draft_round(P, Q, v, k, x, s, std::uint64_t(i), d.data(), q.data(), p.data(), u.data());
        const int len = round_len(s, std::uint64_t(i));
        int next = -1, keep = -1;
        const int n = round(k, v, d.data(), q.data(), p.data(), u.data(), uniform(s, std::uint64_t(i), 1000), len, &next, &keep);
        const bool ok = n >= 0 && n <= k && next >= 0 && next < v && keep > len && keep <= len + k + 1;
        out[2 * i] = ok ? n : -1;
        out[2 * i + 1] = ok ? keep - len : -1;
    }
}

}  // namespace mw::speculative
