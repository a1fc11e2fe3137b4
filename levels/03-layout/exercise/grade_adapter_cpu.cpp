// How `memwall grade` calls a transpose-cpu submission: compiled together
// with the student's file into the grader's worker program (commands/grade/
// grade_worker.hpp). Buffers arrive in the op's order: input `in` [R][C],
// output `out` [C][R] (already poisoned with NaN by the grader).
//
// A transpose that forgets to clip its edge tiles writes past the end of
// `out`: the grader's shared mapping puts every buffer between guard pages
// and canaries (commands/grade/grade_protocol.hpp), so that write is a
// SIGSEGV or a reported canary, whatever the level.
#include "commands/grade/grade_worker.hpp"

extern "C" void student_transpose(const float* in, float* out, int rows, int cols);

void mw_grade_call(mw::grade::Call& c) {
    student_transpose(c.in<float>(0), c.out<float>(0), c.axis("rows"), c.axis("cols"));
}
