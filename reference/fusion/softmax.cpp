// softmax, fusion lever, rung 0 (CPU): three sweeps over the matrix.
//
// y[r][j] = exp(x[r][j] - max_r) / sum_j exp(x[r][j] - max_r), fp32,
// rows x cols. This rung runs softmax the way three separate kernels would:
//   sweep 1  max of every row                  read x
//   sweep 2  sum of exp(x - max) of every row  read x
//   sweep 3  y = exp(x - max) / sum            read x, write y (streaming stores)
// Passes over memory: 3 reads + 1 write of rows*cols*4 bytes (4 x 1 GiB at
// the default 32768 x 8192: x alone is over 3x a 300 MiB L3, so every sweep
// is a DRAM trip; at 4096 rows x and y would fit such an L3 and the sweeps
// would measure the cache). The per-row statistics are 2*rows floats.
// The arithmetic already uses the SIMD exp of kernels/fusion/simd.hpp (the
// same code as the online rungs), so the ladder's steps measure passes over
// memory, not vector math.
//
// This file also defines the op: shapes, FLOPs, seeded inputs, fp64 oracle.
#include <omp.h>

#include <memory>
#include <vector>

#include "harness/inputs.hpp"
#include "kernels/fusion/softmax_rows.hpp"
#include "reference/fusion/fusion.hpp"

namespace mw::fusion {
namespace {

Problem make_problem(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto R = s["rows"], C = s["cols"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("x", DType::f32, R * C, {R, C}));
    p.outputs.push_back(Buffer::make("y", DType::f32, R * C, {R, C}));
    fill_normal(p.in("x"), seed, 2.0);
    return p;
}

std::vector<std::vector<double>> oracle(const Problem& p) {
    const auto R = p.shape["rows"], C = p.shape["cols"];
    const float* x = p.in("x").as<float>();
    std::vector<double> y(R * C);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < R; ++r) {
        double m = -INFINITY, s = 0;
        for (std::int64_t j = 0; j < C; ++j) m = std::max(m, double(x[r * C + j]));
        for (std::int64_t j = 0; j < C; ++j) s += y[r * C + j] = std::exp(double(x[r * C + j]) - m);
        for (std::int64_t j = 0; j < C; ++j) y[r * C + j] /= s;
    }
    return {std::move(y)};
}

template <class V> MW_SIMD_INLINE void sweep(int k, const float* x, float* y, float* stats, long R, long C, long r) {
    float* m = stats;
    float* s = stats + R;
    if (k == 1) m[r] = softmax::row_max<V>(x + r * C, C);
    else if (k == 2) s[r] = softmax::row_sum_exp<V>(x + r * C, C, m[r]);
    else softmax::row_normalize<V>(x + r * C, y + r * C, C, m[r], 1.0f / s[r]);
    if (k == 3) softmax::stream_fence();
}

Instance prepare_three_pass(Problem& p) {
    const long R = p.shape["rows"], C = p.shape["cols"];
    const float* x = p.in("x").as<float>();
    float* y = p.out("y").as<float>();
    auto stats = std::make_shared<std::vector<float>>(2 * R);
    auto fn = isa::pick_kernel<sweep<simd::f16>, sweep<simd::f8>>();
    Instance inst;
    inst.run = [=] {
        for (int k = 1; k <= 3; ++k) {
#pragma omp parallel for schedule(static)
            for (long r = 0; r < R; ++r) fn(k, x, y, stats->data(), R, C, r);
        }
    };
    return inst;
}

}  // namespace
}  // namespace mw::fusion

MW_REGISTER_OP(softmax, {
    .name = "softmax",
    .lever = "fusion",
    .summary = "y = softmax(x) along each row, fp32",
    .axes = {"rows", "cols"},
    .default_shape = {{{"rows", 32768}, {"cols", 8192}}},
    .quick_shape = {{{"rows", 512}, {"cols", 2048}}},
    .dtypes = {mw::DType::f32},
    // max 1, subtract 1, exp ~10, sum 1, scale 1 per element.
    .flops = [](const mw::Shape& s) { return 14.0 * double(s["rows"]) * s["cols"]; },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) { return 8.0 * double(s["rows"]) * s["cols"]; },
    .make_problem = mw::fusion::make_problem,
    .oracle = mw::fusion::oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["cols"]); }, .baseline_factor = 2.0},
});

MW_REGISTER_VARIANT(softmax_three_pass_cpu, {
    .name = "three_pass", .op = "softmax", .lever = "fusion",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "max, sum of exp and normalize as three sweeps over the matrix: 3 reads + 1 write through DRAM",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return 16.0 * double(s["rows"]) * s["cols"]; },
    .prepare = mw::fusion::prepare_three_pass });
