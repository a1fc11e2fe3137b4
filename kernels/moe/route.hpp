// One token's routing decision, shared by moe_route's gemm rung, moe_layer's
// rungs and the CUDA routing kernel (kernels/moe/moe.cuh), written once for
// the host and for device code (reference/moe/moe.hpp states the rule): from
// its E logits (bias included), the top k by insertion into a sorted list of
// k (a later expert moves ahead only when strictly larger, so among equal
// logits the lower index comes first), and the softmax probabilities of the
// chosen ones renormalized to sum to 1. One pass over E for the top k, one
// for the softmax's sum. k <= 8.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define MW_MOE_HD __host__ __device__ __forceinline__
#else
#define MW_MOE_HD inline
#endif

namespace mw::moe {

inline constexpr int kMaxTopK = 8;

MW_MOE_HD void route_token(const float* l, int E, int k, std::int32_t* experts, float* weights) {
    int top[kMaxTopK];
    float topv[kMaxTopK];
    int n = 0;
    float m = -INFINITY;
    for (int e = 0; e < E; ++e) {
        const float v = l[e];
        m = v > m ? v : m;
        if (n == k && !(v > topv[k - 1])) continue;
        int i = n < k ? n++ : k - 1;
        while (i > 0 && v > topv[i - 1]) top[i] = top[i - 1], topv[i] = topv[i - 1], --i;
        top[i] = e, topv[i] = v;
    }
    float sum = 0, sel = 0;
    for (int e = 0; e < E; ++e) sum += std::exp(l[e] - m);
    for (int j = 0; j < k; ++j) sel += std::exp(topv[j] - m) / sum;
    for (int j = 0; j < k; ++j) {
        experts[j] = top[j];
        weights[j] = std::exp(topv[j] - m) / sum / sel;
    }
}

}  // namespace mw::moe
