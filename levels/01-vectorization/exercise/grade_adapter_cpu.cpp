// How `memwall grade` calls a gemm-cpu submission: compiled together with the
// student's file into the grader's worker program (commands/grade/
// grade_worker.hpp). Buffers arrive in the op's order: inputs A, B; output C
// (already poisoned with NaN by the grader).
#include "commands/grade/grade_worker.hpp"

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K);

void mw_grade_call(mw::grade::Call& c) {
    student_gemm(c.in<float>(0), c.in<float>(1), c.out<float>(0), c.axis("m"), c.axis("n"), c.axis("k"));
}
