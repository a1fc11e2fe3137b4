// How `memwall grade` calls a spec-round-cpu submission: compiled together
// with the student's file into the grader's worker program (commands/grade/
// grade_worker.hpp). Buffers arrive in the accept op's order
// (reference/speculative/accept.cpp): inputs P, Q (the target's and the
// draft's v x v chains), bias (greedy's position biases), seed; outputs
// counts (pairs of the first two tokens of `samples` sampled generations),
// tokens (`steps` greedy tokens) and decisions (each of 512 seeded rounds'
// accepted drafts and kept positions). The loops that call the student's
// round are the project's own (reference/speculative/chain.cpp, with
// kernels/speculative/draw.cpp: seeded uniforms and draw(), which a
// submission may call too), linked from the grader's worker library.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "commands/grade/grade_worker.hpp"
#include "kernels/speculative/draw.hpp"
#include "reference/speculative/chain.hpp"

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r,
                                  int len, int* next, int* keep);

namespace {
int round_fn(int K, int V, const int* d, const double* q, const double* p, const double* u, double r, int len, int* next,
             int* keep) {
    return student_spec_round(K, V, d, q, p, u, r, len, next, keep);
}
}  // namespace

void mw_grade_call(mw::grade::Call& c) {
    // Each call draws fresh samples, as the rejection rung does.
    static std::uint64_t calls = 0;
    const int v = c.axis("v"), k = c.axis("k"), steps = c.axis("steps");
    const std::int64_t samples = c.axis("samples");
    const std::uint64_t seed = std::uint64_t(c.in<std::int32_t>(3)[0]);
    // The counts are tallied here, in this function's own memory, and go out
    // only when every sample was drawn: the shared output buffer is the
    // submission's to reach (it runs in this process), so counts written
    // there by a round that then broke the loop must not stand.
    std::vector<std::int32_t> tally(std::size_t(v) * v, 0);
    if (!mw::speculative::sample_pairs(c.in<double>(0), c.in<double>(1), v, k, samples, round_fn,
                                       seed * 1000003 + calls++, tally.data()))
        throw std::runtime_error("a round broke the sampling loop: its accepted count, next token or kept "
                                 "positions are not the rule's");
    std::copy(tally.begin(), tally.end(), c.out<std::int32_t>(0));
    mw::speculative::greedy_tokens(c.in<double>(0), c.in<double>(1), c.in<double>(2), steps + k + 2, v, k, steps, round_fn,
                                   c.out<std::int32_t>(1));
    mw::speculative::decide_rounds(c.in<double>(0), c.in<double>(1), v, k, round_fn, seed, c.out<std::int32_t>(2));
}
