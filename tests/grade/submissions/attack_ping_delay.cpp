// Attack class 2, speed credit without speed: the naive GEMM, with read() and
// write() redefined so that the worker answers empty calls (the grader's
// round-trip measurement) 30 ms late. A grader that subtracted the round trip
// it measured on the submission's own process would see every timed call
// take almost nothing. The worker's pipes use raw system calls and the round
// trip is measured on the reference worker, so this earns what the naive
// stub earns.
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>

extern "C" ssize_t read(int fd, void* buf, size_t n) {
    const long r = syscall(SYS_read, fd, buf, n);
    if (fd == 4 && r == 1 && static_cast<char*>(buf)[0] == 'P') {
        timespec t{0, 30000000};
        nanosleep(&t, nullptr);
    }
    return r;
}

extern "C" ssize_t write(int fd, const void* buf, size_t n) { return syscall(SYS_write, fd, buf, n); }

// The level's textbook loop (its stub's) is the answer.
extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}
