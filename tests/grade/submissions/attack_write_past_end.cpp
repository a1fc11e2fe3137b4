// Attack class 6, writes past the output (level 01): a correct GEMM that also
// writes one float past the end of C. The grader's guard pages and canaries
// catch it on every level.

// The level's textbook loop (its stub's) does the arithmetic.
static void naive_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    naive_gemm(A, B, C, M, N, K);
    C[M * N] = 0.0f;
}
