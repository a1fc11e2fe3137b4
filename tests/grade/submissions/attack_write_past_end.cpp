// Attack class 6, writes past the output (level 01): a correct GEMM that also
// writes one float past the end of C. The grader's guard pages and canaries
// catch it on every level.

// The level's own naive stub, renamed, does the arithmetic.
#define student_gemm naive_gemm
#include "levels/01-vectorization/exercise/gemm_cpu.cpp"
#undef student_gemm

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    naive_gemm(A, B, C, M, N, K);
    C[M * N] = 0.0f;
}
