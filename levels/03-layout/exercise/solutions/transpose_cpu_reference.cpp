// Reference solution of exercise transpose-cpu, used by tests/layout: the
// project's own rung 1 (optimized/layout/transpose_blocked.cpp), compiled
// into the submission. Graded against the "blocked" variant it *is*, it must
// get full marks; if it doesn't, the grader's timing is unfair.
//
// The rung file registers itself with the harness's registry, which a
// submission is not linked with, so registration is switched off here.
#include "harness/registry.hpp"
#undef MW_REGISTER_VARIANT
#define MW_REGISTER_VARIANT(id, ...) static_assert(true, "registration is the harness's business")
#pragma GCC diagnostic ignored "-Wunused-function"  // the rung's prepare(), unused without registration
#include "optimized/layout/transpose_blocked.cpp"

extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    mw::layout::transpose_tiled(in, out, rows, cols);
}
