// Negative control (level 06, paged-attn-cpu): a "KV cache" of its own that
// is never reset between calls. The first call of a shape gathers every
// sequence's keys and values (dequantized) through the block table into a
// static contiguous copy; later calls of that shape attend over the copy,
// which still holds the first call's pool. Right on call 1, wrong on call 2.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

extern "C" void student_paged_attn(const float* q, const std::int32_t* block_table, const std::int32_t* lens,
                                   const void* K, const void* V, const float* K_scale, const float* V_scale,
                                   float* o, int b, int heads, int kv_heads, int hd, int max_blocks, int int8) {
    // [s][p][g][e] for K, then V, per shape
    static std::map<std::tuple<int, int, int, int, int>, std::vector<float>> kept;
    auto& kv = kept[{b, heads, kv_heads, hd, max_blocks}];
    const std::int64_t per_seq = std::int64_t(max_blocks) * 16 * kv_heads * hd;
    if (kv.empty()) {  // the bug: filled once, never refreshed
        kv.assign(std::size_t(2 * b * per_seq), 0.0f);
        for (int s = 0; s < b; ++s)
            for (int p = 0; p < lens[s]; ++p)
                for (int i = 0; i < kv_heads * hd; ++i) {
                    const std::int64_t row = std::int64_t(block_table[s * max_blocks + p / 16]) * 16 + p % 16;
                    const std::int64_t at = row * kv_heads * hd + i, sc = row * kv_heads + i / hd;
                    float* dst = kv.data() + s * per_seq + std::int64_t(p) * kv_heads * hd + i;
                    dst[0] = int8 ? K_scale[sc] * static_cast<const std::int8_t*>(K)[at] : static_cast<const float*>(K)[at];
                    dst[b * per_seq] = int8 ? V_scale[sc] * static_cast<const std::int8_t*>(V)[at] : static_cast<const float*>(V)[at];
                }
    }
    for (int s = 0; s < b; ++s)
        for (int h = 0; h < heads; ++h) {
            const int g = h / (heads / kv_heads);
            const float* Ks = kv.data() + s * per_seq + g * hd;
            const float* Vs = Ks + b * per_seq;
            const float* qh = q + (s * heads + h) * hd;
            std::vector<float> w(std::size_t(lens[s]), 0.0f);
            float m = -INFINITY, sum = 0;
            for (int p = 0; p < lens[s]; ++p) {
                for (int e = 0; e < hd; ++e) w[p] += qh[e] * Ks[std::int64_t(p) * kv_heads * hd + e] / std::sqrt(float(hd));
                m = std::max(m, w[p]);
            }
            for (float& x : w) sum += (x = std::exp(x - m));
            for (int e = 0; e < hd; ++e) {
                float acc = 0;
                for (int p = 0; p < lens[s]; ++p) acc += w[p] * Vs[std::int64_t(p) * kv_heads * hd + e];
                o[(s * heads + h) * hd + e] = acc / sum;
            }
        }
}
