// Attack class 4, no grade at all: a correct naive GEMM that, after writing
// its outputs, truncates the memory file that carries the call's buffers
// (the worker's descriptor 3), so that the grader's next read of an output
// would be a SIGBUS: the grader dead, no report, and its processes, cgroups
// and temp folder left behind. The file is sealed at its size: the truncate
// fails, and the grade goes on.
#include <unistd.h>

#include <cstdio>

static void naive_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    naive_gemm(A, B, C, M, N, K);
    for (int fd = 3; fd < 16; ++fd)
        if (ftruncate(fd, 0) == 0) std::printf("TRUNCATED fd %d\n", fd);
}
