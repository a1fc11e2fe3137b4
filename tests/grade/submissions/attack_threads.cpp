// Attack class 5, CPU time: on its first call, starts 1,001 threads that spin
// forever in the background, then answers correctly (naively). Their CPU time
// would go unseen by a grader that charges only the wall time of calls, and
// they would keep the machine busy between calls. The sandbox caps threads,
// freezes them between calls and charges every thread's CPU time.
#include <pthread.h>

#include <cstdio>

namespace {
void* spin(void*) {
    for (volatile unsigned long x = 0;; x = x + 1) {
    }
    return nullptr;
}
}  // namespace

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
    static bool started = false;
    if (!started) {
        started = true;
        int ok = 0;
        for (int i = 0; i < 1001; ++i) {
            pthread_t t;
            if (pthread_create(&t, nullptr, spin, nullptr) == 0) ++ok, pthread_detach(t);
        }
        std::printf("THREADS %d OF 1001\n", ok);
    }
    naive_gemm(A, B, C, M, N, K);
}
