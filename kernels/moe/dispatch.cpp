#include "kernels/moe/dispatch.hpp"

#include <cmath>
#include <cstring>

#include "kernels/model/layers_cpu.hpp"
#include "kernels/vectorization/gemm_cpu.hpp"

namespace mw::moe {

Dispatch sort_by_expert(const std::int32_t* experts, long T, int k, int E, long capacity) {
    Dispatch d;
    std::vector<std::int64_t> count(static_cast<std::size_t>(E), 0);
    d.row_of.assign(std::size_t(T * k), -1);
    // Pass 1: each expert's load, capped by its capacity.
    for (int j = 0; j < k; ++j)
        for (long t = 0; t < T; ++t) {
            auto& c = count[std::size_t(experts[t * k + j])];
            if (capacity < 0 || c < capacity) ++c;
            else ++d.dropped;
        }
    d.offsets.assign(std::size_t(E) + 1, 0);
    for (int e = 0; e < E; ++e) d.offsets[std::size_t(e) + 1] = d.offsets[std::size_t(e)] + count[std::size_t(e)];
    d.token.resize(std::size_t(d.offsets.back()));
    // Pass 2: place each kept assignment at its expert's next row, in the
    // same slot-major order, so the first `capacity` are the ones kept.
    std::vector<std::int64_t> next(d.offsets.begin(), d.offsets.end() - 1);
    for (int j = 0; j < k; ++j)
        for (long t = 0; t < T; ++t) {
            const auto e = std::size_t(experts[t * k + j]);
            if (next[e] == d.offsets[e + 1]) continue;  // full: dropped
            d.token[std::size_t(next[e])] = std::int32_t(t);
            d.row_of[std::size_t(t * k + j)] = next[e]++;
        }
    return d;
}

void permute_rows(const float* x, long d, const std::int32_t* token, long rows, float* xs) {
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; ++r) std::memcpy(xs + r * d, x + long(token[r]) * d, sizeof(float) * std::size_t(d));
}

void expert_ffn(const Experts& w, int e, const float* X, long rows, float* Y, float* scratch, bool serial) {
    if (rows == 0) return;
    const long d = w.d, f = w.d_ff;
    float *a = scratch, *b = scratch + rows * f, *h = scratch + 2 * rows * f;
    const float* gate = w.gate + e * d * f;
    const float* up = w.up + e * d * f;
    const float* down = w.down + e * f * d;
    auto gemm = serial ? gemm::gemm_ex_serial : gemm::gemm_ex;
    using gemm::View;
    gemm(View::rows(X, d), View::rows(gate, f), a, f, int(rows), int(f), int(d), false);
    gemm(View::rows(X, d), View::rows(up, f), b, f, int(rows), int(f), int(d), false);
    // Row by row: the kernel's vector body and scalar tail then fall on the
    // same columns whatever the block's size, so a row's result does not
    // depend on which block it sits in (dense_masked's T rows or an expert's).
#pragma omp parallel for schedule(static) if (!serial && rows * f > 16384)
    for (long r = 0; r < rows; ++r) model::cpu::swiglu_forward(a + r * f, b + r * f, h + r * f, f);
    gemm(View::rows(h, f), View::rows(down, d), Y, d, int(rows), int(d), int(f), false);
}

void combine(const float* x, const float* ys, const std::int64_t* row_of, const std::int32_t* experts,
             const float* weights, long T, int k, long d, float* y) {
#pragma omp parallel for schedule(static)
    for (long t = 0; t < T; ++t) {
        float* yt = y + t * d;
        std::memcpy(yt, x + t * d, sizeof(float) * std::size_t(d));
        // The token's slots in ascending expert order (k is small: insertion sort).
        int order[16];
        for (int j = 0; j < k; ++j) {
            int i = j;
            while (i > 0 && experts[t * k + order[i - 1]] > experts[t * k + j]) order[i] = order[i - 1], --i;
            order[i] = j;
        }
        for (int i = 0; i < k; ++i) {
            const int j = order[i];
            const std::int64_t r = row_of[t * k + j];
            if (r < 0) continue;  // dropped: adds nothing
            const float wj = weights[t * k + j];
            const float* yr = ys + r * d;
            for (long c = 0; c < d; ++c) yt[c] = std::fma(wj, yr[c], yt[c]);
        }
    }
}

}  // namespace mw::moe
