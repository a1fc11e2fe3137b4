// bias_gelu_ln, fusion lever, rung 0 (CPU): three ops as five separate passes.
//
// y[r] = LayerNorm(GELU(x[r] + bias)) * gamma + beta, fp32, rows x hidden.
// This rung is how an eager framework runs it: each op is its own loop over
// the whole activation and hands the next op a full-size temporary:
//   pass 1  t1 = x + bias           read x,  write t1
//   pass 2  t2 = GELU(t1)           read t1, write t2   (libm tanh, scalar)
//   pass 3  mean of each row        read t2
//   pass 4  variance of each row    read t2
//   pass 5  y = (t2 - mean) * rstd * gamma + beta     read t2, write y
// Bytes: 8 sweeps of rows*hidden*4 (+ the parameters), against 2 for the
// fused rung; at 2048 x 4096 each sweep is 32 MiB, far outside every cache,
// so each one costs a DRAM trip. FLOPs are the same in every rung. The
// temporaries (2 x 32 MiB) are allocated in prepare and show as
// peak_extra_bytes. Rows are split over OpenMP threads in every pass (threads
// are not the lesson here; bytes are).
//
// This file also defines the op: shapes, FLOPs, seeded inputs, fp64 oracle.
#include <cmath>
#include <memory>
#include <vector>

#include "harness/inputs.hpp"
#include "reference/fusion/fusion.hpp"

namespace mw::fusion {

void layernorm_ref(double* row, std::int64_t n, const float* gamma, const float* beta) {
    double mean = 0;
    for (std::int64_t j = 0; j < n; ++j) mean += row[j];
    mean /= double(n);
    double var = 0;
    for (std::int64_t j = 0; j < n; ++j) var += (row[j] - mean) * (row[j] - mean);
    var /= double(n);
    const double rstd = 1.0 / std::sqrt(var + double(kLnEps));
    for (std::int64_t j = 0; j < n; ++j) row[j] = (row[j] - mean) * rstd * gamma[j] + beta[j];
}

namespace {

Problem make_problem(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto R = s["rows"], H = s["hidden"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("x", DType::f32, R * H, {R, H}));
    p.inputs.push_back(Buffer::make("bias", DType::f32, H, {H}));
    p.inputs.push_back(Buffer::make("gamma", DType::f32, H, {H}));
    p.inputs.push_back(Buffer::make("beta", DType::f32, H, {H}));
    p.outputs.push_back(Buffer::make("y", DType::f32, R * H, {R, H}));
    fill_uniform(p.in("x"), seed, -3.0, 3.0);
    fill_uniform(p.in("bias"), seed, -1.0, 1.0);
    fill_uniform(p.in("gamma"), seed, 0.5, 1.5);
    fill_uniform(p.in("beta"), seed, -0.5, 0.5);
    return p;
}

std::vector<std::vector<double>> oracle(const Problem& p) {
    const auto R = p.shape["rows"], H = p.shape["hidden"];
    const float* x = p.in("x").as<float>();
    const float* b = p.in("bias").as<float>();
    std::vector<double> y(R * H);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < R; ++r) {
        double* row = y.data() + r * H;
        for (std::int64_t j = 0; j < H; ++j) row[j] = gelu_ref(double(x[r * H + j]) + double(b[j]));
        layernorm_ref(row, H, p.in("gamma").as<float>(), p.in("beta").as<float>());
    }
    return {std::move(y)};
}

Instance prepare_naive(Problem& p) {
    const long R = p.shape["rows"], H = p.shape["hidden"];
    const float* x = p.in("x").as<float>();
    const float* bias = p.in("bias").as<float>();
    const float* gamma = p.in("gamma").as<float>();
    const float* beta = p.in("beta").as<float>();
    float* y = p.out("y").as<float>();
    // The materialized intermediates, one full-size buffer per op boundary.
    auto t1 = std::make_shared<std::vector<float>>(R * H);
    auto t2 = std::make_shared<std::vector<float>>(R * H);
    auto stats = std::make_shared<std::vector<float>>(2 * R);  // mean, rstd per row
    Instance inst;
    inst.run = [=] {
        float* a = t1->data();
        float* g = t2->data();
        float* mean = stats->data();
        float* rstd = mean + R;
#pragma omp parallel for schedule(static)
        for (long r = 0; r < R; ++r)
            for (long j = 0; j < H; ++j) a[r * H + j] = x[r * H + j] + bias[j];
#pragma omp parallel for schedule(static)
        for (long i = 0; i < R * H; ++i)
            g[i] = 0.5f * a[i] * (1.0f + std::tanh(0.7978845608f * (a[i] + 0.044715f * a[i] * a[i] * a[i])));
#pragma omp parallel for schedule(static)
        for (long r = 0; r < R; ++r) {
            float s = 0;
            for (long j = 0; j < H; ++j) s += g[r * H + j];
            mean[r] = s / float(H);
        }
#pragma omp parallel for schedule(static)
        for (long r = 0; r < R; ++r) {
            float s = 0;
            for (long j = 0; j < H; ++j) s += (g[r * H + j] - mean[r]) * (g[r * H + j] - mean[r]);
            rstd[r] = 1.0f / std::sqrt(s / float(H) + kLnEps);
        }
#pragma omp parallel for schedule(static)
        for (long r = 0; r < R; ++r)
            for (long j = 0; j < H; ++j) y[r * H + j] = (g[r * H + j] - mean[r]) * rstd[r] * gamma[j] + beta[j];
    };
    return inst;
}

}  // namespace

// Five passes: x->t1, t1->t2, t2 (mean), t2 (var), t2->y: 8 sweeps.
double bias_gelu_ln_bytes_unfused(const Shape& s, DType) {
    const double n = double(s["rows"]) * s["hidden"];
    return 4.0 * (8.0 * n + 3.0 * s["hidden"]);
}

}  // namespace mw::fusion

MW_REGISTER_OP(bias_gelu_ln, {
    .name = "bias_gelu_ln",
    .lever = "fusion",
    .summary = "y = LayerNorm(GELU(x + bias)) * gamma + beta along rows (tanh-GELU), fp32",
    .axes = {"rows", "hidden"},
    .default_shape = {{{"rows", 2048}, {"hidden", 4096}}},
    .quick_shape = {{{"rows", 512}, {"hidden", 1024}}},
    .dtypes = {mw::DType::f32},
    // Per element: bias add 1, GELU ~9 (cube, polynomial, exp, divide),
    // mean 1, variance 2, normalize + affine 4.
    .flops = [](const mw::Shape& s) { return 17.0 * double(s["rows"]) * s["hidden"]; },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * (2.0 * double(s["rows"]) * s["hidden"] + 3.0 * s["hidden"]);
    },
    .make_problem = mw::fusion::make_problem,
    .oracle = mw::fusion::oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["hidden"]); },
              .tolerance_scale = 2.0, .baseline_factor = 2.0},
});

MW_REGISTER_VARIANT(bias_gelu_ln_naive_cpu, {
    .name = "naive", .op = "bias_gelu_ln", .lever = "fusion",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "bias, GELU and LayerNorm as five separate passes over full-size temporaries: "
                 "8 sweeps of the activation through DRAM",
    .bytes = mw::fusion::bias_gelu_ln_bytes_unfused,
    .prepare = mw::fusion::prepare_naive });
