// Exercise spec-round-cpu (level 07, speculative): one round's decision of
// speculative decoding, and the rollback of the target's cache.
//
// A draft model proposed draft[0..K), drawing draft[i] from its distribution
// q[i * V .. i * V + V). The target then ran once over K + 1 positions and
// gave p[i * V ..], i = 0..K: p[i] is its distribution for the token after
// the prefix and draft[0..i). Decide, in order i = 0, 1, ...:
//
//   accept draft[i] with probability min(1, p[i][d] / q[i][d]), d = draft[i]:
//       accepted iff u[i] * q[i][d] < p[i][d]  (u[i] uniform in [0, 1); the
//       product, not the quotient, is the test the grader decides with —
//       u < p/q can round the other way);
//   at the first rejection, i: *next = a draw from the normalized residual
//       (p[i] - q[i])+, with the uniform r, and stop;
//   all K accepted: *next = a draw from p[K] with r (the bonus token).
//
// Return n, the drafts accepted (0..K). The round emits draft[0..n) then
// *next. Greedy decoding calls the same function with one-hot p and q (and
// must then give exactly the target's own tokens).
//
// The cache: before this round the target's KV cache held `len` positions;
// the verify pass wrote positions len .. len + K (the last kept token and
// the K drafts). Set *keep to the number of positions the cache must keep —
// those whose tokens stay in the sequence. The caller truncates the cache to
// *keep and appends the next round right there.
//
// mw::speculative::draw(w, V, r) draws index i with probability w[i] / sum(w)
// from non-negative weights w[0..V) (kernels/speculative/draw.hpp, compiled
// into the grader's worker); you may use it or write your own inverse-CDF
// draw: the grader's check is on the law of what you emit, not on which
// uniform picks which token.
//
// Graded by the accept op (reference/speculative/accept.cpp) on seeded
// Markov chains, v tokens, k drafts per round: `counts` — the first two
// tokens of `samples` sampled generations, every one of them (a round whose
// return value or *keep is not the rule's given its uniforms ends the
// sampling loop and fails) — by the
// distribution check (Pearson chi-square at alpha 1e-6, both tails: a
// correct rule fails with probability 1e-6), in every timed call too,
// `tokens` — greedy generation where the target's choice depends on the
// position, so the cache's end must be right — exactly against the target
// alone, and `decisions` — 512 seeded rounds, each one's accepted drafts and
// *keep, exactly against the rule: given u, which drafts are kept is not a
// matter of law. Then speed, against the project's rejection rung.
//
// This stub compiles and is wrong: it accepts every draft. Keep the
// signature exactly as it is. Check yourself with:
//     memwall grade 07 --submission levels/07-speculative/exercise/spec_round_cpu.cpp --seed 1
#include "kernels/speculative/draw.hpp"

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r,
                                  int len, int* next, int* keep) {
    (void)draft, (void)q, (void)u;
    // TODO: test each draft, resample from (p - q)+ at the first rejection.
    *next = mw::speculative::draw(p + K * V, V, r);
    *keep = len + 1 + K;
    return K;
}
