// Negative control: never returns (must hit the wall-time limit).
extern "C" void student_gemm(const float*, const float*, float* C, int, int, int) {
    for (volatile float x = 0;; x = x + 1.0f) C[0] = x;
}
