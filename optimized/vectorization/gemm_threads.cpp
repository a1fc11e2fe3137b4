// GEMM, vectorization lever, rung 4: rung 3 on all cores (OpenMP).
//
// Change from rung 3: nothing in the arithmetic. The same packing and the same
// micro-kernel (kernels/vectorization/gemm_cpu.hpp) run inside one OpenMP parallel region:
//   - the packed B block (K x NC) is shared: the threads pack its panels
//     between them, then wait at a barrier;
//   - the rows of C are cut into blocks of whole MR-row tiles: the fewest
//     blocks of at most MC rows, rounded up to a multiple of the thread
//     count, the tiles shared out evenly (12 blocks of 84-96 rows at M = 1024
//     on 2 threads, where blocks of MC = 96 would be 10 of 96 and one of 64:
//     one thread then does 544 rows and the other 480);
//   - the blocks are dealt out to the threads dynamically; each thread packs
//     its A block into its own buffer and runs rung 3's KC loop on it,
//     writing a disjoint strip of C.
// FLOPs and bytes per thread are 1/T of rung 3's and B is still packed once,
// so the expected speedup is ~T (2 here) while each core stays FMA-bound.
// The price is two barriers per NC block (a call up to N = 1024 is one NC
// block) and idle time at the last one when the blocks don't divide evenly. Few
// barriers and dynamic blocks matter on a shared machine: a barrier waits for
// the slowest thread, and a thread whose core is lent to another process is
// slow, so it simply takes fewer blocks.
#include <omp.h>

#include <algorithm>

#include "kernels/vectorization/gemm_cpu.hpp"
#include "reference/vectorization/gemm.hpp"

namespace mw::gemm {

void gemm_threads(const float* A, const float* B, float* C, int M, int N, int K) {
    const cpu::Kernel& k = cpu::select_kernel();
    const int threads = omp_get_max_threads();
    const long a_floats = cpu::packed_a_floats(std::min(k.mc, M), std::min(k.kc, K), k.mr);
    float* Bp = cpu::thread_scratch_b(cpu::packed_b_floats(K, std::min(k.nc, N), k.nr));
    // Row block b is C's rows [row0(b), row0(b + 1)): tiles dealt evenly.
    const int tiles = (M + k.mr - 1) / k.mr, per_block = k.mc / k.mr;
    const int blocks = std::min(tiles, (tiles + per_block * threads - 1) / (per_block * threads) * threads);
    auto row0 = [&](int b) { return std::min(M, int(long(b) * tiles / blocks) * k.mr); };

#pragma omp parallel num_threads(threads)
    {
        float* Ap = cpu::thread_scratch_a(a_floats);
        for (int jc = 0; jc < N; jc += k.nc) {
            const int nc = std::min(k.nc, N - jc);
            // The threads pack B's KC x NR panels between them; the loop's
            // implicit barrier makes the whole block visible before anyone
            // reads it.
#pragma omp for collapse(2) schedule(dynamic, 4)
            for (int pc = 0; pc < K; pc += k.kc)
                for (int j = 0; j < nc; j += k.nr) {
                    const int kc = std::min(k.kc, K - pc);
                    cpu::pack_b(B + long(pc) * N + jc + j, N, kc, std::min(k.nr, nc - j), k.nr,
                                cpu::packed_b_slice(Bp, pc, nc, k.nr) + long(j) * kc);
                }
            // Row blocks are dealt out one at a time, so a core slowed by
            // other work simply takes fewer; each thread packs its own A. The
            // implicit barrier keeps B from being repacked while still read.
#pragma omp for schedule(dynamic, 1)
            for (int b = 0; b < blocks; ++b) {
                const int ic = row0(b), mc = row0(b + 1) - ic;
                for (int pc = 0; pc < K; pc += k.kc) {
                    const int kc = std::min(k.kc, K - pc);
                    cpu::pack_a(A + long(ic) * K + pc, K, mc, kc, k.mr, Ap);
                    cpu::macro_kernel(k, mc, nc, kc, Ap, cpu::packed_b_slice(Bp, pc, nc, k.nr),
                                      C + long(ic) * N + jc, N, pc > 0);
                }
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
    .needs = {"avx2"},
    .bytes = mw::gemm::cpu::simd_bytes,
    .prepare = mw::gemm::cpu_adapter(&mw::gemm::gemm_threads) });
