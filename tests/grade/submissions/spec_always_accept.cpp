// Negative control (level 07): every draft kept, whatever p says — the
// output follows the draft model, not the target. Rejected by the
// distribution check (a token of target probability 0 is emitted) and by
// the greedy tokens.
#include "kernels/speculative/draw.hpp"

extern "C" int student_spec_round(int K, int V, const int*, const double*, const double* p, const double*, double r, int len,
                                  int* next, int* keep) {
    *next = mw::speculative::draw(p + K * V, V, r);
    *keep = len + 1 + K;
    return K;
}
