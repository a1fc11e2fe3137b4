// The model stack's element-wise layers on the CPU, forward and backward, in
// fp32 (kernels/model/layers_cpu.cpp). Every one is memory-bound: a few FLOPs
// per element read, so each is written as one sweep over its rows, rows
// dealt to the OpenMP threads. The same math runs on the GPU in
// kernels/model/ (CUDA) and in fp64 in model/reference.cpp:
//
//   RMSNorm  y = x r g,  r = 1/sqrt(mean(x^2) + eps)           reads x, g; writes y, r
//            dx += r g dy - x r^3/d sum(dy g x);  dg += sum_rows dy x r
//   RoPE     (x[2j], x[2j+1]) rotated by pos * base^(-2j/hd), per head; backward
//            rotates by the negative angle (the rotation's transpose)
//   SwiGLU   h = silu(a) b;  da = dh b s (1 + a (1 - s)), db = dh silu(a), s = sigmoid(a)
//   softmax  causal rows of attention scores, and the cross-entropy of logits
#pragma once

#include <cstdint>
#include <vector>

namespace mw::model::cpu {

void rmsnorm_forward(const float* x, const float* g, float* y, float* rstd, std::int64_t rows, int d, float eps);
// dx += ..., dg += ... (both accumulate).
void rmsnorm_backward(const float* x, const float* g, const float* rstd, const float* dy, float* dx, float* dg,
                      std::int64_t rows, int d);

// cos/sin of pos * base^(-2j/hd) for pos < max_seq, j < hd/2, computed in
// double and rounded once: [max_seq][hd/2] each.
struct RopeTable {
    int hd = 0, max_seq = 0;
    std::vector<float> cos, sin;
    RopeTable() = default;
    RopeTable(int hd, int max_seq, double base);
};
// x: [rows][n_heads * hd], row r at position pos[r]; sign +1 forward, -1 backward.
void rope(float* x, const int* pos, std::int64_t rows, int n_heads, const RopeTable& t, int sign);

void swiglu_forward(const float* a, const float* b, float* h, std::int64_t n);
void swiglu_backward(const float* a, const float* b, const float* dh, float* da, float* db, std::int64_t n);

// One row of causal attention scores in place: the first `valid` entries are
// scaled and turned into probabilities, the rest of the n entries set to 0.
void softmax_causal_row(float* s, long valid, long n, float scale);

// Cross-entropy of each row of logits z[rows][V] against targets: returns the
// sum of -log p[target] over rows and writes dz = (p - onehot) * dscale.
double cross_entropy(const float* z, const int* targets, std::int64_t rows, int V, float* dz, float dscale);

}  // namespace mw::model::cpu
