// Exercise paged-attn-cpu (level 06, kv-cache): one decode step's attention
// read from a paged KV cache.
//
// For every sequence s < b and query head h < heads (kv head g = h / G,
// G = heads / kv_heads query heads share one kv head):
//
//   position p of sequence s, p < lens[s], lives in
//       block  blk = block_table[s * max_blocks + p / 16],   row  r = p % 16
//   its key is   K[((blk * 16 + r) * kv_heads + g) * hd + e],  e < hd  (V alike)
//   o[(s * heads + h) * hd + e] = sum_p softmax_p(q[s][h] . k_p / sqrt(hd)) v_p[e]
//
// The pools K and V are [n_blocks][16][kv_heads][hd]: fp32 when int8 == 0;
// when int8 == 1, int8 codes, and a key's value is
//       K_scale[(blk * 16 + r) * kv_heads + g] * code
// (one scale per position and kv head, as the project's int8 cache stores
// them; V with V_scale). With int8 == 0, K_scale and V_scale are null.
// q and o are [b][heads][hd]. Inputs are const: the grader checks that they
// are unchanged, and o is full of NaN before every call.
//
// Read exactly positions 0 .. lens[s] - 1 of each sequence. The pool holds
// more than your sequence: other sequences' blocks, blocks of requests that
// have ended, and, in a sequence's last block, rows past its length — stale
// values from earlier requests, large ones. Table entries past a sequence's
// last block name such stale blocks. Nothing carries over from one call to
// the next: every call brings a new pool and a new table.
//
// Correctness is judged against the op's fp64 oracle (softmax attention over
// exactly those rows; for int8, over code x scale) on odd shapes: lengths
// never a whole number of blocks, hd from 1 to 128, MHA, GQA and MQA. Then
// speed at b = 4, 32 query heads on 8 kv heads, hd 128, sequences of up to
// 4096 positions (84 MB of fp32 cache, more than the L3), on 1 thread,
// relative to the project's blocks rung
// (optimized/kv_cache/paged_attn_blocks.cpp).
//
// This stub is right and slow: one thread, and each query head reads its
// kv head's rows itself — G times the bytes the cache holds. Keep the
// signature exactly as it is. The grader compiles this file alone (plus its
// own driver) with
//     g++ -std=c++20 -O3 -march=native -fopenmp
// Check yourself with:
//     memwall grade 06 --submission levels/06-kv-cache/exercise/paged_attn_cpu.cpp --seed 1
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

extern "C" void student_paged_attn(const float* q, const std::int32_t* block_table, const std::int32_t* lens,
                                   const void* K, const void* V, const float* K_scale, const float* V_scale,
                                   float* o, int b, int heads, int kv_heads, int hd, int max_blocks, int int8) {
    const int G = heads / kv_heads;
    // Element e of position p's row for kv head g, from pool K or V.
    auto value = [&](const void* pool, const float* scale, int s, int p, int g, int e) {
        const std::int64_t blk = block_table[std::int64_t(s) * max_blocks + p / 16];
        const std::int64_t row = (blk * 16 + p % 16) * kv_heads + g;
        if (int8) return scale[row] * static_cast<const std::int8_t*>(pool)[row * hd + e];
        return static_cast<const float*>(pool)[row * hd + e];
    };
    // TODO: read each kv head's rows once for its G query heads, in one pass
    // (an online softmax over the table's blocks), on every core.
    for (int s = 0; s < b; ++s)
        for (int h = 0; h < heads; ++h) {
            const int g = h / G, len = lens[s];
            const float* qh = q + (std::int64_t(s) * heads + h) * hd;
            std::vector<float> score(static_cast<std::size_t>(len));
            float m = -INFINITY, sum = 0;
            for (int p = 0; p < len; ++p) {
                float d = 0;
                for (int e = 0; e < hd; ++e) d += qh[e] * value(K, K_scale, s, p, g, e);
                score[p] = d / std::sqrt(float(hd));
                m = std::max(m, score[p]);
            }
            for (float& x : score) sum += (x = std::exp(x - m));
            float* oh = o + (std::int64_t(s) * heads + h) * hd;
            for (int e = 0; e < hd; ++e) {
                float acc = 0;
                for (int p = 0; p < len; ++p) acc += score[p] * value(V, V_scale, s, p, g, e);
                oh[e] = acc / sum;
            }
        }
}
