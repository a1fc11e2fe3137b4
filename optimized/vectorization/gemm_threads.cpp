// GEMM, vectorization lever, rung 4: rung 3 on all cores (OpenMP).
//
// Change from rung 3: nothing in the arithmetic. The same packing and the same
// micro-kernel (kernels/vectorization/gemm_cpu.hpp) run inside one OpenMP parallel region:
//   - all of B is packed once, column block after column block, and
//     shared: the threads pack its panels between them, then wait at the
//     call's one barrier;
//   - the rows of C are cut into blocks of whole MR-row tiles: the fewest
//     blocks of at most MC rows, rounded up to a multiple of the thread
//     count, the tiles shared out evenly (12 blocks of 84-96 rows at M = 1024
//     on 2 threads, where blocks of MC = 96 would be 10 of 96 and one of 64:
//     one thread then does 544 rows and the other 480);
//   - the pieces of C, a row block by a column block (at most NC wide)
//     each, are dealt out to the threads dynamically; each thread packs its
//     A block into its own buffer and runs rung 3's KC loop on it, writing a
//     disjoint tile of C.
// FLOPs and bytes per thread are 1/T of rung 3's and B is still packed once,
// so the expected speedup is ~T (2 here) while each core stays FMA-bound.
// The price is the barrier after the packing, idle time at the end when
// the pieces don't divide evenly, and a packed copy as large as B (rung 3
// holds K x NC of it). Few barriers and small dynamic pieces
// matter on a shared machine: a barrier waits for the slowest thread, and a
// thread whose core is lent to another process is slow, so it simply takes
// fewer pieces. (This rung first packed B one NC block at a time, as rung 3
// does, which cost two barriers per NC block, and at each the wait for the
// last piece: at 2048^3 on 2 cores, two NC blocks of 22 pieces of ~3 ms, so
// two such tails where there is one now. A scratch driver there, on the Xeon of
// results/xeon-260m-kvm-2c, 10 interleaved rounds of 2 calls each: 248
// GFLOP/s on the mean against 235, best 266 against 251, ahead in 9 rounds.)
#include <omp.h>

#include <algorithm>

#include "kernels/vectorization/gemm_cpu.hpp"
#include "reference/vectorization/gemm.hpp"

namespace mw::gemm {

void gemm_threads(const float* A, const float* B, float* C, int M, int N, int K) {
    const cpu::Kernel& k = cpu::select_kernel();
    const int threads = omp_get_max_threads();
    const long a_floats = cpu::packed_a_floats(std::min(k.mc, M), std::min(k.kc, K), k.mr);
    // Packed B: the NC blocks one after the other, each as rung 3 packs one
    // (KC-deep slices of NR-column panels); block jc starts jc * K floats in.
    float* Bp = cpu::thread_scratch_b(cpu::packed_b_floats(K, N, k.nr));
    // Row block b is C's rows [row0(b), row0(b + 1)): tiles dealt evenly.
    const int tiles = (M + k.mr - 1) / k.mr, per_block = k.mc / k.mr;
    const int blocks = std::min(tiles, (tiles + per_block * threads - 1) / (per_block * threads) * threads);
    auto row0 = [&](int b) { return std::min(M, int(long(b) * tiles / blocks) * k.mr); };
    // Column blocks of equal width, at most NC, rounded up to whole panels:
    // N = 1040 with NC = 512 is three blocks of 352, 352 and 336 columns, not
    // 512, 512 and 16, whose pieces would each pack a whole A block for 16
    // columns (on the Zen 4 EPYC of results/epyc-kvm-2c, 1024 x 1040 x 1024
    // against oneDNN in the same process: 0.86x of its speed before, 0.94x after).
    const int col_blocks = (N + k.nc - 1) / k.nc;
    const int ncb = ((N + col_blocks - 1) / col_blocks + k.nr - 1) / k.nr * k.nr;
    // B's packing tasks: groups of four panels inside each column block.
    const int group = 4 * k.nr, groups = (ncb + group - 1) / group;

#pragma omp parallel num_threads(threads)
    {
        float* Ap = cpu::thread_scratch_a(a_floats);
        // The threads pack B between them, four KC x NR panels a task (rows
        // of B read as runs of 4 NR floats); the loop's implicit barrier
        // makes all of it visible before anyone reads it.
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int pc = 0; pc < K; pc += k.kc)
            for (int g = 0; g < col_blocks * groups; ++g) {
                const int jc = g / groups * ncb, nc = std::min(ncb, N - jc), j = jc + g % groups * group;
                if (j >= jc + nc) continue;  // past a narrower last block
                const int kc = std::min(k.kc, K - pc);
                cpu::pack_b(B + long(pc) * N + j, N, kc, std::min(group, jc + nc - j), k.nr,
                            cpu::packed_b_slice(Bp + long(jc) * K, pc, nc, k.nr) + long(j - jc) * kc);
            }
        // Pieces of C (row block, column block) are dealt out one at a time,
        // so a core slowed by other work simply takes fewer; each thread
        // packs its own A block.
#pragma omp for schedule(dynamic, 1)
        for (int piece = 0; piece < blocks * col_blocks; ++piece) {
            const int b = piece / col_blocks, ic = row0(b), mc = row0(b + 1) - ic;
            const int jc = piece % col_blocks * ncb, nc = std::min(ncb, N - jc);
            float* Bj = Bp + long(jc) * K;
            for (int pc = 0; pc < K; pc += k.kc) {
                const int kc = std::min(k.kc, K - pc);
                cpu::pack_a(A + long(ic) * K + pc, K, mc, kc, k.mr, Ap);
                cpu::macro_kernel(k, mc, nc, kc, Ap, cpu::packed_b_slice(Bj, pc, nc, k.nr),
                                  C + long(ic) * N + jc, N, pc > 0);
            }
        }
    }
}

}  // namespace mw::gemm

MW_REGISTER_VARIANT(gemm_threads_cpu, {
    .name = "threads", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 4,
    .rationale = "the rung-3 kernel on every core: threads share one packed copy of B and "
                 "take pieces of C, so FLOP/s scale with the core count",
    .needs = {"avx2"},
    .bytes = mw::gemm::cpu::simd_bytes,
    .prepare = mw::gemm::cpu_adapter(&mw::gemm::gemm_threads) });
