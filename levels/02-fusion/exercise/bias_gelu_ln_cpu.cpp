// Exercise bias-gelu-ln-cpu (level 02, fusion): fuse bias + GELU + LayerNorm.
//
//   y[r][j] = (g[r][j] - mean_r) * rstd_r * gamma[j] + beta[j],  g = GELU(x[r][j] + bias[j])
//   mean_r = sum_j g[r][j] / hidden,  var_r = sum_j (g[r][j] - mean_r)^2 / hidden,
//   rstd_r = 1 / sqrt(var_r + 1e-5)
//   GELU is the tanh form: GELU(v) = 0.5 v (1 + tanh(0.7978845608 (v + 0.044715 v^3)))
//   (the erf form is a different function and is graded as wrong).
// fp32, row-major [rows][hidden]; y overwritten; x, bias, gamma, beta are const.
//
// Keep the signature exactly as it is. The grader compiles this file alone
// (plus its own driver) with
//     g++ -std=c++20 -O3 -march=native -fopenmp
// so OpenMP pragmas and intrinsics (<immintrin.h>) are available; no other
// libraries are linked.
//
// What is here is rung 0 of the lesson, the way an eager framework runs the
// three ops: five passes over the whole activation through two full-size
// temporaries (8 sweeps of rows*hidden*4 bytes through memory) and a scalar
// libm tanh per element. Correct, and far from the memory roof.
//
// Grading: correctness on odd shapes (1, 7, 33, 127, 129, 4097 wide, ...)
// with fresh inputs on every call, then speed at rows=2048, hidden=4096 on 1
// thread relative to the project's "fused" rung
// (optimized/fusion/bias_gelu_ln_fused.cpp). Check yourself with:
//     memwall grade 02 --submission levels/02-fusion/exercise/bias_gelu_ln_cpu.cpp --seed 1
// The lesson's first three steps are the road map: make the math cheap, then
// make one pass per row do all of it while the row sits in L1.
#include <cmath>
#include <vector>

extern "C" void student_bias_gelu_ln(const float* x, const float* bias, const float* gamma, const float* beta,
                                     float* y, int rows, int hidden) {
    const long R = rows, H = hidden;
    std::vector<float> t1(R * H), t2(R * H), mean(R), rstd(R);
    // TODO: replace these five passes (correct, but they move 4x the bytes they must).
#pragma omp parallel for schedule(static)
    for (long r = 0; r < R; ++r)
        for (long j = 0; j < H; ++j) t1[r * H + j] = x[r * H + j] + bias[j];
#pragma omp parallel for schedule(static)
    for (long i = 0; i < R * H; ++i) {
        const float v = t1[i];
        t2[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
#pragma omp parallel for schedule(static)
    for (long r = 0; r < R; ++r) {
        float s = 0;
        for (long j = 0; j < H; ++j) s += t2[r * H + j];
        mean[r] = s / float(H);
    }
#pragma omp parallel for schedule(static)
    for (long r = 0; r < R; ++r) {
        float s = 0;
        for (long j = 0; j < H; ++j) s += (t2[r * H + j] - mean[r]) * (t2[r * H + j] - mean[r]);
        rstd[r] = 1.0f / std::sqrt(s / float(H) + 1e-5f);
    }
#pragma omp parallel for schedule(static)
    for (long r = 0; r < R; ++r)
        for (long j = 0; j < H; ++j) y[r * H + j] = (t2[r * H + j] - mean[r]) * rstd[r] * gamma[j] + beta[j];
}
