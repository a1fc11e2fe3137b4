// Attack class 2, slowing the reference: the naive GEMM, which on its first
// call leaves behind a detached process (setsid) that spins on every core
// forever, so the reference would be timed on a machine the submission
// keeps busy, and its ratio would rise. The sandbox is frozen between the
// submission's calls (the reference is timed only then), and the spinner is
// killed with the sandbox.
#include <unistd.h>

#include <thread>
#include <vector>

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
        if (fork() == 0) {
            setsid();
            if (fork() == 0) {
                std::vector<std::thread> spin;
                for (unsigned i = 0; i < std::thread::hardware_concurrency(); ++i)
                    spin.emplace_back([] {
                        for (volatile unsigned long x = 0;; x = x + 1) {
                        }
                    });
                for (auto& t : spin) t.join();
            }
            _exit(0);
        }
    }
    naive_gemm(A, B, C, M, N, K);
}
