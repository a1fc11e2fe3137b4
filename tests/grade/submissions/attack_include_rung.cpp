// Attack: no work of its own. The rung the level is graded against
// (optimized/vectorization/gemm_threads.cpp, on rung 3's kernel) compiled into
// the submission by #include, its registrations switched off as the grader's
// worker library switches them off. The compiler must see only what the
// exercise's adapter and stub include, so this is a compile error (it scored
// 100/100 while the compiler saw the whole source tree).
#define MW_NO_REGISTRATION 1
#include "optimized/vectorization/gemm_simd.cpp"
#include "optimized/vectorization/gemm_threads.cpp"

namespace mw::gemm {
double bytes_blocked(const Shape&, double, double) { return 0; }
}  // namespace mw::gemm

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    mw::gemm::gemm_threads(A, B, C, M, N, K);
}
