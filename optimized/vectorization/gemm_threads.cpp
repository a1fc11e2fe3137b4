// GEMM, vectorization lever, rung 4: rung 3 on all cores (OpenMP), with A
// read in place rather than packed.
//
// Change from rung 3, two of them:
//   - Threads. One OpenMP parallel region per call. All of B is packed
//     once, column block after column block, and shared: the threads pack
//     its panels between them, then wait at the call's one barrier. The
//     rows of C are cut into blocks of whole 6-row tiles: the fewest blocks
//     of at most MC rows, rounded up to a multiple of the thread count, the
//     tiles shared out evenly (12 blocks of 84-90 rows at M = 1024 on 2
//     threads, where blocks of MC = 96 would be 10 of 96 and one of 64: one
//     thread then does 544 rows and the other 480). The pieces of C, a row
//     block by a column block (at most NC wide) each, are dealt out to the
//     threads dynamically, each writing a disjoint tile of C. FLOPs and
//     bytes per thread are 1/T of rung 3's and B is still packed once, so
//     this should buy ~T (2 here) while each core stays FMA-bound.
//   - No packed A. Rung 3 copies every MC x KC block of A into MR-row
//     panels so its 12-row tile reads A unit-stride; here the tile is 6
//     rows of C by 64 columns (two 32-wide panels of B, still 24
//     accumulators) and broadcasts A's values straight from its 6 rows.
//     Six rows 4 KiB apart fit L1's 8 ways (a 12-row tile read in place
//     thrashed: 11.5 against 10.8 ms at 1024^3); per step of k the tile
//     does 4 loads of B and 6 broadcasts for 24 FMAs, where rung 3's did 2
//     and 12. What it buys is the packing pass over A (~3% of the samples
//     under perf at 1024^3 when this rung packed A) and, with no A panel
//     to hold, deeper KC slices (up to 768, 512 on AVX2; kDirectKc below),
//     so each tile of C is read back and written fewer times. This is how
//     oneDNN's fp32 brgemm matmul works on AVX-512: it packs B and reads A
//     in place. AVX2 has 16 registers, so its tile stays 6 x 16 (one
//     panel, 12 accumulators).
// Measured on the Zen 4 EPYC of results/epyc-kvm-2c, beside the rung it
// replaces (A packed, KC = 256) and the vendors in one process (scratch
// build, 3 rounds, 2 threads, best ms): 1024^3 10.0 against 10.4, oneDNN
// 9.69 and OpenBLAS 11.9; 2048^3 77.0 against 82.8, oneDNN 79.8 and
// OpenBLAS 84.5. Its record there, gemm-vendors.* (6 rounds): 1.02x the
// better vendor (oneDNN) at 1024^3, rounds 0.99-1.04x, and 1.04x at 2048^3,
// rounds 1.02-1.04x.
// Few barriers and small dynamic pieces matter on a shared machine: a
// barrier waits for the slowest thread, and a thread whose core is lent to
// another process is slow, so it simply takes fewer pieces. (This rung
// first packed B one NC block at a time, as rung 3 does, which cost two
// barriers per NC block, and at each the wait for the last piece: at
// 2048^3 on 2 cores, two NC blocks of 22 pieces of ~3 ms, so two such tails
// where there is one now. A scratch driver there, on the Xeon of
// results/xeon-260m-kvm-2c, 10 interleaved rounds of 2 calls each: 248
// GFLOP/s on the mean against 235, best 266 against 251, ahead in 9 rounds.)
#include <omp.h>

#include <algorithm>
#include <string_view>

#include "harness/isa.hpp"
#include "kernels/fusion/simd.hpp"
#include "kernels/vectorization/gemm_cpu.hpp"
#include "reference/vectorization/gemm.hpp"

namespace mw::gemm {
namespace {
namespace simd = fusion::simd;

// KC of this rung: K is cut into the fewest slices of at most kDirectKc,
// of (nearly) equal depth (512 at K = 1024; 683, 683 and 682 at K =
// 2048). A tile's rows of A are then 6 runs of at most 768 floats in L1
// (18 KiB of 32) and its two B
// micro-panels (at most 192 KiB) sit in L2; the deeper the slice, the fewer
// times each tile of C is read back and written (K / KC times). On the Zen
// 4 EPYC of results/epyc-kvm-2c, paired with oneDNN (scratch build, 2-3
// rounds, 2 threads; best ms, ours / oneDNN): slices of 512 gave 1024^3
// 9.74 / 10.06 and 2048^3 79.6 / 79.2; of 384, 9.49 / 9.60 and 79.1 / 79.2;
// of 1024, 10.06 / 10.0 and 78.0 / 80.6; of at most 768, split evenly,
// 9.62 / 9.71 and 75.7 / 79.0. The AVX2 tile is 16 columns wide, so each
// tile re-reads its rows of A for a quarter of the columns, and the rows of
// A in L2 (MC x KC) count for more: there slices of at most 512 measured
// best (MEMWALL_ISA=avx2 on the same EPYC, against the AVX2 rung that
// packed A, two runs of 2 rounds: 1024^3 9.55-9.74 ms against 9.97-10.03,
// 2048^3 78.6-81.3 against 79.9-80.5, so no loss there; at most 768 gave
// 85.2 against 80.9 at 2048^3, 384 and 256 about 80 there). Not measured
// on a machine without AVX-512.
constexpr int kDirectKc = 768, kDirectKcAvx2 = 512, kDirectMr = 6;

// One ROWS x NV-vector tile of C (+)= A[0:ROWS, 0:kc] (rows lda apart, read in
// place) times NV vectors of packed B: vectors 0-1 from the panel at b,
// 2-3 from the next panel (pstride floats on). Only the first `cols` columns
// are stored (the packed panels are zero past N, so the rest is zeros).
template <class V, int ROWS, int NV>
MW_SIMD_INLINE void tile(int kc, const float* a, long lda, const float* b, long pstride, float* c, long ldc,
                         int cols, bool accumulate) {
    constexpr int W = simd::width<V>;
    V acc[ROWS][NV];
#pragma GCC unroll 8
    for (int i = 0; i < ROWS; ++i)
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = V{};
    for (int p = 0; p < kc; ++p, b += 2 * W) {
        V bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) bv[v] = simd::load<V>(b + v / 2 * pstride + v % 2 * W);
#pragma GCC unroll 8
        for (int i = 0; i < ROWS; ++i) {
            const V ai = simd::splat<V>(a[i * lda + p]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) acc[i][v] += ai * bv[v];
        }
    }
    if (cols == NV * W) {
#pragma GCC unroll 8
        for (int i = 0; i < ROWS; ++i)
#pragma GCC unroll 4
            for (int v = 0; v < NV; ++v) {
                float* ci = c + i * ldc + v * W;
                simd::store<V>(ci, accumulate ? acc[i][v] + simd::load<V>(ci) : acc[i][v]);
            }
        return;
    }
    // The last tile of a row of C: through a scratch tile, `cols` at a time.
    float t[ROWS][NV * W];
    for (int i = 0; i < ROWS; ++i)
        for (int v = 0; v < NV; ++v) simd::store<V>(&t[i][v * W], acc[i][v]);
    for (int i = 0; i < ROWS; ++i)
        for (int j = 0; j < cols; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + t[i][j] : t[i][j];
}

// The tile height left at the bottom of a block: 1 to kDirectMr rows.
template <class V, int NV, int ROWS = kDirectMr>
MW_SIMD_INLINE void tile_rows(int rows, int kc, const float* a, long lda, const float* b, long pstride, float* c,
                              long ldc, int cols, bool accumulate) {
    if constexpr (ROWS > 1)
        if (rows < ROWS) return tile_rows<V, NV, ROWS - 1>(rows, kc, a, lda, b, pstride, c, ldc, cols, accumulate);
    tile<V, ROWS, NV>(kc, a, lda, b, pstride, c, ldc, cols, accumulate);
}

// C[0:mc, 0:nc] (+)= A[0:mc, 0:kc] (in place) * one packed KC slice of B,
// column strip by column strip: AVX-512 tiles are 6 x 64 (two 32-wide panels,
// 24 accumulators), AVX2 tiles 6 x 16 (one 16-wide panel, 12 accumulators).
// A strip's B (KC x 64 on AVX-512, at most 192 KiB; KC x 16 on AVX2) stays
// in L2 while its tiles go down the block's rows; the rows of A the tile
// reads (6 x KC) stay in L1.
template <class V>
MW_SIMD_INLINE void direct_block(int mc, int nc, int kc, const float* A, long lda, const float* Bp, float* C, long ldc,
                  bool accumulate) {
    // AVX-512: strips of two panels (NV = 4 vectors), one where a single
    // panel is left; AVX2: strips of one panel (NV = 2).
    constexpr int panel = 2 * simd::width<V>, strip = sizeof(V) == 64 ? 2 * panel : panel;
    const long pstride = long(panel) * kc;
    for (int j = 0; j < nc; j += strip) {
        const float* b = Bp + long(j) * kc;
        const int cols = std::min(strip, nc - j);
        for (int i = 0; i < mc; i += kDirectMr) {
            const int rows = std::min(kDirectMr, mc - i);
            const float* a = A + long(i) * lda;
            float* c = C + long(i) * ldc + j;
            if constexpr (strip > panel)
                if (cols > panel) {
                    tile_rows<V, 4>(rows, kc, a, lda, b, pstride, c, ldc, cols, accumulate);
                    continue;
                }
            tile_rows<V, 2>(rows, kc, a, lda, b, pstride, c, ldc, cols, accumulate);
        }
    }
}
}  // namespace

void gemm_threads(const float* A, const float* B, float* C, int M, int N, int K) {
    // The ISA is chosen per call, as select_kernel() chooses B's panel width
    // (a test may set MEMWALL_ISA=avx2 between two calls).
    const cpu::Kernel& k = cpu::select_kernel();
    const bool avx512 = std::string_view(k.isa) == "avx512";
    const auto block = avx512 ? isa::on_avx512<direct_block<simd::f16>> : isa::on_avx2<direct_block<simd::f8>>;
    const int kc_max = avx512 ? kDirectKc : kDirectKcAvx2;
    const int threads = omp_get_max_threads(), slices = (K + kc_max - 1) / kc_max;
    const int kcb = (K + slices - 1) / slices;
    // Packed B: the NC blocks one after the other, each laid out as rung 3
    // packs one (slices of NR-column panels, here kcb deep, not rung 3's
    // 256); block jc starts jc * K floats in.
    float* Bp = cpu::thread_scratch_b(cpu::packed_b_floats(K, N, k.nr));
    // Row block b is C's rows [row0(b), row0(b + 1)): tiles dealt evenly.
    const int tiles = (M + kDirectMr - 1) / kDirectMr, per_block = k.mc / kDirectMr;
    const int blocks = std::min(tiles, (tiles + per_block * threads - 1) / (per_block * threads) * threads);
    auto row0 = [&](int b) { return std::min(M, int(long(b) * tiles / blocks) * kDirectMr); };
    // Column blocks of equal width, at most NC, rounded up to whole panels:
    // N = 1040 with NC = 512 is three blocks of 352, 352 and 336 columns, not
    // 512, 512 and 16, whose pieces would each pass over a whole A block for
    // 16 columns (with A packed, as this rung once did, on the Zen 4 EPYC of
    // results/epyc-kvm-2c, 1024 x 1040 x 1024 against oneDNN in the same
    // process: 0.86x of its speed before, 0.94x after).
    const int col_blocks = (N + k.nc - 1) / k.nc;
    const int ncb = ((N + col_blocks - 1) / col_blocks + k.nr - 1) / k.nr * k.nr;
    // B's packing tasks: groups of four panels inside each column block.
    const int group = 4 * k.nr, groups = (ncb + group - 1) / group;

#pragma omp parallel num_threads(threads)
    {
        // The threads pack B between them, four KC x NR panels a task (rows
        // of B read as runs of 4 NR floats); the loop's implicit barrier
        // makes all of it visible before anyone reads it.
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int pc = 0; pc < K; pc += kcb)
            for (int g = 0; g < col_blocks * groups; ++g) {
                const int jc = g / groups * ncb, nc = std::min(ncb, N - jc), j = jc + g % groups * group;
                if (j >= jc + nc) continue;  // past a narrower last block
                const int kc = std::min(kcb, K - pc);
                cpu::pack_b(B + long(pc) * N + j, N, kc, std::min(group, jc + nc - j), k.nr,
                            cpu::packed_b_slice(Bp + long(jc) * K, pc, nc, k.nr) + long(j - jc) * kc);
            }
        // Pieces of C (row block, column block) are dealt out one at a time,
        // so a core slowed by other work simply takes fewer.
#pragma omp for schedule(dynamic, 1)
        for (int piece = 0; piece < blocks * col_blocks; ++piece) {
            const int b = piece / col_blocks, ic = row0(b), mc = row0(b + 1) - ic;
            const int jc = piece % col_blocks * ncb, nc = std::min(ncb, N - jc);
            float* Bj = Bp + long(jc) * K;
            for (int pc = 0; pc < K; pc += kcb)
                block(mc, nc, std::min(kcb, K - pc), A + long(ic) * K + pc, K,
                      cpu::packed_b_slice(Bj, pc, nc, k.nr), C + long(ic) * N + jc, N, pc > 0);
        }
    }
}

}  // namespace mw::gemm

MW_REGISTER_VARIANT(gemm_threads_cpu, {
    .name = "threads", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 4,
    .rationale = "rung 3's SIMD tiles on every core, A read in place: threads share one packed "
                 "copy of B and take pieces of C, so FLOP/s scale with the core count",
    .needs = {"avx2"},
    .bytes = mw::gemm::cpu::simd_bytes,
    .prepare = mw::gemm::cpu_adapter(&mw::gemm::gemm_threads) });
