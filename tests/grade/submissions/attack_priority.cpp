// Attack class 5, weak containment: untrusted code must never run above
// normal priority (at nice -20 it would take the machine from everything
// else on it, the grader included). A correct naive GEMM whose fifth call
// reports the priority it runs at, then fails.
#include <sys/resource.h>

#include <stdexcept>
#include <string>

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
    if (calls++ == 4) throw std::runtime_error("PRIORITY nice=" + std::to_string(getpriority(PRIO_PROCESS, 0)));
    naive_gemm(A, B, C, M, N, K);
}
