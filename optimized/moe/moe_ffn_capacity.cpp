// moe_ffn, rung 3: capacity — rung 2 with a fixed budget of rows per expert.
//
// Changes from rung 2: expert e takes at most C = ceil(capacity_pct/100 T k
// / E) assignments, first choices first (reference/moe/moe.hpp states the
// rule); the rest are dropped and counted, and a token whose every choice is
// dropped passes through the residual. What it buys: static shapes (every
// expert's block is at most C rows, so buffers, GEMM shapes and, across
// devices, message sizes are known before routing) and a bounded step time
// under a skewed router: the busiest expert does at most C rows instead of
// most of the tokens. What it costs: the dropped tokens' expert outputs. So
// its contract oracle is the layer with the same drop rule in fp64, and the
// error against the dropless layer is recorded beside it (error_vs_exact).
// capacity_pct = 0 is unbounded: rung 2 exactly.
#include "kernels/moe/dispatch.hpp"
#include "reference/moe/moe.hpp"

namespace mw::moe {
namespace {

Instance prepare_capacity(Problem& p) {
    const auto [T, d, f, E, k, x, ex, wt, w, y] = ffn_args(p);
    const long C = expert_capacity(p.shape);
    auto buf = std::make_shared<GroupedBuffers>();
    auto dropped = std::make_shared<std::int64_t>(0);
    Instance inst;
    inst.run = [=] { *dropped = sorted_grouped_ffn(x, ex, wt, w, T, k, E, C, y, *buf).dropped; };
    inst.counters = [&p, C, dropped] {
        auto c = ffn_counters(p, C);  // the fp64 rule's counts
        c["dropped_assignments_rule"] = c["dropped_assignments"];
        c["dropped_assignments"] = double(*dropped);  // this variant's own
        return c;
    };
    return inst;
}

std::vector<std::vector<double>> capacity_contract(const Problem& p) {
    const auto& s = p.shape;
    return {ffn_exact(p, kept_assignments(p.in("experts").as<std::int32_t>(), s["tokens"], int(s["top_k"]),
                                          int(s["experts"]), expert_capacity(s)))};
}

}  // namespace
}  // namespace mw::moe

MW_REGISTER_VARIANT(moe_ffn_capacity_cpu, {
    .name = "capacity", .op = "moe_ffn", .lever = "moe",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 3,
    .rationale = "at most capacity_pct/100 T k / E rows per expert, first choices first; overflow dropped "
                 "and counted: bounded blocks and step time, at the price of the dropped tokens",
    .bytes = [](const mw::Shape& s, mw::DType) {
        const double kept = std::min<double>(double(s["tokens"]) * s["top_k"],
            s["capacity_pct"] > 0 ? double(s["experts"]) * double(mw::moe::expert_capacity(s)) : 1e300);
        return mw::moe::ffn_weight_bytes(s) + mw::moe::ffn_activation_bytes(s) + 16.0 * kept * s["d_model"] +
               24.0 * kept * s["d_ff"];
    },
    .executed_flops = [](const mw::Shape& s) {
        const double kept = std::min<double>(double(s["tokens"]) * s["top_k"],
            s["capacity_pct"] > 0 ? double(s["experts"]) * double(mw::moe::expert_capacity(s)) : 1e300);
        return 6.0 * kept * s["d_model"] * s["d_ff"];
    },
    .prepare = mw::moe::prepare_capacity,
    .contract_oracle = mw::moe::capacity_contract });
