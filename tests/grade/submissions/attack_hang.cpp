// Not an attack of its own: a correct naive GEMM whose sixth call never
// returns (a sleep marked with a number the test looks for), so that a test
// can kill the grader while a worker, its sandbox and its cgroups are live,
// and check that the grade's guard removes them all.
#include <unistd.h>

static void naive_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    static int calls = 0;
    if (calls++ == 5)
        for (;;) sleep(3119);
    naive_gemm(A, B, C, M, N, K);
}
