// GEMM, vectorization lever, rung 4: rung 3 on all cores (OpenMP).
//
// Change from rung 3: nothing in the arithmetic. The same packing and the same
// micro-kernel (gemm_cpu_kernels.hpp) run inside one OpenMP parallel region:
//   - the packed B block (KC x NC) is shared: the threads pack its NR-wide
//     panels between them, then wait at a barrier;
//   - the rows of C are split into one contiguous run of whole MR-row tiles
//     per thread; each thread packs its own A blocks into a private buffer and
//     runs the macro-kernel over its rows, writing disjoint parts of C.
// FLOPs and bytes per thread are 1/T of rung 3's, B is still packed once, so
// the expected speedup is ~T (2 here) as long as each core stays FMA-bound;
// the price is two barriers per KC block.
#include <omp.h>

#include <algorithm>

#include "optimized/vectorization/gemm_cpu_kernels.hpp"
#include "reference/vectorization/gemm.hpp"

namespace mw::gemm {

void gemm_threads(const float* A, const float* B, float* C, int M, int N, int K) {
    const cpu::Kernel& k = cpu::select_kernel();
    const int threads = omp_get_max_threads();
    const long a_floats = cpu::packed_a_floats(std::min(k.mc, M), std::min(k.kc, K), k.mr);
    auto Ap_all = cpu::alloc_floats(a_floats * threads);
    auto Bp = cpu::alloc_floats(cpu::packed_b_floats(std::min(k.kc, K), std::min(k.nc, N), k.nr));

#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), T = omp_get_num_threads();
        // Whole MR tiles per thread, so no tile straddles two threads.
        const int tiles = (M + k.mr - 1) / k.mr;
        const int row_begin = std::min(M, tiles * t / T * k.mr);
        const int row_end = std::min(M, tiles * (t + 1) / T * k.mr);
        float* Ap = Ap_all.get() + a_floats * t;

        for (int jc = 0; jc < N; jc += k.nc) {
            const int nc = std::min(k.nc, N - jc);
            for (int pc = 0; pc < K; pc += k.kc) {
                const int kc = std::min(k.kc, K - pc);
                // Pack B's panels cooperatively; the implicit barrier at the
                // end of the loop makes the whole block visible to every thread.
#pragma omp for schedule(static)
                for (int j = 0; j < nc; j += k.nr)
                    cpu::pack_b(B + long(pc) * N + jc + j, N, kc, std::min(k.nr, nc - j), k.nr,
                                Bp.get() + long(j) * kc);
                for (int ic = row_begin; ic < row_end; ic += k.mc) {
                    const int mc = std::min(k.mc, row_end - ic);
                    cpu::pack_a(A + long(ic) * K + pc, K, mc, kc, k.mr, Ap);
                    cpu::macro_kernel(k, mc, nc, kc, Ap, Bp.get(), C + long(ic) * N + jc, N, pc > 0);
                }
                // Nobody may repack B while another thread still reads it.
#pragma omp barrier
            }
        }
    }
}

}  // namespace mw::gemm

MW_REGISTER_VARIANT(gemm_threads_cpu, {
    .name = "threads", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 4,
    .rationale = "the rung-3 kernel on every core: threads share the packed B block and "
                 "split the rows of C, so FLOP/s scale with the core count",
    .requires = {"avx2"},
    .bytes = mw::gemm::cpu::simd_bytes,
    .prepare = mw::gemm::cpu_adapter(&mw::gemm::gemm_threads) });
