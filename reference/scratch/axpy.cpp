// axpy, scratch lever, rung 0 (CPU): out = 2 x + y, one scalar loop.
// This file also defines the op: shapes, seeded inputs, fp64 oracle.
#include "harness/inputs.hpp"
#include "reference/scratch/axpy.hpp"

namespace mw::scratch {
namespace {

Problem make_problem(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto n = s["n"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("x", DType::f32, n, {n}));
    p.inputs.push_back(Buffer::make("y", DType::f32, n, {n}));
    p.outputs.push_back(Buffer::make("out", DType::f32, n, {n}));
    fill_uniform(p.in("x"), seed, -1.0, 1.0);
    fill_uniform(p.in("y"), seed + 1, -1.0, 1.0);
    return p;
}

std::vector<std::vector<double>> oracle(const Problem& p) {
    const auto n = p.shape["n"];
    const float *x = p.in("x").as<float>(), *y = p.in("y").as<float>();
    std::vector<double> out(n);
    for (std::int64_t i = 0; i < n; ++i) out[i] = 2.0 * x[i] + y[i];
    return {std::move(out)};
}

Instance prepare_naive(Problem& p) {
    const long n = p.shape["n"];
    const float *x = p.in("x").as<float>(), *y = p.in("y").as<float>();
    float* out = p.out("out").as<float>();
    Instance inst;
    inst.run = [=] {
        for (long i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
    };
    return inst;
}

}  // namespace
}  // namespace mw::scratch

MW_REGISTER_OP(axpy, {
    .name = "axpy",
    .lever = "scratch",
    .summary = "out[n] = 2 x[n] + y[n], fp32",
    .axes = {"n"},
    .default_shape = {{{"n", 1 << 24}}},
    .quick_shape = {{{"n", 1 << 20}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return 2.0 * double(s["n"]); },
    .compulsory_bytes = mw::scratch::axpy_bytes,
    .make_problem = mw::scratch::make_problem,
    .oracle = mw::scratch::oracle,
});

MW_REGISTER_VARIANT(axpy_naive_cpu, {
    .name = "naive", .op = "axpy", .lever = "scratch",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "one scalar loop on one core",
    .bytes = mw::scratch::axpy_bytes,
    .prepare = mw::scratch::prepare_naive });
