// GEMM, vectorization lever, vendor rung: OpenBLAS cblas_sgemm.
//
// The yardstick for the ladder: a hand-tuned GotoBLAS descendant with assembly
// micro-kernels per CPU family (on AVX-512 machines its SkylakeX kernels),
// the same pack-and-tile design as rungs 3-4. The gap between rung 4 and this
// line is what the remaining tricks (prefetch schedules, assembly, tuned
// blocking per cache size) are worth.
// Threads: OpenBLAS keeps its own thread pool, so it is told explicitly to use
// as many threads as OpenMP would (the harness sets that count), keeping the
// comparison with rung 4 at an equal core count.
#include <cblas.h>
#include <omp.h>

#include "reference/vectorization/gemm.hpp"

namespace mw::gemm {

void gemm_openblas(const float* A, const float* B, float* C, int M, int N, int K) {
    openblas_set_num_threads(omp_get_max_threads());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
}

}  // namespace mw::gemm

// Bytes: an assumption, not a measurement of OpenBLAS internals. Its sgemm
// is GotoBLAS-blocked like rung 3 (A re-read per NC block, B per MC block);
// we assume an MC of a few hundred rows (mb = 256) and an NC covering the
// whole of N at these sizes (nb = N).
MW_REGISTER_VARIANT(gemm_openblas_cpu, {
    .name = "openblas", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::vendor, .backend = mw::Backend::cpu, .rung = 5,
    .rationale = "OpenBLAS cblas_sgemm: the vendor-tuned version of the same packed, "
                 "register-blocked design, as the ceiling for the hand-written rungs",
    .needs = {},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::gemm::bytes_blocked(s, 256, double(s["n"])); },
    .prepare = mw::gemm::cpu_adapter(&mw::gemm::gemm_openblas) });
