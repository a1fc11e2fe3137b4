// Negative control: an off-by-one in the reduction (k < K - 1). Wrong everywhere
// except where K = 1 makes it an empty sum... which is also wrong (zero).
extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K - 1; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}
