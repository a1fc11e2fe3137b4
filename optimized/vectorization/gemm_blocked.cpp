// GEMM, vectorization lever, rung 2: cache blocking.
//
// Change from rung 1: the same i-k-j inner loops, but run over tiles. C is
// cut into MB x NB tiles; each tile is finished before the next one starts,
// by summing KB-deep slices:  C[ii, jj] += A[ii, kk] * B[kk, jj].
// While one tile is being computed, its three operands stay in cache:
//   C tile  MB x NB = 32 x 512 floats = 64 KiB  (re-read KB-slice by slice: L2)
//   B tile  KB x NB = 64 x 512        = 128 KiB (re-read by all MB rows: L2)
//   A tile  MB x KB = 32 x 64         = 8 KiB
// so B is streamed from memory once per MB rows instead of once per row, and A
// once per NB columns: bytes drop from ~4*M*N*K (rung 1) to
// 4*(M*K*N/NB + K*N*M/MB + M*N), a 32x cut in B traffic.
// FLOPs are unchanged, and so is the instruction mix: the inner loop is still
// the compiler's 128-bit SSE2 vectorization of rung 1 (no target attribute),
// which issues 2 loads and 1 store per 4 multiply-adds. Where rung 1 is
// already limited by that load/store rate rather than by memory (B fits in
// the last-level cache, as at 1024^2 on a big-L3 Xeon), this rung gains
// little: the lesson is that cache blocking only pays once the data no
// longer fits, and rung 3 attacks the load/store rate itself.
#include <algorithm>

#include "reference/vectorization/gemm.hpp"

namespace mw::gemm {

namespace {
constexpr int MB = 32, NB = 512, KB = 64;

// Rung 1's inner loop: c[0:n] += a * b[0:n], C and B never overlapping.
void axpy_row(float* __restrict c, const float* __restrict b, float a, int n) {
    for (int j = 0; j < n; ++j) c[j] += a * b[j];
}
}  // namespace

void gemm_blocked(const float* A, const float* B, float* C, int M, int N, int K) {
    std::fill(C, C + long(M) * N, 0.0f);
    for (int ii = 0; ii < M; ii += MB) {
        const int i_end = std::min(ii + MB, M);
        for (int jj = 0; jj < N; jj += NB) {
            const int j_end = std::min(jj + NB, N);
            for (int kk = 0; kk < K; kk += KB) {
                const int k_end = std::min(kk + KB, K);
                // Rung 1's loops, confined to one tile.
                for (int i = ii; i < i_end; ++i)
                    for (int k = kk; k < k_end; ++k)
                        axpy_row(C + long(i) * N + jj, B + long(k) * N + jj, A[long(i) * K + k], j_end - jj);
            }
        }
    }
}

}  // namespace mw::gemm

// Bytes: the C tile stays in cache across the kk loop (written once); B is
// re-read once per MB-row block, A once per NB-column block.
MW_REGISTER_VARIANT(gemm_blocked_cpu, {
    .name = "blocked", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 2,
    .rationale = "computing C tile by tile keeps the A, B and C tiles in cache, so B is "
                 "read from memory once per 32 rows instead of once per row",
    .needs = {},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::gemm::bytes_blocked(s, mw::gemm::MB, mw::gemm::NB); },
    .prepare = mw::gemm::cpu_adapter(&mw::gemm::gemm_blocked) });
