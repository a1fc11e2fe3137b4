// Expected tokens per target pass of speculative decoding: with gamma drafts,
// each accepted with probability alpha independently (the geometric model of
// Leviathan et al.), a pass yields 1 + alpha + ... + alpha^gamma tokens, the
// target's own token included: (1 - alpha^(gamma+1)) / (1 - alpha). One home
// for the lever's counters and for `memwall calc speculative`.
// The closed form, so that any gamma costs the same (a loop over 2e9 drafts
// did not); 1 - alpha^n as -expm1(n log1p(alpha - 1)), exact enough where
// alpha is near 1 and the plain form cancels. gamma counts whole drafts.
#pragma once

#include <cmath>

namespace mw::speculative {

inline double expected_tokens(double alpha, double gamma) {
    const double n = std::floor(gamma) + 1;  // the drafts and the target's own token
    if (alpha >= 1) return n;
    if (alpha <= 0) return 1;
    return -std::expm1(n * std::log1p(alpha - 1)) / (1 - alpha);
}

}  // namespace mw::speculative
