// Attack class 2, speed credit without speed: more of a shared core than
// the reference gets. Beside a neighbour busy on the graded core, a
// submission that splits its work over processes in sessions of their own
// (a scheduler autogroup each, where autogroups are on) or over many
// threads (where they are off) would get most of the core, the one-thread
// reference half of it, and its ratio would rise with no faster code. A
// correct naive GEMM whose fifth call starts four spinning processes, each
// trying setsid(), spins itself for half a second, and fails with the
// share of the core all five got together, from its own share (CFS splits
// a group's share evenly).
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
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

static double now(clockid_t clock) {
    timespec t{};
    clock_gettime(clock, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

static void spin_until(double end) {
    while (now(CLOCK_MONOTONIC) < end) {
    }
}

static std::string measure() {
    constexpr int kHelpers = 4;
    const double start = now(CLOCK_MONOTONIC);
    pid_t pid[kHelpers];
    for (int i = 0; i < kHelpers; ++i)
        if ((pid[i] = fork()) == 0) {
            setsid();
            spin_until(start + 0.8);
            _exit(0);
        }
    spin_until(start + 0.1);  // everyone running
    const double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID);
    spin_until(w0 + 0.5);
    const double share = (now(CLOCK_THREAD_CPUTIME_ID) - c0) / (now(CLOCK_MONOTONIC) - w0);
    for (pid_t p : pid)
        if (p > 0) waitpid(p, nullptr, 0);
    char buf[64];
    std::snprintf(buf, sizeof buf, "SHARE %.3f", share * (kHelpers + 1));
    return buf;
}

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    static int calls = 0;
    if (calls++ == 4) throw std::runtime_error(measure());
    naive_gemm(A, B, C, M, N, K);
}
