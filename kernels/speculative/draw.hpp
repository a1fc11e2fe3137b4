// Seeded uniforms and a draw from weights: what speculative decoding's
// samplers share (kernels/speculative/rule.hpp, the loops). Depends on
// nothing; level 07's grade adapter compiles draw.cpp into the worker, so a
// submission may call these (the rule itself is not compiled in).
#pragma once

#include <cstdint>

namespace mw::speculative {

// A counter-based uniform in [0, 1): the same (seed, stream, index) gives
// the same number on every machine, in any order of calls.
double uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

// The index drawn from weights w[0..V) (non-negative, not necessarily
// normalized, sum > 0) by the inverse CDF at r in [0, 1).
int draw(const double* w, int V, double r);

}  // namespace mw::speculative
