// Negative control: fp16 arithmetic where fp32 is required. Products and the
// running sum are rounded to _Float16 (11-bit significand): errors ~1e-3
// relative instead of ~1e-7, far outside the fp32 tolerance.
extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            _Float16 acc = 0;
            for (int k = 0; k < K; ++k) acc += _Float16(A[i * K + k]) * _Float16(B[k * N + j]);
            C[i * N + j] = float(acc);
        }
}
