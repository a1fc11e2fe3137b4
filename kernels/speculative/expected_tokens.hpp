// Expected tokens per target pass of speculative decoding: with gamma drafts,
// each accepted with probability alpha independently (the geometric model of
// Leviathan et al.), a pass yields 1 + alpha + ... + alpha^gamma tokens, the
// target's own token included: (1 - alpha^(gamma+1)) / (1 - alpha). One home
// for the lever's counters and for `memwall calc speculative`.
#pragma once

namespace mw::speculative {

inline double expected_tokens(double alpha, double gamma) {
    if (alpha >= 1) return gamma + 1;
    double a = 1, sum = 0;
    for (int i = 0; i <= int(gamma); ++i) sum += a, a *= alpha;
    return sum;
}

}  // namespace mw::speculative
