// Negative control: a failed assertion (abort) on shapes that aren't square.
#include <cstdio>
#include <cstdlib>
extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    if (M != N) {
        std::fprintf(stderr, "student_gemm: only square matrices, sorry\n");
        std::abort();
    }
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}
