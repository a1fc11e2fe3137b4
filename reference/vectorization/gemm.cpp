// Rung 0 of the vectorization lever (CPU): the textbook GEMM.
//
// C[i][j] = sum_k A[i][k] * B[k][j], looping i, j, k. The inner loop walks B
// down a column (stride N floats), so every B load touches a new cache line
// and nothing can be vectorized: the k-reduction is a serial dependency chain
// of scalar FMAs (one every ~4 cycles) and B is streamed from memory once per
// row of C. Expect ~1-2 GFLOP/s — the floor every other rung is measured from.
//
// This file also defines the op itself: shapes, FLOPs, compulsory bytes,
// seeded inputs and the fp64 oracle that every GEMM variant (CPU, CUDA,
// emulated) is checked against.
#include "reference/vectorization/gemm.hpp"

#include <cmath>
#include <vector>

#include "harness/inputs.hpp"

namespace mw::gemm {

double bytes_blocked(const Shape& s, double mb, double nb) {
    const double M = s["m"], N = s["n"], K = s["k"];
    return 4.0 * (M * K * std::ceil(N / nb) + K * N * std::ceil(M / mb) + M * N);
}

std::function<Instance(Problem&)> cpu_adapter(CpuFn fn) {
    return [fn](Problem& p) {
        const int M = static_cast<int>(p.shape["m"]), N = static_cast<int>(p.shape["n"]),
                  K = static_cast<int>(p.shape["k"]);
        const float* A = p.in("A").as<float>();
        const float* B = p.in("B").as<float>();
        float* C = p.out("C").as<float>();
        Instance inst;
        inst.run = [=] { fn(A, B, C, M, N, K); };
        return inst;
    };
}

namespace {

Problem make_problem(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto M = s["m"], N = s["n"], K = s["k"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("A", DType::f32, M * K, {M, K}));
    p.inputs.push_back(Buffer::make("B", DType::f32, K * N, {K, N}));
    p.outputs.push_back(Buffer::make("C", DType::f32, M * N, {M, N}));
    fill_uniform(p.in("A"), seed, -1.0, 1.0);
    fill_uniform(p.in("B"), seed, -1.0, 1.0);
    return p;
}

// C = A B in fp64, each input first passed through `round`.
template <class Round> std::vector<std::vector<double>> product(const Problem& p, Round round) {
    const auto M = p.shape["m"], N = p.shape["n"], K = p.shape["k"];
    const float* A = p.in("A").as<float>();
    const float* B = p.in("B").as<float>();
    std::vector<double> C(M * N, 0.0);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t k = 0; k < K; ++k) {
            const double a = round(A[i * K + k]);
            for (std::int64_t j = 0; j < N; ++j) C[i * N + j] += a * round(B[k * N + j]);
        }
    return {std::move(C)};
}

std::vector<std::vector<double>> oracle(const Problem& p) {
    return product(p, [](float x) { return static_cast<double>(x); });
}

}  // namespace

std::vector<std::vector<double>> oracle_bf16_inputs(const Problem& p) {
    return product(p, [](float x) { return static_cast<double>(bf16_to_f32(f32_to_bf16(x))); });
}

}  // namespace mw::gemm

// The optimize attribute keeps GCC from vectorizing the rung even if a later
// compiler learns to vectorize the strided reduction.
__attribute__((optimize("no-tree-vectorize"))) void gemm_naive(const float* A, const float* B, float* C, int M,
                                                               int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}

MW_REGISTER_OP(gemm, {
    .name = "gemm",
    .lever = "vectorization",
    .summary = "C[M,N] = A[M,K] * B[K,N], fp32, row-major",
    .axes = {"m", "n", "k"},
    .default_shape = {{{"m", 1024}, {"n", 1024}, {"k", 1024}}},
    .quick_shape = {{{"m", 256}, {"n", 256}, {"k", 256}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return 2.0 * s["m"] * s["n"] * s["k"]; },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * (double(s["m"]) * s["k"] + double(s["k"]) * s["n"] + double(s["m"]) * s["n"]);
    },
    .make_problem = mw::gemm::make_problem,
    .oracle = mw::gemm::oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["k"]); }, .baseline_factor = 2.0},
});

MW_REGISTER_VARIANT(gemm_naive_cpu, {
    .name = "naive", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "textbook i-j-k loop: B read down a column, one scalar FMA at a time",
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::gemm::bytes_blocked(s, 1, double(s["n"])); },
    .prepare = mw::gemm::cpu_adapter(&gemm_naive) });
