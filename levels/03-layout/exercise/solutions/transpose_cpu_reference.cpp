// Reference solution of exercise transpose-cpu, used by tests/layout: the
// project's own rung 1 (optimized/layout/transpose_blocked.cpp), linked from
// the grader's worker library (declared in reference/layout/layout.hpp). Graded against the "blocked" variant it *is*, it must
// get full marks; if it doesn't, the grader's timing is unfair.
#include "reference/layout/layout.hpp"

extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    mw::layout::transpose_tiled(in, out, rows, cols);
}
