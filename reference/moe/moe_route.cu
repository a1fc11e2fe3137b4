// moe_route on the GPU, rung 0: one thread per token (kernels/moe/moe.cuh,
// route_topk): its E logits by dot products down the columns of W_r (the
// warp's 32 tokens read 32 rows of x: uncoalesced, but x is read once), then
// the host's routing rule itself (kernels/moe/route.hpp, compiled for the
// device). The router's grid keeps the logits exact, so the indices equal the
// CPU's and the fp64 oracle's bit for bit.
// Run: memwall run moe_route --backend cuda   (or --backend cuda-emu --quick)
#include "harness/cuda/device_problem.hpp"
#include "kernels/moe/moe.cuh"
#include "reference/moe/moe.hpp"

namespace {

mw::Instance prepare_route_cuda(mw::Problem& p) {
    const int T = int(p.shape["tokens"]), d = int(p.shape["d_model"]), E = int(p.shape["experts"]),
              k = int(p.shape["top_k"]);
    if (E > mw::moe::cuda::kMaxExpertsCuda)
        throw std::invalid_argument("moe_route on CUDA takes experts <= " +
                                    std::to_string(mw::moe::cuda::kMaxExpertsCuda) + ", got " + std::to_string(E));
    mw::Instance inst = mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& g) {
        mw::moe::cuda::route_topk(g.in<const float>("x"), g.in<const float>("w_router"), g.in<const float>("bias"),
                                  g.out<std::int32_t>("experts"), g.out<float>("weights"), T, d, E, k, g.stream);
    });
    inst.counters = [&p] { return mw::moe::route_counters(p); };
    return inst;
}

}  // namespace

MW_REGISTER_VARIANT(moe_route_naive_cuda, {
    .name = "naive", .op = "moe_route", .lever = "moe",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "one thread per token: E dot products, then the host's top-k and renormalization code on the device",
    .needs = {"gpu"},
    .prepare = prepare_route_cuda,
    .accepts = [](const mw::Shape& s) -> std::string {
        if (s["experts"] > mw::moe::cuda::kMaxExpertsCuda)
            return "experts > " + std::to_string(mw::moe::cuda::kMaxExpertsCuda) + " (a token's logits are kept in registers)";
        return s["top_k"] > mw::moe::kMaxTopK ? "top_k > " + std::to_string(mw::moe::kMaxTopK) : "";
    } });
