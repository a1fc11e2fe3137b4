// Negative control: computes on the first call of each shape and returns the
// stored answer afterwards. Right on call 1, wrong on call 2 (new inputs).
#include <map>
#include <tuple>
#include <vector>
extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    static std::map<std::tuple<int, int, int>, std::vector<float>> cache;
    auto& c = cache[{M, N, K}];
    if (c.empty()) {
        c.assign(std::size_t(M) * N, 0.0f);
        for (int i = 0; i < M; ++i)
            for (int k = 0; k < K; ++k)
                for (int j = 0; j < N; ++j) c[i * N + j] += A[i * K + k] * B[k * N + j];
    }
    for (std::size_t e = 0; e < c.size(); ++e) C[e] = c[e];
}
