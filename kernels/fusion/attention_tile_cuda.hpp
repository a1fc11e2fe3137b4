// The step both FlashAttention CUDA rungs take for one query row and one K/V
// tile staged in shared memory (optimized/fusion/attention_smem_tiles.cu,
// attention_flash2.cu): they differ in the loop order around it, which is
// their lesson, not in this arithmetic. Include after harness/cuda/launch.hpp.
#pragma once

// An unnamed namespace, like harness/cuda/device_problem.hpp: nvcc and the
// emulator each compile these, and both copies end up in one binary.
namespace mw::fusion::cuda {
namespace {

constexpr int kTileKeys = 32;  // keys per staged K/V tile

// Query row q (d floats) against the first n <= kTileKeys keys of the tile
// Ks/Vs (row-major, d floats per key): scores scaled by `scale`, the online
// softmax update of the row's running max m and sum l, and
// orow = orow * alpha + P V_tile, where alpha rescales the old accumulator to
// the new max.
__device__ inline void attend_tile_row(const float* q, const float* Ks, const float* Vs, int n, int D, float scale,
                                       float& m, float& l, float* orow) {
    float p[kTileKeys];
    float mt = -INFINITY;
    for (int j = 0; j < n; ++j) {
        float dot = 0;
        for (int c = 0; c < D; ++c) dot += q[c] * Ks[j * D + c];
        p[j] = dot * scale;
        mt = fmaxf(mt, p[j]);
    }
    const float mn = fmaxf(m, mt), alpha = expf(m - mn);
    float sum = 0;
    for (int j = 0; j < n; ++j) sum += p[j] = expf(p[j] - mn);
    m = mn;
    l = l * alpha + sum;
    for (int c = 0; c < D; ++c) {
        float acc = orow[c] * alpha;
        for (int j = 0; j < n; ++j) acc += p[j] * Vs[j * D + c];
        orow[c] = acc;
    }
}

}  // namespace
}  // namespace mw::fusion::cuda
