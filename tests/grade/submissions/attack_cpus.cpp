// Attack class 2, speed credit without speed: graded with --threads 1, a
// loop that starts a thread per CPU of the machine would be compared with a
// one-thread reference. A correct naive GEMM whose fifth call reports how
// many CPUs it may run on, after trying to widen its affinity to all of
// them, then fails.
#include <sched.h>

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
    if (calls++ == 4) {
        cpu_set_t all;
        CPU_ZERO(&all);
        for (int c = 0; c < 64; ++c) CPU_SET(c, &all);
        sched_setaffinity(0, sizeof all, &all);
        cpu_set_t now;
        sched_getaffinity(0, sizeof now, &now);
        throw std::runtime_error("CPUS " + std::to_string(CPU_COUNT(&now)));
    }
    naive_gemm(A, B, C, M, N, K);
}
