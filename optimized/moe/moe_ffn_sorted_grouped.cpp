// moe_ffn, rung 2: sorted_grouped — sort the tokens by expert, one GEMM per
// expert on a contiguous block, scatter back with the weights (MegaBlocks'
// idea on a CPU).
//
// Changes from rung 1 (gather): the T k (token, expert) assignments are
// counting-sorted by expert (kernels/moe/dispatch.hpp: two passes over T k
// integers), the tokens' rows copied into that order (T k d floats), and each
// expert runs once, as three packed GEMMs on its block of about T k / E rows,
// so its weights are read once per block, not once per token. The combine
// adds each token's k results, weighted, to its residual. What it should
// buy: the useful FLOPs (k/E of dense_masked's) at the packed GEMM's rate,
// i.e. up to E/k = 4x over dense_masked at E = 8, k = 2, less the permute and
// combine (about 4 T k d floats moved) and the smaller GEMMs' lower rate.
// Each row's arithmetic is dense_masked's (the same GEMM kernel over the
// same K order, the slots combined in ascending expert order with one fma
// each), so the two agree bit for bit.
#include <algorithm>

#include "kernels/moe/dispatch.hpp"
#include "reference/moe/moe.hpp"

namespace mw::moe {

Dispatch sorted_grouped_ffn(const float* x, const std::int32_t* experts, const float* weights, const Experts& w,
                            long T, int k, int E, long capacity, float* y, GroupedBuffers& buf) {
    const long d = w.d, f = w.d_ff;
    Dispatch disp = sort_by_expert(experts, T, k, E, capacity);
    const long rows = disp.rows();
    long most = 0;
    for (int e = 0; e < E; ++e) most = std::max<long>(most, disp.offsets[std::size_t(e) + 1] - disp.offsets[std::size_t(e)]);
    buf.xs.resize(std::size_t(std::max(1L, rows) * d));
    buf.ys.resize(std::size_t(std::max(1L, rows) * d));
    buf.scratch.resize(std::size_t(std::max(1L, 3 * most * f)));
    permute_rows(x, d, disp.token.data(), rows, buf.xs.data());
    for (int e = 0; e < E; ++e) {
        const long r0 = disp.offsets[std::size_t(e)], n = disp.offsets[std::size_t(e) + 1] - r0;
        expert_ffn(w, e, buf.xs.data() + r0 * d, n, buf.ys.data() + r0 * d, buf.scratch.data());
    }
    combine(x, buf.ys.data(), disp.row_of.data(), experts, weights, T, k, d, y);
    return disp;
}

namespace {

Instance prepare_sorted_grouped(Problem& p) {
    const auto [T, d, f, E, k, x, ex, wt, w, y] = ffn_args(p);
    auto buf = std::make_shared<GroupedBuffers>();
    Instance inst;
    inst.run = [=] { sorted_grouped_ffn(x, ex, wt, w, T, k, E, -1, y, *buf); };
    inst.counters = [&p] { return ffn_counters(p, -1); };
    return inst;
}

}  // namespace
}  // namespace mw::moe

MW_REGISTER_VARIANT(moe_ffn_sorted_grouped_cpu, {
    .name = "sorted_grouped", .op = "moe_ffn", .lever = "moe",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 2,
    .rationale = "counting sort of the assignments by expert, one packed GEMM per expert on its contiguous "
                 "block, weighted scatter back: the useful FLOPs at GEMM speed",
    .bytes = [](const mw::Shape& s, mw::DType) {
        // Weights once; the permuted rows in and out (4 T k d floats moved);
        // a, b, h of T k rows (24 T k d_ff).
        return mw::moe::ffn_weight_bytes(s) + mw::moe::ffn_activation_bytes(s) +
               16.0 * double(s["tokens"]) * s["top_k"] * s["d_model"] + 24.0 * double(s["tokens"]) * s["top_k"] * s["d_ff"];
    },
    .prepare = mw::moe::prepare_sorted_grouped,
    .identical_to = "dense_masked" });
