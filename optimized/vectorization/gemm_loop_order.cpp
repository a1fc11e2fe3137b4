// GEMM, vectorization lever, rung 1: i-k-j loop order.
//
// Change from rung 0 (naive i-j-k): the two inner loops are swapped. The
// innermost loop now walks a row of B and a row of C with unit stride,
//     C[i, :] += A[i, k] * B[k, :]
// instead of walking a column of B with stride N (one cache line per FMA, 15/16
// of it wasted). Same FLOPs (2*M*N*K); the bytes per FMA drop from one 64-byte
// line of B to 4 bytes of B, and A[i, k] is a scalar held in a register.
//
// Vectorization: this is plain scalar C++ and the file carries no target
// attribute, so GCC -O3 auto-vectorizes the j loop with the baseline x86-64
// ISA only: 128-bit SSE2, 4 floats per instruction, separate mul and add (no
// FMA). That auto-vectorization is part of what this rung buys: the naive
// inner loop is a strided float reduction, which the compiler may not
// vectorize without reassociating the sum (-ffast-math).
//
// What it still wastes: for every row of C the whole of B (K*N floats) is
// streamed again, so B is read M times; rung 2 blocks the loops to fix that.
#include <algorithm>

#include "reference/vectorization/gemm.hpp"

namespace mw::gemm {

namespace {
// c[0:n] += a * b[0:n]. restrict: a row of C never overlaps a row of B, so the
// vectorized loop needs no run-time overlap check.
void axpy_row(float* __restrict c, const float* __restrict b, float a, int n) {
    for (int j = 0; j < n; ++j) c[j] += a * b[j];
}
}  // namespace

void gemm_loop_order(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i) {
        float* c = C + long(i) * N;
        std::fill(c, c + N, 0.0f);
        for (int k = 0; k < K; ++k) axpy_row(c, B + long(k) * N, A[long(i) * K + k], N);
    }
}

}  // namespace mw::gemm

// Bytes: A and C once, B once per row of C (mb = 1, nb = N).
MW_REGISTER_VARIANT(gemm_loop_order_cpu, {
    .name = "loop_order", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "i-k-j order makes the inner loop unit-stride over B and C, so it "
                 "uses every byte of each cache line and the compiler vectorizes it",
    .needs = {},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::gemm::bytes_blocked(s, 1, double(s["n"])); },
    .prepare = mw::gemm::cpu_adapter(&mw::gemm::gemm_loop_order) });
