// Negative control: correct, but skips the last row of C (left as the
// grader's NaN poison).
extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M - 1; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}
