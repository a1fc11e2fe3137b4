// Two wrong loops around the right rule, shared by the speculative tests:
// the target's cache not rolled back (every position the verify pass wrote
// kept), and an off-by-one in the accepted prefix (the rejected draft kept
// as if accepted). Both must change greedy tokens.
#pragma once

#include "kernels/speculative/rule.hpp"

namespace spec_test {

inline int no_rollback(int K, int V, const int* d, const double* q, const double* p, const double* u, double r, int len,
                       int* next, int* keep) {
    const int n = mw::speculative::speculative_round(K, V, d, q, p, u, r, len, next, keep);
    *keep = len + 1 + K;
    return n;
}

inline int off_by_one(int K, int V, const int* d, const double* q, const double* p, const double* u, double r, int len,
                      int* next, int* keep) {
    int n = mw::speculative::speculative_round(K, V, d, q, p, u, r, len, next, keep);
    if (n < K) *next = d[n], ++n, ++*keep;
    return n;
}

}  // namespace spec_test
