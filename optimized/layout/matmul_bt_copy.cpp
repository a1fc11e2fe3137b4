// matmul_bt, layout lever, rung 1 (CPU): make B contiguous first, then
// multiply. (The ladder is listed in reference/layout/layout.hpp.)
//
// Change from rung 0 (strided): before the loop, Bt[N,K] is transposed into a
// row-major B[K,N] workspace (the explicit .contiguous() copy), with the
// tiled transpose of the transpose op, and the copy is inside the timed call.
// The multiply is rung 0's loop, operation for operation, with B(k, :) now a
// unit-stride row: every byte of every line is used, and the same
// c[j] += a * b[j] loop vectorizes. The results are bit-identical to rung 0.
//
// Bytes: the copy reads Bt and writes B (2 * 4*N*K); the loop reads A and
// writes C once and streams B once per row of C (B is 4 MiB at the default
// shape, twice L2, so each row's pass comes from L3):
//     4*(2*N*K + M*K + M*N + M*N*K).
// Expected effect: B traffic per FMA falls from a 64-byte line to 4 bytes,
// 16x fewer bytes; the copy (8 MiB) costs about as much as 2 rows of C.
// What it still wastes: B is re-read for every row of C; rung 2 packs it
// into panels that stay in L2 across all rows.
#include <algorithm>
#include <memory>
#include <vector>

#include "reference/layout/layout.hpp"

namespace mw::layout {
namespace {

Instance prepare_copy(Problem& p) {
    const long M = p.shape["m"], N = p.shape["n"], K = p.shape["k"];
    const float* A = p.in("A").as<float>();
    const float* Bt = p.in("Bt").as<float>();
    float* C = p.out("C").as<float>();
    auto B = std::make_shared<std::vector<float>>(N * K);
    Instance inst;
    inst.run = [=] {
        float* b = B->data();
        transpose_tiled(Bt, b, N, K);  // B[K,N] = Bt^T
#pragma omp parallel for schedule(static)
        for (long i = 0; i < M; ++i) {
            float* c = C + i * N;
            std::fill(c, c + N, 0.0f);
            for (long k = 0; k < K; ++k) axpy_row(c, b + k * N, A[i * K + k], N);
        }
    };
    return inst;
}

}  // namespace
}  // namespace mw::layout

MW_REGISTER_VARIANT(matmul_bt_copy_cpu, {
    .name = "copy", .op = "matmul_bt", .lever = "layout",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "transpose Bt into a contiguous B first (timed), then the same loop reads B with unit stride: "
                 "4 bytes per FMA instead of a 64-byte line, for the price of one read and one write of B",
    .bytes = [](const mw::Shape& s, mw::DType) {
        const double M = s["m"], N = s["n"], K = s["k"];
        return 4.0 * (2.0 * N * K + M * K + M * N + M * N * K);
    },
    .prepare = mw::layout::prepare_copy });
