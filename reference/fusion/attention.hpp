// The attention op of the fusion lever (see fusion.hpp for the ladder).
#pragma once

#include "reference/fusion/fusion.hpp"

namespace mw::fusion {

// The shape axes of one attention problem, as numbers.
struct AttnShape {
    long B, H, Hk, S, D;
    bool causal;
    float scale;  // 1 / sqrt(D)
};
AttnShape attn_shape(const Shape& s);

double attention_flops(const Shape& s);
// Q, K, V read once, O written once.
double attention_compulsory_bytes(const Shape& s, DType);
// Plus the s x s scores written, read, probabilities written, read: 4 s^2 per head.
double attention_bytes_materialized(const Shape& s, DType);

// The fp64 oracle of Q, K and V rounded to bf16 first: the contract of a
// tensor-core rung that rounds its inputs on the way to shared memory
// (optimized/fusion/attention_flash2_mma.cu).
std::vector<std::vector<double>> oracle_bf16_inputs(const Problem& p);

}  // namespace mw::fusion
