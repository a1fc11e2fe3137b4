// GEMM, vectorization lever, rung 3: packed panels + SIMD register-blocked
// micro-kernel (single-threaded), the GotoBLAS/BLIS design.
//
// Change from rung 2: rung 2's inner loop loads and stores a C element for
// every FMA (2 loads + 1 store per 4-wide SSE multiply-add), so it is bound
// by load/store ports, not by arithmetic. Here an MR x NR tile of C lives in
// vector registers for a whole KC-deep sweep:
//   AVX-512: 12 x 32 tile = 24 zmm accumulators; per step of k, 2 loads of B
//            and 12 broadcasts of A feed 24 FMAs of 16 lanes (768 FLOPs);
//   AVX2:     6 x 16 tile = 12 ymm accumulators, 12 FMAs of 8 lanes per step.
// C is touched once per KC block instead of once per k. To make the kernel's
// loads unit-stride and aligned, A and B are first copied ("packed") into
// panels in exactly the order the kernel reads them, zero-padded so edge
// tiles need no branches (kernels/vectorization/gemm_cpu.hpp describes the blocking).
// Bytes: B is packed once and its packed copy streamed from L2/L3 once per
// MC-row block; A is packed once per NC-column block; C stays in L2 while its
// MC-row strip is being summed. FLOPs: 2*M*N*K (padding lanes aside).
// Packing A asks for the next four rows of the block while it transposes the
// current four (short runs the hardware prefetcher does not get ahead of).
// While a tile is summed the micro-kernel asks for a share of the next B
// micro-panel into L2 (a line per four steps of k), so the first tile on a
// panel finds it there rather than out in L3 or DRAM (all of it when the
// block has at least 8 tiles of AVX-512, 4 of AVX2; the first panel of a
// call is not prefetched). At 2048^3 on the Xeon
// of results/xeon-260m-kvm-2c (scratch driver, old and new interleaved, a
// busy day): two cores 207 against 188 GFLOP/s on the mean, ahead in 7
// rounds of 8; one core 101 against 82, ahead in 6 of 6. Before each tile
// the macro-kernel also asks for the next tile's rows of C, into L1 (two cores, same
// driver: 2048^3 219 against 200 on the mean, ahead in 10 rounds of 10, the
// best the same; 1024^3 within the noise).
// The packing buffers are the calling thread's and kept from call to call
// (thread_scratch_a/b in kernels/vectorization/gemm_cpu.hpp): a timed call
// pays for packing, not for faulting in fresh pages.
// The micro-kernels are written with intrinsics and a per-function target
// attribute, so the binary still runs on any x86-64 and picks the ISA at run
// time (__builtin_cpu_supports).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include "harness/isa.hpp"
#include "kernels/vectorization/gemm_cpu.hpp"
#include "reference/vectorization/gemm.hpp"

namespace mw::gemm::cpu {

namespace {

// One step of k: MR broadcasts of A times two NR/2-wide vectors of B.
template <int MR>
MW_TARGET_AVX512 [[gnu::always_inline]] inline void step_avx512(const float*& a, const float*& b, __m512 (&c0)[MR],
                                                              __m512 (&c1)[MR]) {
    const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
        const __m512 ai = _mm512_set1_ps(a[i]);
        c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
        c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
    }
    a += MR;
    b += 32;
}

// KC steps on one tile; the MR x 2 accumulators never leave registers until
// the end of the sweep. Every fourth step also asks for one line of `next`.
// (micro_avx2 below is the same on 8-lane vectors.)
template <int MR>
MW_TARGET_AVX512
void micro_avx512(int kc, const float* a, const float* b, float* c, int ldc, bool accumulate, const float* next) {
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
    int p = 0;
    for (; p + kPrefetchEvery <= kc; p += kPrefetchEvery, next += kLineFloats) {
        __builtin_prefetch(next, 0, 2);
#pragma GCC unroll 1  // kept rolled: unrolled, GCC 12 runs out of registers and spills accumulators
        for (int u = 0; u < kPrefetchEvery; ++u) step_avx512<MR>(a, b, c0, c1);
    }
    for (; p < kc; ++p) step_avx512<MR>(a, b, c0, c1);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
        float* ci = c + long(i) * ldc;
        if (accumulate) {
            c0[i] = _mm512_add_ps(c0[i], _mm512_loadu_ps(ci));
            c1[i] = _mm512_add_ps(c1[i], _mm512_loadu_ps(ci + 16));
        }
        _mm512_storeu_ps(ci, c0[i]);
        _mm512_storeu_ps(ci + 16, c1[i]);
    }
}

// One step of k: MR broadcasts of A times two NR/2-wide vectors of B.
template <int MR>
MW_TARGET_AVX2 [[gnu::always_inline]] inline void step_avx2(const float*& a, const float*& b, __m256 (&c0)[MR],
                                                          __m256 (&c1)[MR]) {
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
        const __m256 ai = _mm256_broadcast_ss(a + i);
        c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
        c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
    }
    a += MR;
    b += 16;
}

template <int MR>
MW_TARGET_AVX2
void micro_avx2(int kc, const float* a, const float* b, float* c, int ldc, bool accumulate, const float* next) {
    __m256 c0[MR], c1[MR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm256_setzero_ps();
    int p = 0;
    for (; p + kPrefetchEvery <= kc; p += kPrefetchEvery, next += kLineFloats) {
        __builtin_prefetch(next, 0, 2);
#pragma GCC unroll 1  // kept rolled: unrolled, GCC 12 runs out of registers and spills accumulators
        for (int u = 0; u < kPrefetchEvery; ++u) step_avx2<MR>(a, b, c0, c1);
    }
    for (; p < kc; ++p) step_avx2<MR>(a, b, c0, c1);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
        float* ci = c + long(i) * ldc;
        if (accumulate) {
            c0[i] = _mm256_add_ps(c0[i], _mm256_loadu_ps(ci));
            c1[i] = _mm256_add_ps(c1[i], _mm256_loadu_ps(ci + 8));
        }
        _mm256_storeu_ps(ci, c0[i]);
        _mm256_storeu_ps(ci + 8, c1[i]);
    }
}

// KC*NR*4 = 32 KiB of B micro-panel for L1. L2 holds what one KC slice
// touches: the MC x KC block of A (96 KiB), the MC x NC strip of C that the
// slice adds into and the KC x NC slice of B that the micro-panels are read
// from. KC, MC and MR/NR are constants, sized on a Xeon with a 48 KiB L1d and
// a 2 MiB L2; NC is taken from the L2 size the OS reports (nc_for_l2 below):
// the slice gets half of it. On that Xeon that is NC = 1024 (1 MiB slice,
// 384 KiB strip), the value measured best there: NC was 2048 at first,
// 2.8 MiB per slice, so at N = 2048 every KC slice found the C strip back in
// L3 (on the Xeon of results/xeon-260m-kvm-2c, `memwall run gemm --variant
// threads --variant openblas --skip-naive --shape m=2048,n=2048,k=2048
// --threads 1 --rounds 3`: 110 GFLOP/s (0.71x OpenBLAS) at NC = 2048, 142
// (0.913x) at NC = 1024). On the Zen 4 EPYC of results/epyc-kvm-2c (1 MiB
// L2) it is NC = 512, 800 KiB in all; with 1024 there, the slice alone filled
// L2 (`memwall run gemm --variant threads --variant onednn --skip-naive
// --shape m=1024,n=1024,k=1024 --shape m=2048,n=2048,k=2048 --threads 2
// --rounds 2 --budget 1`, NC from an environment variable in a scratch
// build: 1024^3 9.98 ms at NC = 512 against 12.16 ms at 1024, oneDNN 9.54
// and 9.70 in the same runs; 2048^3 80.9 against 81.8 ms; NC = 256 and 384,
// KC = 128, 192, 320 and 384, MC = 72, 120, 144, 192 and 240 no better).
// The Zen 3 EPYC's 512 KiB L2 gives its AVX2 kernel NC = 256 by the same
// rule (derived, not measured there).
constexpr Kernel kAvx512 = {"avx512", 12, 32, 256, 96, 1024, &micro_avx512<12>};
constexpr Kernel kAvx2 = {"avx2", 6, 16, 256, 96, 1024, &micro_avx2<6>};
constexpr int kMaxTile = 16 * 32;  // largest mr * nr above, for the edge scratch tile
// Rung 4 places NC block jc at jc * K floats of its packed B: whole panels only.
static_assert(kAvx512.nc % kAvx512.nr == 0 && kAvx2.nc % kAvx2.nr == 0, "NC must be a multiple of NR");
static_assert(kAvx512.mc % kAvx512.mr == 0 && kAvx2.mc % kAvx2.mr == 0, "MC must be a multiple of MR");

}  // namespace

// NC for this machine: the largest multiple of nr whose KC x NC slice of
// packed B (kc * nc floats) takes at most half of the per-core L2 (as
// sysconf reports it: this file is also linked into the grader's worker,
// which has no calibrate code), within [256, 2048]; the kernel's own NC
// where the L2 size is unknown.
static int nc_for_l2(const Kernel& k) {
    const double l2 = double(sysconf(_SC_LEVEL2_CACHE_SIZE));
    if (l2 <= 0) return k.nc;
    const int nc = int(l2 / 2 / (double(k.kc) * sizeof(float))) / k.nr * k.nr;
    return std::clamp(nc, 256, 2048);
}

const Kernel& select_kernel() {
    static const Kernel avx512 = {kAvx512.isa, kAvx512.mr, kAvx512.nr, kAvx512.kc, kAvx512.mc, nc_for_l2(kAvx512), kAvx512.micro};
    static const Kernel avx2 = {kAvx2.isa, kAvx2.mr, kAvx2.nr, kAvx2.kc, kAvx2.mc, nc_for_l2(kAvx2), kAvx2.micro};
    return isa::pick() == isa::Isa::avx512 ? avx512 : avx2;
}

void pack_a(const float* A, int lda, int mc, int kc, int mr, float* Ap) {
    for (int i0 = 0; i0 < mc; i0 += mr, Ap += long(mr) * kc) {
        const int rows = std::min(mr, mc - i0);
        int i = 0;
        // Four rows at a time: a 4 x 4 block is read as four row vectors,
        // transposed in registers and stored as four 4-float runs of the
        // panel (column p's values for these rows are adjacent there).
        for (; i + 4 <= rows; i += 4) {
            const float* r = A + long(i0 + i) * lda;
            // The block's next four rows, requested now: each is a run of
            // only kc floats (1 KiB), too short for the hardware prefetcher
            // to get ahead of, and once the operands outgrow the cache each
            // line is a DRAM miss. At 2048^3 on the Xeon of
            // results/xeon-260m-kvm-2c (scratch driver, 8 interleaved
            // rounds): one core best 129 GFLOP/s against 121, ahead in 7
            // rounds of 8; two cores 6% more on the mean of 16 calls (same
            // best); 1024^3 within the noise.
            if (i0 + i + 8 <= mc)
                for (int q = 4; q < 8; ++q)
                    for (int p = 0; p < kc; p += 16) __builtin_prefetch(r + long(q) * lda + p, 0, 3);
            int p = 0;
            for (; p + 4 <= kc; p += 4) {
                __m128 r0 = _mm_loadu_ps(r + p), r1 = _mm_loadu_ps(r + lda + p);
                __m128 r2 = _mm_loadu_ps(r + 2L * lda + p), r3 = _mm_loadu_ps(r + 3L * lda + p);
                _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
                _mm_storeu_ps(Ap + long(p) * mr + i, r0);
                _mm_storeu_ps(Ap + long(p + 1) * mr + i, r1);
                _mm_storeu_ps(Ap + long(p + 2) * mr + i, r2);
                _mm_storeu_ps(Ap + long(p + 3) * mr + i, r3);
            }
            for (; p < kc; ++p)
                for (int q = 0; q < 4; ++q) Ap[long(p) * mr + i + q] = r[long(q) * lda + p];
        }
        for (; i < rows; ++i) {
            const float* row = A + long(i0 + i) * lda;
            for (int p = 0; p < kc; ++p) Ap[long(p) * mr + i] = row[p];
        }
        for (int p = 0; p < kc && rows < mr; ++p)
            for (int q = rows; q < mr; ++q) Ap[long(p) * mr + q] = 0.0f;
    }
}

// Row by row: row p of the block is read once, front to back, and its NR-float
// runs are dealt to the panels (consecutive panels lie kc * NR floats apart),
// each run a copy of a constant size the compiler inlines as vector moves.
// Packing panel by panel read B down a column of 128-byte runs a row stride
// apart, and its std::copy of a run size known only at run time was a
// library memmove per run (32768 at n = 1024). On the Zen 4 EPYC of
// results/epyc-kvm-2c, perf of a rung-4 run at 1024^3 put that memmove at
// 1.9% of the samples (5.8% in a slower-memory process) and pack_b row by
// row at 1.4%; the best times did not move beyond the noise (paired, old
// packing built beside it, 6 interleaved rounds: 9.92-10.57 against
// 9.91-10.61 ms at 1024^3, 80.6-84.4 against 81.3-85.3 ms at 2048^3).
template <int NR>
static void pack_b_rows(const float* B, int ldb, int kc, int nc, float* Bp) {
    const int full = nc / NR, rest = nc % NR;
    const long panel = long(NR) * kc;
    for (int p = 0; p < kc; ++p) {
        const float* b = B + long(p) * ldb;
        float* d = Bp + long(p) * NR;
        for (int j = 0; j < full; ++j) std::memcpy(d + j * panel, b + j * NR, NR * sizeof(float));
        if (rest > 0) {
            float* t = d + full * panel;
            std::memcpy(t, b + full * NR, rest * sizeof(float));
            std::fill(t + rest, t + NR, 0.0f);
        }
    }
}

void pack_b(const float* B, int ldb, int kc, int nc, int nr, float* Bp) {
    if (nr == kAvx512.nr) return pack_b_rows<kAvx512.nr>(B, ldb, kc, nc, Bp);
    if (nr == kAvx2.nr) return pack_b_rows<kAvx2.nr>(B, ldb, kc, nc, Bp);
    throw std::invalid_argument("pack_b: nr = " + std::to_string(nr) + " is no kernel's panel width (choices: " +
                                std::to_string(kAvx512.nr) + ", " + std::to_string(kAvx2.nr) + ")");
}

void macro_kernel(const Kernel& k, int mc, int nc, int kc, const float* Ap, const float* Bp,
                  float* C, int ldc, bool accumulate) {
    // jr outer, ir inner: one KC x NR micro-panel of B stays in L1 while the
    // kernel sweeps the whole packed A block out of L2.
    // Floats in a micro-panel of B, and in the share of the next one that
    // each tile's kernel prefetches.
    const long panel = long(k.nr) * kc, share = kc / kPrefetchEvery * kLineFloats;
    for (int j = 0; j < nc; j += k.nr) {
        const int cols = std::min(k.nr, nc - j);
        const float* b = Bp + long(j) * kc;
        for (int i = 0; i < mc; i += k.mr) {
            const int rows = std::min(k.mr, mc - i);
            const float* a = Ap + long(i) * kc;
            float* c = C + long(i) * ldc + j;
            // Tile t on this panel asks for share t of the next micro-panel of
            // B, into L2: with at least panel / share tiles (8 for AVX-512's
            // 12 x 32 at any KC) the next panel arrives whole; past that the
            // last share is asked for again. Without it, the first tile on a
            // panel finds it out in L3 or DRAM (its slice was last used a
            // row block ago) and reads it at a line every few cycles, more
            // than the memory gives one core. The last panel has no next one
            // in this block: it asks for its own first share, already in L1.
            const float* next = b;
            if (j + k.nr < nc) next = b + panel + std::min(long(i / k.mr) * share, panel - share);
            // The next tile's rows of C, into L1 (a read prefetch, prefetcht0,
            // the one measured; prefetchw needs the prfchw target): the
            // kernel's last act on a tile is to load (when accumulating) and
            // store its C rows, each a miss once the strip has left L1, and
            // on the first KC slice a miss all the way to memory.
            int ni = i + k.mr, nj = j;
            if (ni >= mc) ni = 0, nj += k.nr;
            if (nj < nc) {
                const int nrows = std::min(k.mr, mc - ni), ncols = std::min(k.nr, nc - nj);
                for (int r = 0; r < nrows; ++r) {
                    // every line the row's ncols floats touch (the row need not start on one)
                    const auto first = reinterpret_cast<std::uintptr_t>(C + long(ni + r) * ldc + nj) / 64 * 64;
                    const auto last = reinterpret_cast<std::uintptr_t>(C + long(ni + r) * ldc + nj + ncols - 1);
                    for (auto line = first; line <= last; line += 64)
                        __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 3);
                }
            }
            if (rows == k.mr && cols == k.nr) {
                k.micro(kc, a, b, c, ldc, accumulate, next);
                continue;
            }
            // Edge tile: compute the full padded tile into scratch, copy the
            // valid part, so the kernel never writes outside C.
            alignas(64) float tile[kMaxTile];
            k.micro(kc, a, b, tile, k.nr, false, next);
            for (int r = 0; r < rows; ++r)
                for (int q = 0; q < cols; ++q)
                    c[long(r) * ldc + q] = tile[r * k.nr + q] + (accumulate ? c[long(r) * ldc + q] : 0.0f);
        }
    }
}

std::unique_ptr<float, decltype(&std::free)> alloc_floats(long n) {
    const std::size_t bytes = (std::size_t(n) * sizeof(float) + 63) / 64 * 64;
    return {static_cast<float*>(std::aligned_alloc(64, bytes)), &std::free};
}

// Bytes (the blocking of the kernel that runs): the packed B block is re-read once per MC-row
// block, A once per NC-column block, C written once (it stays in L2 across the
// KC slices).
double simd_bytes(const Shape& s, DType) { return bytes_blocked(s, select_kernel().mc, select_kernel().nc); }

}  // namespace mw::gemm::cpu

namespace mw::gemm {

void gemm_simd(const float* A, const float* B, float* C, int M, int N, int K) {
    const cpu::Kernel& k = cpu::select_kernel();
    float* Ap = cpu::thread_scratch_a(cpu::packed_a_floats(std::min(k.mc, M), std::min(k.kc, K), k.mr));
    float* Bp = cpu::thread_scratch_b(cpu::packed_b_floats(K, std::min(k.nc, N), k.nr));
    for (int jc = 0; jc < N; jc += k.nc) {
        const int nc = std::min(k.nc, N - jc);
        // All of K for these NC columns, packed once as KC-deep slices.
        for (int pc = 0; pc < K; pc += k.kc)
            cpu::pack_b(B + long(pc) * N + jc, N, std::min(k.kc, K - pc), nc, k.nr,
                        cpu::packed_b_slice(Bp, pc, nc, k.nr));
        for (int ic = 0; ic < M; ic += k.mc) {
            const int mc = std::min(k.mc, M - ic);
            // pc inside ic: the MC x NC strip of C stays in L2 across slices.
            for (int pc = 0; pc < K; pc += k.kc) {
                const int kc = std::min(k.kc, K - pc);
                cpu::pack_a(A + long(ic) * K + pc, K, mc, kc, k.mr, Ap);
                cpu::macro_kernel(k, mc, nc, kc, Ap, cpu::packed_b_slice(Bp, pc, nc, k.nr),
                                  C + long(ic) * N + jc, N, pc > 0);
            }
        }
    }
}

}  // namespace mw::gemm

MW_REGISTER_VARIANT(gemm_simd_cpu, {
    .name = "simd", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 3,
    .rationale = "packed panels and an AVX-512 12x32 register tile do 24 FMAs per 2 loads "
                 "of B, so the core runs at its FMA rate instead of its load rate",
    .needs = {"avx2"},
    .bytes = mw::gemm::cpu::simd_bytes,
    .prepare = mw::gemm::cpu_adapter(&mw::gemm::gemm_simd) });
