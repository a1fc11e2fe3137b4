// Negative control (level 06, paged-attn-cpu): counts a sequence's positions
// from 1 to lens[s], as if lens[s] were the index of its last position, so
// it skips position 0 and reads the row after the last one (a stale row
// past the sequence's length). Wrong on every shape.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

extern "C" void student_paged_attn(const float* q, const std::int32_t* block_table, const std::int32_t* lens,
                                   const void* K, const void* V, const float* K_scale, const float* V_scale,
                                   float* o, int b, int heads, int kv_heads, int hd, int max_blocks, int int8) {
    auto value = [&](const void* pool, const float* scale, int s, int p, int g, int e) {
        const std::int64_t row = (std::int64_t(block_table[s * max_blocks + p / 16]) * 16 + p % 16) * kv_heads + g;
        return int8 ? scale[row] * static_cast<const std::int8_t*>(pool)[row * hd + e]
                    : static_cast<const float*>(pool)[row * hd + e];
    };
    for (int s = 0; s < b; ++s)
        for (int h = 0; h < heads; ++h) {
            const int g = h / (heads / kv_heads);
            const float* qh = q + (s * heads + h) * hd;
            std::vector<float> w(std::size_t(lens[s]) + 1, 0.0f);
            float m = -INFINITY, sum = 0;
            for (int p = 1; p <= lens[s]; ++p) {  // the bug: 1-based positions
                for (int e = 0; e < hd; ++e) w[p] += qh[e] * value(K, K_scale, s, p, g, e) / std::sqrt(float(hd));
                m = std::max(m, w[p]);
            }
            for (int p = 1; p <= lens[s]; ++p) sum += (w[p] = std::exp(w[p] - m));
            for (int e = 0; e < hd; ++e) {
                float acc = 0;
                for (int p = 1; p <= lens[s]; ++p) acc += w[p] * value(V, V_scale, s, p, g, e);
                o[(s * heads + h) * hd + e] = acc / sum;
            }
        }
}
