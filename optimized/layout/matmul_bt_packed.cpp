// matmul_bt, layout lever, rung 2 (CPU): pack B into column panels laid out
// in the order the loop reads them. (The ladder is listed in
// reference/layout/layout.hpp.)
//
// Change from rung 1 (copy): instead of one row-major B[K,N], Bt is repacked
// into ceil(N/64) panels, panel p holding columns 64p .. 64p+63 of B as a
// K x 64 row-major block (the last panel zero-padded). Each thread takes a
// panel, packs it, and right away runs every row of A against it:
// c[0:64] += A[i,k] * panel[k, 0:64] over k, the same c[j] += a * b[j] loop
// in the same k order as rungs 0 and 1, so the result is bit-identical to
// theirs. What changes is the distance between two uses of a byte of B: a
// panel is 64 * K * 4 = 256 KiB, read in address order, and stays in L2
// while all M rows of A use it. B crosses the L2 boundary once per call
// instead of once per row of C. Packing is inside the timed call, like rung
// 1's copy.
//
// Bytes: read Bt once (4*N*K), the panels written back once (4*Np*K, Np = N
// rounded up to 64; their reads are L2 hits), A once (256 KiB at the default
// shape: it stays in L2 next to the panel from one panel to the next), C once:
//     4*(N*K + Np*K + M*K + M*N).
// Expected effect: at M = 64 the copy rung streams B 64 times (256 MiB), this
// one reads and writes it once (8 MiB); the loop becomes bound by its
// arithmetic (SSE2 multiply and add), not by L3.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "reference/layout/layout.hpp"

namespace mw::layout {
namespace {

constexpr long kNR = 64;  // panel width: 64 floats = 4 cache lines per k

Instance prepare_packed(Problem& p) {
    const long M = p.shape["m"], N = p.shape["n"], K = p.shape["k"];
    const long panels = (N + kNR - 1) / kNR;
    const float* A = p.in("A").as<float>();
    const float* Bt = p.in("Bt").as<float>();
    float* C = p.out("C").as<float>();
    auto packed = std::make_shared<std::vector<float>>(panels * K * kNR);
    Instance inst;
    inst.run = [=] {
#pragma omp parallel for schedule(static)
        for (long q = 0; q < panels; ++q) {
            float* panel = packed->data() + q * K * kNR;
            const long j0 = q * kNR, w = std::min(kNR, N - j0);
            // Row jj of Bt (contiguous over k) becomes column jj of the panel.
            for (long jj = 0; jj < w; ++jj)
                for (long k = 0; k < K; ++k) panel[k * kNR + jj] = Bt[(j0 + jj) * K + k];
            for (long jj = w; jj < kNR; ++jj)
                for (long k = 0; k < K; ++k) panel[k * kNR + jj] = 0.0f;
            for (long i = 0; i < M; ++i) {
                float c[kNR] = {};
                for (long k = 0; k < K; ++k) axpy_row(c, panel + k * kNR, A[i * K + k], kNR);
                std::copy(c, c + w, C + i * N + j0);
            }
        }
    };
    return inst;
}

}  // namespace
}  // namespace mw::layout

MW_REGISTER_VARIANT(matmul_bt_packed_cpu, {
    .name = "packed", .op = "matmul_bt", .lever = "layout",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 2,
    .rationale = "repack Bt into K x 64 column panels (timed), each used by all rows of A while it sits in L2: "
                 "B crosses the L2 boundary once instead of once per row of C",
    .bytes = [](const mw::Shape& s, mw::DType) {
        const double M = s["m"], N = s["n"], K = s["k"];
        const double panels = std::ceil(N / 64.0), Np = 64.0 * panels;
        return 4.0 * (N * K + Np * K + M * K + M * N);
    },
    .prepare = mw::layout::prepare_packed });
