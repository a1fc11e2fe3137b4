// How `memwall grade` calls a bias-gelu-ln-cpu submission: compiled together
// with the student's file into the grader's worker program (commands/grade/
// grade_worker.hpp). Buffers arrive in the op's order: inputs x, bias, gamma,
// beta; output y (already poisoned with NaN by the grader).
#include "commands/grade/grade_worker.hpp"

extern "C" void student_bias_gelu_ln(const float* x, const float* bias, const float* gamma, const float* beta,
                                     float* y, int rows, int hidden);

void mw_grade_call(mw::grade::Call& c) {
    student_bias_gelu_ln(c.in<float>(0), c.in<float>(1), c.in<float>(2), c.in<float>(3), c.out<float>(0),
                         c.axis("rows"), c.axis("hidden"));
}
