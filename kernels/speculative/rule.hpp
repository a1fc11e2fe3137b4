// Speculative decoding's acceptance rule, one home: accept_round and the
// round step with its cache rollback (speculative_round), used by the loop
// over the model (kernels/speculative/speculate.hpp), the accept op's
// Markov-chain loops (reference/speculative/chain.hpp) and level 07's grade
// adapter (which compiles this file in: it depends on nothing else).
//
// The rule (Leviathan et al. 2023, Algorithm 1; Chen et al. 2023): a draft
// model proposes d_1..d_K, drawing d_i from its distribution q_i; one pass
// of the target over the K + 1 positions gives p_1..p_{K+1}. Draft i is
// accepted with probability min(1, p_i(d_i) / q_i(d_i)), in order, until the
// first rejection; at a rejection at i one token is drawn from the residual
// (p_i - q_i)+ normalized, and the round ends; when all K are accepted a
// bonus token is drawn from p_{K+1}. Every emitted token is then distributed
// exactly as the target alone would have drawn it: P(emit x) =
// q(x) min(1, p(x)/q(x)) + (1 - sum_y min(p(y), q(y))) (p(x) - q(x))+ / sum_y (p(y) - q(y))+
// = min(p, q)(x) + (p(x) - q(x))+ = p(x).
// Greedy decoding is the same rule with one-hot p and q: a draft is kept
// iff it is the target's argmax, and the residual is the target's argmax.
#pragma once

#include <cstdint>

#include "kernels/speculative/draw.hpp"

namespace mw::speculative {

// One round's decision. draft[K] the drafted tokens, q[K][V] the draft's
// distributions they were drawn from, p[(K+1)][V] the target's
// distributions at the same K + 1 positions (p[i] follows the prefix and
// draft[0..i)); u[K] uniforms for the K acceptance tests, r one more for
// the final draw. Returns n, the drafts accepted (0..K); *next is the token
// drawn at position n (from the residual at a rejection, from p[K] when all
// K are accepted). The round emits draft[0..n) then *next.
int accept_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r, int* next);

// A round's decision and the target cache's rollback, the step level 07's
// exercise asks for: accept_round's inputs, plus len, the positions the
// target's cache held before this round's verify pass wrote len .. len + K
// (the last kept token and the K drafts). Returns n as accept_round, sets
// *next, and *keep: the positions the target's cache keeps (those whose
// tokens stay: len + 1 + n). The loop truncates the cache to *keep and
// appends the next round at that position: a cache not rolled back shifts
// every later position.
using RoundFn = int (*)(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r,
                        int len, int* next, int* keep);
int speculative_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r,
                      int len, int* next, int* keep);

}  // namespace mw::speculative
