// launch_chain, fusion lever, rung 0 (CPU): a chain of tiny element-wise ops,
// dispatched one by one.
//
// y = f[ops-1](...f[1](f[0](x))), n elements, fp32; the ops cycle through
// four cheap element-wise maps (fusion.hpp, chain_op), ~2 FLOPs each. This
// rung is the CPU analog of launching one small kernel per op: the chain is
// a list of type-erased ops (std::function), and each op is "launched" on
// its own — a call through the dispatcher, a fresh temporary std::vector for
// its output, and its own OpenMP parallel region (a fork and a join of the
// thread team, like a kernel launch and its completion).
// Cost: per op a heap allocation, a fork/join and a full sweep of n floats
// in and out (256 KiB each at n = 65536: L2-resident, so the sweeps are
// cheap and the fixed per-op costs dominate). Bytes: 8n per op.
//
// This file also defines the op: shapes, FLOPs, seeded inputs, fp64 oracle.
#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "harness/inputs.hpp"
#include "reference/fusion/fusion.hpp"

namespace mw::fusion {
namespace {

Problem make_problem(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto n = s["n"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("x", DType::f32, n, {n}));
    p.outputs.push_back(Buffer::make("y", DType::f32, n, {n}));
    fill_uniform(p.in("x"), seed, -1.0, 1.0);
    return p;
}

std::vector<std::vector<double>> oracle(const Problem& p) {
    const auto n = p.shape["n"];
    const int ops = int(p.shape["ops"]);
    const float* x = p.in("x").as<float>();
    std::vector<double> y(n);
    for (std::int64_t i = 0; i < n; ++i) {
        double v = x[i];
        for (int k = 0; k < ops; ++k) v = chain_op(k, v);
        y[i] = v;
    }
    return {std::move(y)};
}

// One op of the chain as the dispatcher sees it: input in, new buffer out.
using ChainOp = std::function<std::vector<float>(const std::vector<float>&)>;

template <int K> ChainOp make_op() {
    return [](const std::vector<float>& in) {
        std::vector<float> out(in.size());
        const long n = long(in.size());
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; ++i) out[i] = chain_op(K, in[i]);
        return out;
    };
}

Instance prepare_dispatch(Problem& p) {
    const long n = p.shape["n"];
    const int ops = int(p.shape["ops"]);
    const float* x = p.in("x").as<float>();
    float* y = p.out("y").as<float>();
    const ChainOp kinds[4] = {make_op<0>(), make_op<1>(), make_op<2>(), make_op<3>()};
    auto chain = std::make_shared<std::vector<ChainOp>>();
    for (int k = 0; k < ops; ++k) chain->push_back(kinds[k % 4]);
    Instance inst;
    inst.run = [=] {
        std::vector<float> v(x, x + n);
        for (const ChainOp& op : *chain) v = op(v);
        std::copy(v.begin(), v.end(), y);
    };
    return inst;
}

}  // namespace
}  // namespace mw::fusion

MW_REGISTER_OP(launch_chain, {
    .name = "launch_chain",
    .lever = "fusion",
    .summary = "a chain of `ops` tiny element-wise maps over n floats (launch/dispatch overhead)",
    .axes = {"n", "ops"},
    .default_shape = {{{"n", 65536}, {"ops", 16}}},
    .quick_shape = {{{"n", 16384}, {"ops", 16}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return double(mw::fusion::kChainFlopsPerOp) * s["n"] * s["ops"]; },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) { return 8.0 * double(s["n"]); },
    .make_problem = mw::fusion::make_problem,
    .oracle = mw::fusion::oracle,
    // Each op adds a rounding; the chain is "ops" long.
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["ops"]); }, .baseline_factor = 2.0},
});

MW_REGISTER_VARIANT(launch_chain_dispatch_cpu, {
    .name = "per_op_dispatch", .op = "launch_chain", .lever = "fusion",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "each op called through a std::function with its own parallel region and a fresh "
                 "temporary vector: per-op fixed costs dominate tiny ops",
    .bytes = [](const mw::Shape& s, mw::DType) { return 8.0 * double(s["n"]) * s["ops"]; },
    .prepare = mw::fusion::prepare_dispatch });
