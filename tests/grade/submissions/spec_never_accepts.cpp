// Attack control (level 07): no speculative rule at all. Every round keeps
// no draft and emits a token drawn from the target's own row: the sampled
// pairs follow the target's law exactly, greedy emits the target's argmax,
// and the cache keeps just the last token — the law, the tokens and the
// rollback are all right, which once earned full correctness. The rounds'
// decisions are not: given the uniforms, the rule keeps drafts this never
// does.
#include "kernels/speculative/draw.hpp"

extern "C" int student_spec_round(int K, int V, const int*, const double*, const double* p, const double*, double r, int len,
                                  int* next, int* keep) {
    (void)K;
    *next = mw::speculative::draw(p, V, r);
    *keep = len + 1;
    return 0;
}
