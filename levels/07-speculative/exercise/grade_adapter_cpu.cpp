// How `memwall grade` calls a spec-round-cpu submission: compiled together
// with the student's file into the grader's worker program (commands/grade/
// grade_worker.hpp). Buffers arrive in the accept op's order
// (reference/speculative/accept.cpp): inputs P, Q (the target's and the
// draft's v x v chains), bias (greedy's position biases), seed; outputs
// counts, tokens and decisions, and one more the grader adds: the record.
//
// The loops that call the student's round are the project's own
// (reference/speculative/chain.cpp, with kernels/speculative/draw.cpp:
// seeded uniforms and draw(), which a submission may call too), linked from
// the grader's worker library. They run here, in the submission's process,
// so the grader trusts nothing they tally: each answer of the student's
// round (its count, *next, *keep) goes into the record, and the grader
// rebuilds counts, tokens and decisions by running the same loops itself
// with the record answering for the student (harness/replay.hpp). What is
// written into counts, tokens and decisions here is only for the student's
// own debugging.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "commands/grade/grade_worker.hpp"
#include "kernels/speculative/draw.hpp"
#include "reference/speculative/chain.hpp"

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r,
                                  int len, int* next, int* keep);

namespace {
std::int32_t* g_record = nullptr;
std::size_t g_capacity = 0, g_at = 0;

// The student's round, each answer recorded (while the record has room).
int round_fn(int K, int V, const int* d, const double* q, const double* p, const double* u, double r, int len, int* next,
             int* keep) {
    const int n = student_spec_round(K, V, d, q, p, u, r, len, next, keep);
    if (g_at + mw::speculative::kRecordPerRound <= g_capacity) {
        g_record[g_at] = n, g_record[g_at + 1] = *next, g_record[g_at + 2] = *keep;
        g_at += mw::speculative::kRecordPerRound;
    }
    return n;
}
}  // namespace

void mw_grade_call(mw::grade::Call& c) {
    const int v = c.axis("v"), k = c.axis("k"), steps = c.axis("steps");
    const std::int64_t samples = c.axis("samples");
    const std::uint64_t seed = std::uint64_t(c.in<std::int32_t>(3)[0]);  // fresh every call: the grader's
    g_record = c.out<std::int32_t>(3), g_capacity = c.out_bytes(3) / sizeof(std::int32_t), g_at = 0;
    std::int32_t* counts = c.out<std::int32_t>(0);
    std::fill(counts, counts + std::size_t(v) * v, 0);
    if (!mw::speculative::sample_pairs(c.in<double>(0), c.in<double>(1), v, k, samples, round_fn,
                                       mw::speculative::samples_seed(seed, 0), counts))
        throw std::runtime_error("a round broke the sampling loop: its accepted count, next token or kept "
                                 "positions are not the rule's");
    mw::speculative::greedy_tokens(c.in<double>(0), c.in<double>(1), c.in<double>(2), steps + k + 2, v, k, steps, round_fn,
                                   c.out<std::int32_t>(1));
    mw::speculative::decide_rounds(c.in<double>(0), c.in<double>(1), v, k, round_fn, seed, c.out<std::int32_t>(2));
}
