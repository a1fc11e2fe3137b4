// Attack class 7, reading the grader's standard input: a correct naive GEMM
// that, on its fourth call, reads whatever is on its standard input (the
// grader's, if it were inherited: a course platform may pipe anything
// there) and aborts with it, so that it would show in the report. Each
// child of the grader reads /dev/null instead.
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

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
    if (calls++ == 3) {
        char buf[256] = {};
        pollfd p{0, POLLIN, 0};
        if (poll(&p, 1, 500) > 0 && (p.revents & POLLIN)) (void)!read(0, buf, sizeof buf - 1);
        std::printf("STDIN [%s]\n", buf);
        std::fflush(stdout);
        std::abort();
    }
    naive_gemm(A, B, C, M, N, K);
}
