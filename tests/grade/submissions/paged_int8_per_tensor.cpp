// Negative control (level 06, paged-attn-cpu): treats the int8 pools as
// having one scale per tensor and applies the first one (K_scale[0],
// V_scale[0]) to every row, where each position and kv head has its own.
// Right on the fp32 shapes, wrong on every int8 one.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

extern "C" void student_paged_attn(const float* q, const std::int32_t* block_table, const std::int32_t* lens,
                                   const void* K, const void* V, const float* K_scale, const float* V_scale,
                                   float* o, int b, int heads, int kv_heads, int hd, int max_blocks, int int8) {
    auto value = [&](const void* pool, const float* scale, int s, int p, int g, int e) {
        const std::int64_t row = (std::int64_t(block_table[s * max_blocks + p / 16]) * 16 + p % 16) * kv_heads + g;
        return int8 ? scale[0] * static_cast<const std::int8_t*>(pool)[row * hd + e]  // the bug: scale[row]
                    : static_cast<const float*>(pool)[row * hd + e];
    };
    for (int s = 0; s < b; ++s)
        for (int h = 0; h < heads; ++h) {
            const int g = h / (heads / kv_heads);
            const float* qh = q + (s * heads + h) * hd;
            std::vector<float> w(std::size_t(lens[s]), 0.0f);
            float m = -INFINITY, sum = 0;
            for (int p = 0; p < lens[s]; ++p) {
                for (int e = 0; e < hd; ++e) w[p] += qh[e] * value(K, K_scale, s, p, g, e) / std::sqrt(float(hd));
                m = std::max(m, w[p]);
            }
            for (float& x : w) sum += (x = std::exp(x - m));
            for (int e = 0; e < hd; ++e) {
                float acc = 0;
                for (int p = 0; p < lens[s]; ++p) acc += w[p] * value(V, V_scale, s, p, g, e);
                o[(s * heads + h) * hd + e] = acc / sum;
            }
        }
}
