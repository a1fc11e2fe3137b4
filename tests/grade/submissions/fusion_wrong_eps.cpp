// Negative control (level 02, bias-gelu-ln-cpu): LayerNorm with epsilon 1e-3
// instead of the op's 1e-5. With row variances of order one, rstd moves by a
// few parts in 10^4: far above fp32 rounding, so the grader must see it.
#include <cmath>
#include <vector>

static float gelu(float v) { return 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v))); }

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
            const float rstd = 1.0f / std::sqrt(var / float(H) + 1e-3f);
            for (long j = 0; j < H; ++j) yr[j] = (g[j] - mean) * rstd * gamma[j] + beta[j];
        }
    }
}
