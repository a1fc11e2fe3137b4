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

// The level's own naive stub, renamed, does the arithmetic.
#define student_gemm naive_gemm
#include "levels/01-vectorization/exercise/gemm_cpu.cpp"
#undef student_gemm

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
