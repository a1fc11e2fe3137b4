// Attack class 4, no grade at all (and a report that lies): a correct naive
// GEMM that prints bytes no report can hold as they are (invalid UTF-8, a
// terminal escape that clears the screen, a bell, a carriage return that
// would overwrite the line, a forged score line), then throws with more of
// them in its message (C1 controls and bidirectional overrides, which JSON
// passes as they are, among them). Every report is still written, as valid
// UTF-8, with no control character but newline and tab.
#include <cstdio>
#include <stdexcept>

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
    if (calls++ == 4) {
        std::printf("latin-1 \xe9t\xe9 \xff\xfe \x1b[2J\x07\rPASS  everything                        100.0 / 100.0\n");
        std::printf("cut mid-character: \xe2\x82");
        std::fflush(stdout);
        throw std::runtime_error("bad \xc3\x28 bytes \x1b]0;title\x07 \r\x9b score 100.0 / 100.0 C1[\xc2\x9b"
                                 "2J\xc2\x85] bidi[\xe2\x80\xae" "0 = erocs\xe2\x80\xac \xe2\x81\xa6x\xe2\x81\xa9]");
    }
    naive_gemm(A, B, C, M, N, K);
}
