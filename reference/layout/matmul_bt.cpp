// matmul_bt, layout lever, rung 0 (CPU): B read through the strides of its
// transpose.
//
// The op: C[M,N] = A[M,K] B[K,N], fp32, where B arrives transposed, as
// Bt[N,K] row-major: the way nn.Linear stores its weight ([out, in]) and the
// way a .transpose() view hands a matrix to the next op. B(k, j) lives at
// Bt[j*K + k].
//
// This rung runs the unit-stride i-k-j loop that a row-major B wants,
//     C[i, :] += A[i, k] * B(k, :)
// but reads B(k, :) where it is: N floats K apart in memory. Each one sits in
// a different 64-byte line (and, at K = 1024, a different 4 KiB page), and
// only 4 of the line's 64 bytes are used by this k. The next k would use the
// neighbouring float of the same N lines, but a sweep of N = 1024 lines whose
// addresses all share one page offset fits neither L1 (12 lines for that
// offset) nor L2 (512 lines; see layout.hpp), so every B(k, j) costs a line
// from L3: 64 bytes per FMA instead of 4, and a TLB walk more often than
// not. The loop cannot be vectorized either (the loads are a gather), but
// that is worth at most 4x at the baseline SSE2 width; the lines cost 16x.
//
// Bytes: A and C once, plus one 64-byte line per FMA:
//     4*M*K + 4*M*N + 64*M*N*K      (16x the copy rung's, for B).
// Expected: an order of magnitude slower than the copy rung at the default
// shape. Worth measuring next to it: --shape k=1000. The stride is then
// 4000 bytes, the N lines of a sweep spread over all of L2's sets and stay
// there for the next k, and this rung runs several times faster, while the
// copy rung does not change: the 16x line waste now only hits L1, and the
// byte count above overstates what crosses L2.
//
// This file also defines the op: shapes, FLOPs, seeded inputs, fp64 oracle.
#include <algorithm>
#include <vector>

#include "harness/inputs.hpp"
#include "reference/layout/layout.hpp"

namespace mw::layout {

namespace {

Problem make_problem(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto M = s["m"], N = s["n"], K = s["k"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("A", DType::f32, M * K, {M, K}));
    p.inputs.push_back(Buffer::make("Bt", DType::f32, N * K, {N, K}));
    p.outputs.push_back(Buffer::make("C", DType::f32, M * N, {M, N}));
    fill_uniform(p.in("A"), seed, -1.0, 1.0);
    fill_uniform(p.in("Bt"), seed, -1.0, 1.0);
    return p;
}

// Dot products of rows of A and rows of Bt, in double.
std::vector<std::vector<double>> oracle(const Problem& p) {
    const auto M = p.shape["m"], N = p.shape["n"], K = p.shape["k"];
    const float* A = p.in("A").as<float>();
    const float* Bt = p.in("Bt").as<float>();
    std::vector<double> C(M * N);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t j = 0; j < N; ++j) {
            double acc = 0;
            for (std::int64_t k = 0; k < K; ++k) acc += double(A[i * K + k]) * double(Bt[j * K + k]);
            C[i * N + j] = acc;
        }
    return {std::move(C)};
}

// c[0:n] += a * b[j * ldb]: the arithmetic of axpy_row, with B's stride.
void axpy_strided(float* __restrict c, const float* __restrict b, long ldb, float a, long n) {
    for (long j = 0; j < n; ++j) c[j] += a * b[j * ldb];
}

Instance prepare_strided(Problem& p) {
    const long M = p.shape["m"], N = p.shape["n"], K = p.shape["k"];
    const float* A = p.in("A").as<float>();
    const float* Bt = p.in("Bt").as<float>();
    float* C = p.out("C").as<float>();
    Instance inst;
    inst.run = [=] {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < M; ++i) {
            float* c = C + i * N;
            std::fill(c, c + N, 0.0f);
            for (long k = 0; k < K; ++k) axpy_strided(c, Bt + k, K, A[i * K + k], N);
        }
    };
    return inst;
}

}  // namespace

}  // namespace mw::layout

MW_REGISTER_OP(matmul_bt, {
    .name = "matmul_bt",
    .lever = "layout",
    .summary = "C[M,N] = A[M,K] B[K,N] with B stored transposed as Bt[N,K] (nn.Linear's weight), fp32",
    .axes = {"m", "n", "k"},
    // 64 tokens through a 1024 -> 1024 linear layer. K*4 = 4 KiB: the stride
    // that keeps the strided rung's lines out of L1 and L2 (layout.hpp).
    .default_shape = {{{"m", 64}, {"n", 1024}, {"k", 1024}}},
    .quick_shape = {{{"m", 16}, {"n", 1024}, {"k", 1024}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return 2.0 * s["m"] * s["n"] * s["k"]; },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * (double(s["m"]) * s["k"] + double(s["n"]) * s["k"] + double(s["m"]) * s["n"]);
    },
    .make_problem = mw::layout::make_problem,
    .oracle = mw::layout::oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["k"]); }, .baseline_factor = 2.0},
});

MW_REGISTER_VARIANT(matmul_bt_strided_cpu, {
    .name = "strided", .op = "matmul_bt", .lever = "layout",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "the unit-stride i-k-j loop reading B(k,j) in place from Bt: N floats K apart, "
                 "one 64-byte line fetched per 4-byte float used",
    .bytes = [](const mw::Shape& s, mw::DType) {
        const double M = s["m"], N = s["n"], K = s["k"];
        return 4.0 * M * K + 4.0 * M * N + 64.0 * M * N * K;
    },
    .prepare = mw::layout::prepare_strided });
