// ln_gelu, fusion lever, rung 0 (CPU): a GEMM, then its epilogue as passes.
//
// Y = LayerNorm(GELU(X W + b)) * gamma + beta; X: m x k, W: k x n, Y: m x n,
// LayerNorm along n; fp32. The shape of a transformer MLP's up-projection
// followed by its activation and a norm.
// This rung runs it as four ops: the project's best own GEMM (the
// vectorization lever's rung 4, gemm_threads: AVX-512 tiles on packed B, A read in place, on
// all cores) into a full m x n temporary C, then bias_gelu_ln's rung-1
// passes over C (two more m x n temporaries, 8 sweeps).
// Bytes: the GEMM's traffic plus 8 sweeps of m*n*4 for the epilogue (and the
// GEMM's write of C). The GEMM is ~2mnk FLOPs, the epilogue ~17mn: at the
// default 4096 x 1024 x 1024 the GEMM is the larger part of the time,
// which is the point of this op — fusing the epilogue can save at most
// the epilogue's share.
//
// This file also defines the op: shapes, FLOPs, seeded inputs, fp64 oracle.
#include <memory>
#include <vector>

#include "harness/inputs.hpp"
#include "kernels/fusion/bias_gelu_ln.hpp"
#include "kernels/vectorization/gemm_cpu.hpp"
#include "reference/fusion/fusion.hpp"
#include "reference/vectorization/gemm.hpp"

namespace mw::fusion {
namespace {

Problem make_problem(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto M = s["m"], N = s["n"], K = s["k"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("X", DType::f32, M * K, {M, K}));
    p.inputs.push_back(Buffer::make("W", DType::f32, K * N, {K, N}));
    p.inputs.push_back(Buffer::make("bias", DType::f32, N, {N}));
    p.inputs.push_back(Buffer::make("gamma", DType::f32, N, {N}));
    p.inputs.push_back(Buffer::make("beta", DType::f32, N, {N}));
    p.outputs.push_back(Buffer::make("Y", DType::f32, M * N, {M, N}));
    fill_uniform(p.in("X"), seed, -1.0, 1.0);
    // Scaled so that X W has unit-order entries whatever k is.
    fill_uniform(p.in("W"), seed, -1.7 / std::sqrt(double(K)), 1.7 / std::sqrt(double(K)));
    fill_uniform(p.in("bias"), seed, -1.0, 1.0);
    fill_uniform(p.in("gamma"), seed, 0.5, 1.5);
    fill_uniform(p.in("beta"), seed, -0.5, 0.5);
    return p;
}

std::vector<std::vector<double>> oracle(const Problem& p) {
    const auto M = p.shape["m"], N = p.shape["n"], K = p.shape["k"];
    const float* X = p.in("X").as<float>();
    const float* W = p.in("W").as<float>();
    const float* b = p.in("bias").as<float>();
    std::vector<double> Y(M * N, 0.0);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < M; ++i) {
        double* y = Y.data() + i * N;
        for (std::int64_t kk = 0; kk < K; ++kk) {
            const double a = X[i * K + kk];
            for (std::int64_t j = 0; j < N; ++j) y[j] += a * double(W[kk * N + j]);
        }
        for (std::int64_t j = 0; j < N; ++j) y[j] = gelu_ref(y[j] + double(b[j]));
        layernorm_ref(y, N, p.in("gamma").as<float>(), p.in("beta").as<float>());
    }
    return {std::move(Y)};
}

Instance prepare_unfused(Problem& p) {
    const long M = p.shape["m"], N = p.shape["n"], K = p.shape["k"];
    const float* X = p.in("X").as<float>();
    const float* W = p.in("W").as<float>();
    const float* bias = p.in("bias").as<float>();
    const float* gamma = p.in("gamma").as<float>();
    const float* beta = p.in("beta").as<float>();
    float* Y = p.out("Y").as<float>();
    // The GEMM's output and the epilogue's two intermediates, all m x n.
    auto C = std::make_shared<std::vector<float>>(M * N);
    auto t1 = std::make_shared<std::vector<float>>(M * N);
    auto t2 = std::make_shared<std::vector<float>>(M * N);
    auto stats = std::make_shared<std::vector<float>>(2 * M);
    Instance inst;
    inst.run = [=] {
        gemm::gemm_threads(X, W, C->data(), int(M), int(N), int(K));
        bias_gelu_ln_passes(C->data(), bias, gamma, beta, t1->data(), t2->data(), stats->data(), Y, M, N);
    };
    return inst;
}

}  // namespace

double ln_gelu_gemm_bytes(const Shape& s) {
    // The GEMM rung's blocking model (kernels/vectorization/gemm_cpu.hpp).
    return gemm::cpu::simd_bytes(Shape{{{"m", s["m"]}, {"n", s["n"]}, {"k", s["k"]}}}, DType::f32);
}

}  // namespace mw::fusion

MW_REGISTER_OP(ln_gelu, {
    .name = "ln_gelu",
    .lever = "fusion",
    .summary = "Y = LayerNorm(GELU(X W + b)) * gamma + beta (GEMM with its epilogue), fp32",
    .axes = {"m", "n", "k"},
    .default_shape = {{{"m", 4096}, {"n", 1024}, {"k", 1024}}},
    .quick_shape = {{{"m", 512}, {"n", 512}, {"k", 256}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return (2.0 * s["k"] + 17.0) * double(s["m"]) * s["n"]; },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * (double(s["m"]) * s["k"] + double(s["k"]) * s["n"] + double(s["m"]) * s["n"] + 3.0 * s["n"]);
    },
    .make_problem = mw::fusion::make_problem,
    .oracle = mw::fusion::oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(std::max(s["k"], s["n"])); },
              .tolerance_scale = 2.0, .baseline_factor = 2.0},
});

MW_REGISTER_VARIANT(ln_gelu_unfused_cpu, {
    .name = "unfused", .op = "ln_gelu", .lever = "fusion",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "the project's threaded SIMD GEMM into an m x n temporary, then bias, GELU and "
                 "LayerNorm as separate passes: 8 extra sweeps of Y",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        return mw::fusion::ln_gelu_gemm_bytes(s) + 4.0 * 8.0 * double(s["m"]) * s["n"];
    },
    .prepare = mw::fusion::prepare_unfused });
