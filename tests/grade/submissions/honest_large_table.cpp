// An honest submission with a large constant table: 1.2 million floats
// (4.8 MB, every one 1.0) in the object file, of which the GEMM reads one.
// The compiler's output files must be allowed what such a table needs: it
// compiles, and earns every correctness point.
namespace {
struct Row {
    float v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
};
struct Block {
    Row r[1000];
};
const Block kTable[150]{};  // 150 x 1000 x 8 floats, constant-initialized
}  // namespace

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    const float one = kTable[M % 150].r[N % 1000].v[K % 8];
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc * one;
        }
}
