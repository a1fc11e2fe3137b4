// Student C: AVX2 by hand, 4 rows of C by 8 columns at a time, no packing.
#include <immintrin.h>

__attribute__((target("avx2,fma")))
static void rows4(const float* A, const float* B, float* C, int i, int N, int K) {
    int j = 0;
    for (; j + 8 <= N; j += 8) {
        __m256 r0 = _mm256_setzero_ps(), r1 = _mm256_setzero_ps(), r2 = _mm256_setzero_ps(), r3 = _mm256_setzero_ps();
        for (int k = 0; k < K; ++k) {
            __m256 b = _mm256_loadu_ps(B + (long)k * N + j);
            r0 = _mm256_fmadd_ps(_mm256_set1_ps(A[(long)(i + 0) * K + k]), b, r0);
            r1 = _mm256_fmadd_ps(_mm256_set1_ps(A[(long)(i + 1) * K + k]), b, r1);
            r2 = _mm256_fmadd_ps(_mm256_set1_ps(A[(long)(i + 2) * K + k]), b, r2);
            r3 = _mm256_fmadd_ps(_mm256_set1_ps(A[(long)(i + 3) * K + k]), b, r3);
        }
        _mm256_storeu_ps(C + (long)(i + 0) * N + j, r0);
        _mm256_storeu_ps(C + (long)(i + 1) * N + j, r1);
        _mm256_storeu_ps(C + (long)(i + 2) * N + j, r2);
        _mm256_storeu_ps(C + (long)(i + 3) * N + j, r3);
    }
    for (; j < N; ++j)
        for (int r = 0; r < 4; ++r) {
            float s = 0;
            for (int k = 0; k < K; ++k) s += A[(long)(i + r) * K + k] * B[(long)k * N + j];
            C[(long)(i + r) * N + j] = s;
        }
}

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    int i = 0;
    #pragma omp parallel for
    for (int t = 0; t < M / 4; ++t) rows4(A, B, C, 4 * t, N, K);
    for (i = M / 4 * 4; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float s = 0;
            for (int k = 0; k < K; ++k) s += A[(long)i * K + k] * B[(long)k * N + j];
            C[(long)i * N + j] = s;
        }
}
