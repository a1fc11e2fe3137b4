// Negative control: does not compile (missing semicolon, undeclared name).
extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        C[i] = A[i] * B[i] + undeclared_bias
}
