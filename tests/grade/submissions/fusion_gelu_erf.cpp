// Negative control (level 02, bias-gelu-ln-cpu): the erf form of GELU,
// 0.5 v (1 + erf(v / sqrt 2)), where the op (and its fp64 oracle) is the tanh
// form. The two differ by up to a few 1e-4, which LayerNorm then scales by
// rstd ~ 1: far outside fp32 rounding, so this is a different function, not
// a rounding difference, and must fail.
#include <cmath>
#include <vector>

static float gelu(float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678f)); }

extern "C" void student_bias_gelu_ln(const float* x, const float* bias, const float* gamma, const float* beta,
                                     float* y, int rows, int hidden) {
    const long H = hidden;
#pragma omp parallel
    {
        std::vector<float> g(H);
#pragma omp for schedule(static)
        for (long r = 0; r < rows; ++r) {
            const float* xr = x + r * H;
            float* yr = y + r * H;
            float mean = 0, var = 0;
            for (long j = 0; j < H; ++j) mean += g[j] = gelu(xr[j] + bias[j]);
            mean /= float(H);
            for (long j = 0; j < H; ++j) var += (g[j] - mean) * (g[j] - mean);
            const float rstd = 1.0f / std::sqrt(var / float(H) + 1e-5f);
            for (long j = 0; j < H; ++j) yr[j] = (g[j] - mean) * rstd * gamma[j] + beta[j];
        }
    }
}
