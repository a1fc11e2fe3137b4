// Grading an exercise whose student function sits inside a loop (level 07:
// one speculative round, called until `samples` generations are drawn).
// The loop runs in the grader's worker, in the submission's own process, so
// nothing tallied there can be trusted: a submission may replace operator
// new, memmove or anything else the loop calls, and write what it likes.
// Instead the worker records what each call of the student's function
// answered (int32 values, in call order) in one more output, `record`, and
// the grader rebuilds the op's outputs itself by running the same loops
// with the record playing the student's part: every loop bound, every input
// and every tally is the grader's; the record only says what the student's
// function answered, and an answer the loop's own checks refuse ends the
// loop there, as it would have in the worker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "harness/registry.hpp"

namespace mw {

struct Replay {
    // The record's capacity in int32 values for a shape: the most the
    // worker's loops can write.
    std::function<std::size_t(const Shape&)> record_values;
    // The op's outputs of `p`, from its inputs and the record's `n` values.
    std::function<void(Problem& p, const std::int32_t* record, std::size_t n)> rebuild;
};

// The replay registered for an op, or nullptr.
const Replay* find_replay(const std::string& op);

namespace detail {
bool register_replay(const std::string& op, Replay r);
}  // namespace detail

}  // namespace mw

#ifdef MW_NO_REGISTRATION
#define MW_REGISTER_REPLAY(id, ...) static_assert(true, "registration is off in the worker library")
#else
#define MW_REGISTER_REPLAY(id, op, ...) \
    [[maybe_unused]] static const bool mw_replay_##id = ::mw::detail::register_replay(op, ::mw::Replay __VA_ARGS__)
#endif
