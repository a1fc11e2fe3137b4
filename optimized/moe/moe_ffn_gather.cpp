// moe_ffn, rung 1: gather — each token runs only its own k experts.
//
// Changes from rung 0 (dense_masked): no masked work. Per token (tokens dealt
// to the threads), for each of its k experts, the expert's FFN on that one
// row: three vector-matrix products (row-major weights read as axpys, one
// weight row at a time). What it should buy: the useful FLOPs, k/E of rung
// 0's. What it costs: a product of one row by a d x d_ff matrix is a GEMV,
// bound by reading the matrix, and every token reads its experts' 3 d d_ff
// weights again (12 T k d d_ff bytes instead of 12 E d d_ff): an intensity
// of 0.5 FLOP/byte, where rung 0's GEMMs had hundreds. So gather is slower
// than the dense layer it saves FLOPs over unless T is tiny (decode); rung 2
// batches each expert's tokens to get the GEMMs back.
#include <cmath>
#include <vector>

#include "reference/moe/moe.hpp"

namespace mw::moe {
namespace {

Instance prepare_gather(Problem& p) {
    const long T = p.shape["tokens"], d = p.shape["d_model"], f = p.shape["d_ff"];
    const int k = int(p.shape["top_k"]);
    const float* x = p.in("x").as<float>();
    const std::int32_t* ex = p.in("experts").as<std::int32_t>();
    const float* wt = p.in("weights").as<float>();
    const float *G = p.in("w_gate").as<float>(), *U = p.in("w_up").as<float>(), *D = p.in("w_down").as<float>();
    float* y = p.out("y").as<float>();
    Instance inst;
    inst.run = [=] {
#pragma omp parallel
        {
            std::vector<float> a(static_cast<std::size_t>(f)), b(static_cast<std::size_t>(f)), o(static_cast<std::size_t>(d));
#pragma omp for schedule(dynamic, 4)
            for (long t = 0; t < T; ++t) {
                float* yt = y + t * d;
                for (long c = 0; c < d; ++c) yt[c] = x[t * d + c];
                for (int j = 0; j < k; ++j) {
                    const long e = ex[t * k + j];
                    std::fill(a.begin(), a.end(), 0.0f);
                    std::fill(b.begin(), b.end(), 0.0f);
                    for (long i = 0; i < d; ++i) {
                        const float xi = x[t * d + i];
                        const float *g = G + (e * d + i) * f, *u = U + (e * d + i) * f;
                        for (long c = 0; c < f; ++c) a[std::size_t(c)] += xi * g[c], b[std::size_t(c)] += xi * u[c];
                    }
                    for (long c = 0; c < f; ++c) a[std::size_t(c)] = a[std::size_t(c)] / (1.0f + std::exp(-a[std::size_t(c)])) * b[std::size_t(c)];
                    std::fill(o.begin(), o.end(), 0.0f);
                    for (long c = 0; c < f; ++c) {
                        const float h = a[std::size_t(c)];
                        const float* dw = D + (e * f + c) * d;
                        for (long i = 0; i < d; ++i) o[std::size_t(i)] += h * dw[i];
                    }
                    const float w = wt[t * k + j];
                    for (long c = 0; c < d; ++c) yt[c] += w * o[std::size_t(c)];
                }
            }
        }
    };
    inst.counters = [&p] { return ffn_counters(p, -1); };
    return inst;
}

}  // namespace
}  // namespace mw::moe

MW_REGISTER_VARIANT(moe_ffn_gather_cpu, {
    .name = "gather", .op = "moe_ffn", .lever = "moe",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "per token, only its k experts, as vector-matrix products: the useful FLOPs, but every "
                 "token streams its experts' weights (a GEMV's intensity)",
    .bytes = [](const mw::Shape& s, mw::DType) {
        return 12.0 * double(s["tokens"]) * s["top_k"] * s["d_model"] * s["d_ff"] + mw::moe::ffn_activation_bytes(s);
    },
    .prepare = mw::moe::prepare_gather });
