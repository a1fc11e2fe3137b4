// Attack class 7, reading the grader's standard input at compile time: the
// compiler is told to include /dev/stdin, so that whatever the grader's
// standard input holds (a course platform may pipe anything there) becomes
// part of the submission and shows in the compiler's error messages. The
// compiler reads /dev/null instead, so the include is empty and this is the
// level's textbook loop.
#include "/dev/stdin"

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}
