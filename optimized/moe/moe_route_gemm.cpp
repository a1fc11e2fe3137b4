// moe_route, rung 1: the router's logits as one GEMM.
//
// Changes from rung 0: the T x E logits come from the vectorization lever's
// packed GEMM (gemm_ex: x read in cache blocks, W_r packed once, E columns
// padded to the register tile), not from T E strided dot products; the
// softmax and the selection are one pass per token over E values
// (kernels/moe/route.hpp). The
// logits are exact on the router's grid (reference/moe/moe.hpp), so the
// summation order the GEMM picks cannot change an index. What it should buy:
// the naive rung's strided reads of W_r and its scalar dot products were the
// cost; this is bound by reading x once (4 T d bytes).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/moe/route.hpp"
#include "kernels/vectorization/gemm_cpu.hpp"
#include "reference/moe/moe.hpp"

namespace mw::moe {
namespace {

Instance prepare_gemm(Problem& p) {
    const long T = p.shape["tokens"], d = p.shape["d_model"];
    const int E = int(p.shape["experts"]), k = int(p.shape["top_k"]);
    const float *x = p.in("x").as<float>(), *W = p.in("w_router").as<float>(), *bias = p.in("bias").as<float>();
    std::int32_t* ex = p.out("experts").as<std::int32_t>();
    float* w = p.out("weights").as<float>();
    auto logits = std::make_shared<std::vector<float>>(std::size_t(T * E));
    Instance inst;
    inst.run = [=] {
        float* l = logits->data();
        gemm::gemm_ex(gemm::View::rows(x, d), gemm::View::rows(W, E), l, E, int(T), E, int(d), false);
#pragma omp parallel for schedule(static)
        for (long t = 0; t < T; ++t) {
            float* lt = l + t * E;
            for (int e = 0; e < E; ++e) lt[e] += bias[e];
            route_token(lt, E, k, ex + t * k, w + t * k);
        }
    };
    inst.counters = [&p] { return route_counters(p); };
    return inst;
}

}  // namespace
}  // namespace mw::moe

MW_REGISTER_VARIANT(moe_route_gemm_cpu, {
    .name = "gemm", .op = "moe_route", .lever = "moe",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "the logits as one packed GEMM (W_r packed once, x read once), then one pass per token "
                 "for the softmax and an insertion top-k",
    .prepare = mw::moe::prepare_gemm });
