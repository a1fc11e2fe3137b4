// The accept op's world (reference/speculative/accept.cpp): speculative
// decoding of a seeded Markov chain, where the output's law is known
// exactly. No model, no harness: level 07's grade adapter compiles this
// file in beside kernels/speculative/rule.cpp.
//
// The target and the draft are chains over v tokens: the target's
// next-token law after token x is row x of P, the draft's row x of Q (v x v
// tables). Q differs from P on purpose: it proposes a token P rules out
// (which must always be rejected) and rules out one P allows (which only
// the residual (p - q)+ can produce).
//
// Sampling (sample_pairs): one sample is a speculative generation of two
// tokens from token 0 — rounds of k drafts from Q, the target's rows for
// the k + 1 positions, a RoundFn decision — and counts the pair (t1, t2).
// The target's own law of the pair is P[0][t1] P[t1][t2] (pair_probs). Two
// tokens, not one: the second comes from the same round (an accepted draft,
// or the bonus after k acceptances) or the next, so a rule right for the
// first token but wrong after an acceptance is caught. Each sampled round
// is also held to the rule where it is not a matter of law: its count of
// accepted drafts must be the one its uniforms decide and its *keep
// len + 1 + that count (len seeded, 0..16); a round that is not ends the
// loop, so the counts come back short.
//
// Greedy (greedy_tokens): `steps` tokens where the target's choice at
// position t after token x is argmax_y log P[x][y] + bias[t][y] and the
// draft's the same with Q: the position matters, as in a model with RoPE.
// Each round's target rows sit where the RoundFn's *keep put the cache's
// end, so a loop that does not roll back computes at the wrong positions.
// The target alone gives greedy_oracle.
//
// Decisions (decide_rounds): the law cannot see how it was produced — a
// rule that never tests a draft and samples the target directly has the
// target's law. Given its uniforms, though, a round's acceptance is
// deterministic: draft i is kept iff u[i] q_i(d_i) < p_i(d_i). So
// kDecisionRounds rounds from seeded contexts are decided by the RoundFn
// and each one's count of accepted drafts and *keep - len are compared
// exactly with the rule's.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/speculative/rule.hpp"

namespace mw::speculative {

struct Chain {
    int v = 0;
    std::vector<double> P, Q;  // [v][v], rows sum to 1
};
Chain make_chain(int v, std::uint64_t seed);
// Greedy's position biases: rows [n][v], uniform in [0, 1.5).
std::vector<double> make_bias(int rows, int v, std::uint64_t seed);
// The target's law of the pair (t1, t2) from token 0: [v * v].
std::vector<double> pair_probs(const double* P, int v);
// counts[v * v] += the pairs of `samples` generations with k drafts decided
// by `round`, uniforms from `seed`. RoundCheck::rule (the accept op, the
// grader) ends the loop at a round whose count or *keep is not the rule's;
// law_only lets every round run, so that the law alone can be seen to
// tell a wrong rule (tests/speculative/test_accept.cpp). Returns whether
// every sample was drawn (false: a broken round ended the loop).
enum class RoundCheck { rule, law_only };
bool sample_pairs(const double* P, const double* Q, int v, int k, std::int64_t samples, RoundFn round, std::uint64_t seed,
                  std::int32_t* counts, RoundCheck check = RoundCheck::rule);
// out[steps]: greedy speculative decoding from token 0, k drafts a round;
// bias [rows][v] read at position % rows. A RoundFn result out of range
// leaves the remaining tokens at -1.
void greedy_tokens(const double* P, const double* Q, const double* bias, int rows, int v, int k, int steps, RoundFn round,
                   std::int32_t* out);
// The target alone: out[steps].
std::vector<int> greedy_oracle(const double* P, const double* bias, int rows, int v, int steps);
// out[2 * kDecisionRounds]: for each round, the drafts accepted and
// *keep - len (-1, -1 for a round whose count, token or *keep is out of
// range).
constexpr int kDecisionRounds = 512;
void decide_rounds(const double* P, const double* Q, int v, int k, RoundFn round, std::uint64_t seed, std::int32_t* out);

// The uniforms' seed of a call's sampling from the problem's seed (the
// grader's fresh one each call) and, for `memwall run`'s repeated calls on
// one problem, the call's index.
inline std::uint64_t samples_seed(std::uint64_t seed, std::uint64_t call) { return seed * 1000003 + call; }

// A record of what a RoundFn answered (level 07's grading, harness/replay.hpp):
// kRecordPerRound int32 values a call — the count it returned, *next, *keep —
// in call order over sample_pairs, greedy_tokens and decide_rounds. The
// most values the three loops can record: at most two rounds a sample (a
// round emits at least one token), one a greedy step, kDecisionRounds.
constexpr int kRecordPerRound = 3;
inline std::size_t record_values(std::int64_t samples, int steps) {
    return std::size_t(kRecordPerRound) * (2 * std::size_t(samples) + std::size_t(steps) + kDecisionRounds);
}

}  // namespace mw::speculative
