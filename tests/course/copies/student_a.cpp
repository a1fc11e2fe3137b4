// Student A: transpose B once, then dot products of rows, rows split across threads.
#include <vector>

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    std::vector<float> bt(static_cast<size_t>(N) * K);
    #pragma omp parallel for
    for (int j = 0; j < N; ++j)
        for (int k = 0; k < K; ++k) bt[static_cast<size_t>(j) * K + k] = B[static_cast<size_t>(k) * N + j];
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < M; ++i) {
        const float* a = A + static_cast<size_t>(i) * K;
        for (int j = 0; j < N; ++j) {
            const float* b = bt.data() + static_cast<size_t>(j) * K;
            float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            int k = 0;
            for (; k + 4 <= K; k += 4) {
                s0 += a[k] * b[k];
                s1 += a[k + 1] * b[k + 1];
                s2 += a[k + 2] * b[k + 2];
                s3 += a[k + 3] * b[k + 3];
            }
            for (; k < K; ++k) s0 += a[k] * b[k];
            C[static_cast<size_t>(i) * N + j] = (s0 + s1) + (s2 + s3);
        }
    }
}
