// Control (level 01): right at every checked call, a NaN in the timed ones.
// The first call at the speed shape (512^3) is the one checked before the
// timing; every later call there writes a NaN into C. Each timed call is
// compared with the reference's output on the same inputs, and a NaN never
// passes that comparison: full correctness, no speed.
#include <limits>

static void naive_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    static int at_speed_shape = 0;
    naive_gemm(A, B, C, M, N, K);
    if (M == 512 && N == 512 && K == 512 && at_speed_shape++ > 0) C[7] = std::numeric_limits<float>::quiet_NaN();
}
