// The sparse dispatch of a mixture-of-experts layer on the CPU: what the
// sorted_grouped, capacity and expert_parallel rungs of moe_ffn share
// (reference/moe/moe.hpp states the op and the drop rule).
//
//   sort_by_expert   counting sort of the T k assignments by expert, slot-major
//                    (all first choices in token order, then all second
//                    choices, ...), each expert truncated to its capacity: two
//                    passes over T k integers, no comparison sort
//   permute_rows     xs[r] = x[token[r]]: the gather that makes each expert's
//                    tokens one contiguous block (T k d floats moved)
//   expert_ffn       one expert on a contiguous block: two GEMMs into d_ff,
//                    the model's SwiGLU, one GEMM back (gemm_ex, the
//                    vectorization lever's packed GEMM, and
//                    kernels/model/layers_cpu.hpp's swiglu_forward)
//   combine          y[t] = x[t] + sum_j w[t][j] ys[row of (t, j)], the kept
//                    slots taken in ascending expert order, one fma per
//                    element: the same arithmetic in the same order as the
//                    dense_masked rung's masked sum, so the two agree bit for bit
#pragma once

#include <cstdint>
#include <vector>

namespace mw::moe {

struct Dispatch {
    std::vector<std::int64_t> offsets;    // E + 1: expert e's rows are [offsets[e], offsets[e + 1])
    std::vector<std::int32_t> token;      // row -> token
    std::vector<std::int64_t> row_of;     // assignment t k + j -> row, or -1 when dropped
    std::int64_t dropped = 0;             // assignments over capacity
    std::int64_t rows() const { return offsets.back(); }
};

// capacity < 0: unbounded.
Dispatch sort_by_expert(const std::int32_t* experts, long T, int k, int E, long capacity);

void permute_rows(const float* x, long d, const std::int32_t* token, long rows, float* xs);

struct Experts {
    const float* gate;  // [E][d][d_ff]
    const float* up;    // [E][d][d_ff]
    const float* down;  // [E][d_ff][d]
    long d, d_ff;
};

// moe_ffn's shape and buffers as the rungs use them (reference/moe/moe.hpp's
// ffn_args reads them from a problem).
struct FfnArgs {
    long T, d, f;
    int E, k;
    const float* x;
    const std::int32_t* experts;
    const float* weights;
    Experts w;
    float* y;
};
// Y[rows][d] = FFN_e(X[rows][d]); scratch holds 3 rows d_ff floats. gemm_ex
// uses every OpenMP thread; `serial` runs on the calling thread only.
void expert_ffn(const Experts& w, int e, const float* X, long rows, float* Y, float* scratch, bool serial = false);

// `row_of` and `ys` as sort_by_expert and the expert blocks left them.
void combine(const float* x, const float* ys, const std::int64_t* row_of, const std::int32_t* experts,
             const float* weights, long T, int k, long d, float* y);

}  // namespace mw::moe

namespace mw::moe {

// The whole sorted-grouped layer (defined in optimized/moe/moe_ffn_sorted_grouped.cpp,
// rung 2, whose idea it is; the capacity rung calls it with a capacity):
// sort, permute, one expert_ffn per expert block, combine. The buffers live
// across calls; returns the dispatch of this call (its drops, its loads).
struct GroupedBuffers {
    std::vector<float> xs, ys, scratch;
};
Dispatch sorted_grouped_ffn(const float* x, const std::int32_t* experts, const float* weights, const Experts& w,
                            long T, int k, int E, long capacity, float* y, GroupedBuffers& buf);

}  // namespace mw::moe
