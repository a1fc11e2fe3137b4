// An honest submission with a large constant table: 1.2 million floats
// (4.8 MB) computed at compile time and kept in the object file, of which
// the GEMM uses one entry (1.0). The compiler's output files must be allowed
// what such a table needs: it compiles, and earns every correctness point.
#include <array>

namespace {
constexpr std::array<float, 1200000> make_table() {
    std::array<float, 1200000> t{};
    for (int i = 0; i < 1200000; ++i) t[i] = 1.0f + float(i % 7);
    return t;
}
constexpr std::array<float, 1200000> kTable = make_table();
}  // namespace

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    const volatile float* table = kTable.data();  // volatile: the table stays in the object file
    const float one = table[7 * (M % 3)];
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc * one;
        }
}
