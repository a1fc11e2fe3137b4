#include "kernels/moe/route.hpp"

#include <algorithm>
#include <cmath>

namespace mw::moe {

void route_token(const float* l, int E, int k, std::int32_t* experts, float* weights) {
    int top[8];
    float topv[8];
    int n = 0;
    float m = -INFINITY;
    for (int e = 0; e < E; ++e) {
        const float v = l[e];
        m = std::max(m, v);
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
