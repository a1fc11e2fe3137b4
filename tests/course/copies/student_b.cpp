// Student B: i-k-j order in 64-wide column strips so a strip of C stays in L1,
// OpenMP over rows, the compiler vectorizes the j loop.
#include <algorithm>
#include <cstring>

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    std::memset(C, 0, sizeof(float) * static_cast<size_t>(M) * N);
    constexpr int kStrip = 64;
    #pragma omp parallel for
    for (int i = 0; i < M; ++i) {
        float* __restrict crow = C + static_cast<long>(i) * N;
        for (int j0 = 0; j0 < N; j0 += kStrip) {
            const int j1 = std::min(N, j0 + kStrip);
            for (int k = 0; k < K; ++k) {
                const float aik = A[static_cast<long>(i) * K + k];
                const float* __restrict brow = B + static_cast<long>(k) * N;
                #pragma omp simd
                for (int j = j0; j < j1; ++j) crow[j] += aik * brow[j];
            }
        }
    }
}
