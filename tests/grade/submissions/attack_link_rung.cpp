// Attack class 2, points not earned: the project's own rung 4 of the GEMM
// ladder, which level 01 is graded against, declared by hand and called (no
// include needed if its code were linked into the worker). Level 01's
// worker links no project code: a link error, no points.
namespace mw::gemm {
void gemm_threads(const float* A, const float* B, float* C, int M, int N, int K);
}

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    mw::gemm::gemm_threads(A, B, C, M, N, K);
}
