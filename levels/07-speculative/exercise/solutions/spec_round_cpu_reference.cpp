// Reference solution of exercise spec-round-cpu, used by tests/grade: the
// project's own round (kernels/speculative/rule.cpp), linked from the
// grader's worker library. Graded against the rejection rung it *is*, it must get full
// marks.
#include "kernels/speculative/rule.hpp"

extern "C" int student_spec_round(int K, int V, const int* draft, const double* q, const double* p, const double* u, double r,
                                  int len, int* next, int* keep) {
    return mw::speculative::speculative_round(K, V, draft, q, p, u, r, len, next, keep);
}
