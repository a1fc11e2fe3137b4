// Negative control: dereferences a null pointer.
extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    volatile float* nowhere = nullptr;
    *nowhere = A[0] * B[0];
}
