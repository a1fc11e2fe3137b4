// Negative control (level 02, bias-gelu-ln-cpu): LayerNorm over the wrong
// axis: mean and variance of each column (over the rows) instead of each row
// (over hidden), the classic transposed-reduction slip.
#include <cmath>
#include <vector>

static float gelu(float v) { return 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v))); }

extern "C" void student_bias_gelu_ln(const float* x, const float* bias, const float* gamma, const float* beta,
                                     float* y, int rows, int hidden) {
    const long R = rows, H = hidden;
    std::vector<float> g(R * H);
    for (long i = 0; i < R * H; ++i) g[i] = gelu(x[i] + bias[i % H]);
    for (long j = 0; j < H; ++j) {
        float mean = 0, var = 0;
        for (long r = 0; r < R; ++r) mean += g[r * H + j];
        mean /= float(R);
        for (long r = 0; r < R; ++r) var += (g[r * H + j] - mean) * (g[r * H + j] - mean);
        const float rstd = 1.0f / std::sqrt(var / float(R) + 1e-5f);
        for (long r = 0; r < R; ++r) y[r * H + j] = (g[r * H + j] - mean) * rstd * gamma[j] + beta[j];
    }
}
