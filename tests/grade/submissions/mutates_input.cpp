// Negative control: a correct result, but A is used as scratch space (casting
// away const) and left changed.
extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
    const_cast<float*>(A)[M * K - 1] = 0.0f;
}
