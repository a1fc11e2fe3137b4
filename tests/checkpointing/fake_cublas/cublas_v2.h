// A stand-in for cuBLAS, for tests only: the few calls kernels/model/
// block_cuda.cuh makes, written from cuBLAS's documented column-major
// semantics as plain loops on the emulator's host-memory "device" pointers,
// so that the GPU block's products (their row-major mapping, leading
// dimensions, strides, GQA's kv head per query head) and everything around
// them run under cuda-emu (test_block_cuda_emu.cpp). Not a performance
// model and not cuBLAS's rounding: a check of the calls, not of the bits.
#pragma once

#include <cstddef>

#define MW_FAKE_CUBLAS 1

struct cublasContext {};
using cublasHandle_t = cublasContext*;
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0 };
enum cublasAtomicsMode_t { CUBLAS_ATOMICS_NOT_ALLOWED = 0 };

inline cublasStatus_t cublasCreate(cublasHandle_t* h) {
    *h = new cublasContext;
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t, void*, std::size_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetAtomicsMode(cublasHandle_t, cublasAtomicsMode_t) { return CUBLAS_STATUS_SUCCESS; }

// Column-major C (m x n, ldc) = alpha op(A) (m x k) op(B) (k x n) + beta C;
// element (i, j) of a column-major X with leading dimension ld is X[i + j ld].
inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                int n, int k, const float* alpha, const float* A, int lda,
                                                long long sa, const float* B, int ldb, long long sb, const float* beta,
                                                float* C, int ldc, long long sc, int batch) {
    const int rows_a = ta == CUBLAS_OP_N ? m : k, rows_b = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < rows_a || ldb < rows_b || ldc < m || lda < 1 || ldb < 1)
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int q = 0; q < batch; ++q) {
        const float *a = A + q * sa, *b = B + q * sb;
        float* c = C + q * sc;
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i) {
                double s = 0;
                for (int l = 0; l < k; ++l) {
                    const float av = ta == CUBLAS_OP_N ? a[i + std::size_t(l) * lda] : a[l + std::size_t(i) * lda];
                    const float bv = tb == CUBLAS_OP_N ? b[l + std::size_t(j) * ldb] : b[j + std::size_t(l) * ldb];
                    s += double(av) * bv;
                }
                float& cv = c[i + std::size_t(j) * ldc];
                cv = float(*alpha * s + (*beta == 0.0f ? 0.0 : double(*beta) * cv));  // beta 0: C not read (may be NaN)
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float* alpha, const float* A, int lda, const float* B, int ldb,
                                  const float* beta, float* C, int ldc) {
    return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}
