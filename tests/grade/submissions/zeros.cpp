// Negative control: writes zeros (the norm floor rejects it however loose the
// element-wise test).
#include <cstring>
extern "C" void student_gemm(const float*, const float*, float* C, int M, int N, int) {
    std::memset(C, 0, sizeof(float) * M * N);
}
