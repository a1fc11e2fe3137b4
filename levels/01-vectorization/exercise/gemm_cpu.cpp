// Exercise gemm-cpu (level 01, vectorization): make this GEMM fast.
//
//   C[M][N] = A[M][K] * B[K][N], fp32, row-major, C overwritten (no +=).
//
// Keep the signature exactly as it is. The grader compiles this file alone
// (plus its own driver) with
//     g++ -std=c++20 -O3 -march=native -fopenmp
// so OpenMP pragmas and intrinsics (<immintrin.h>) are available; no other
// libraries are linked (no BLAS). Accumulate in fp32 or wider.
//
// Grading: correctness on odd shapes (1, 7, 33, 127, 129, ...) with fresh
// inputs on every call, then speed at 512x512x512 on 2 threads relative to
// the project's own "threads" rung (optimized/vectorization/gemm_threads.cpp).
// Check yourself with:
//     memwall grade 01 --submission levels/01-vectorization/exercise/gemm_cpu.cpp --seed 1
// The ladder in the lesson (loop order, blocking, SIMD micro-kernel, threads)
// is the road map.
extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    // TODO: replace this textbook loop (correct, but ~1 GFLOP/s).
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}
