// The packed SIMD GEMM, as other code calls it: the pieces of the SIMD GEMM
// rungs (optimized/vectorization/gemm_simd.cpp, rung 3, defines them, since
// they are its lesson; gemm_threads.cpp, rung 4, reuses its B packing and
// blocking, and adds the OpenMP split, the order it needs (all of B packed
// before any piece of C) and a tile that reads A in place, unpacked), and
// rung 4 as a function (the fusion lever's ln_gelu and softmax_v rungs
// multiply with it).
//
// The design is GotoBLAS/BLIS's: C is computed in MR x NR register tiles; A is
// packed into MR-row panels and B into NR-column panels, each laid out in the
// exact order the micro-kernel reads it, zero-padded to whole tiles so the
// micro-kernel never branches on edges. Cache blocks wrap the tiles:
//   KC  depth of one rank-KC update: a KC x NR micro-panel of B (32 KiB at
//       KC=256, NR=32) stays in L1 while the kernel sweeps the A block;
//   MC  rows of A packed at once (rung 3; rung 4 reads them in place):
//       the MC x KC block (96 KiB) stays in L2,
//       and the MC x NC strip of C (384 KiB at NC=1024) stays in L2
//       across the KC blocks, beside the KC x NC slice of B read through it;
//   NC  columns of B packed at once, for all of K, as KC-deep slices (the
//       slice KC x NC takes half of this machine's L2: 1024 on a 2 MiB L2,
//       512 on 1 MiB); the
//       packed block is read from L2/L3 by every MC block (and, in rung 4,
//       by every thread).
// Loop nest (rung 3):  for jc (NC): pack B[:, jc]   for ic (MC): for pc (KC):
//                      pack A[ic, pc]; macro_kernel
// Rung 4 packs every NC block of B first, then deals out (ic, jc) pieces,
// each running the pc loop on A's rows in place (no pack A, KC up to 768).
#pragma once

#include <cstdlib>
#include <memory>

#include "harness/registry.hpp"

namespace mw::gemm {
// Rung 4 (optimized/vectorization/gemm_threads.cpp): C = A B, row-major fp32,
// A M x K, B K x N, on all OpenMP threads.
void gemm_threads(const float* A, const float* B, float* C, int M, int N, int K);

// The same kernel with BLAS's generality, for code that multiplies inside a
// larger computation (the model stack's forward and backward passes):
// operands are strided views, so a transposed operand is a view with swapped
// strides, never a copy, and C may be accumulated into. Packing reads the
// view once per block exactly as rung 3 packs a row-major matrix; the
// micro-kernel never knows. Defined in kernels/vectorization/gemm_ex.cpp.
struct View {
    const float* p;
    long rs, cs;  // element (i, j) is p[i * rs + j * cs]
    static View rows(const float* p, long ld) { return {p, ld, 1}; }       // row-major, row stride ld
    static View transposed(const float* p, long ld) { return {p, 1, ld}; }  // the transpose of a row-major matrix
};
// C[M x N] (row stride ldc) = A[M x K] B[K x N], or += when `accumulate`.
// gemm_ex uses all OpenMP threads (2-D tiles of C, gemm_ex.cpp); gemm_ex_serial one
// thread (rung 3), for callers that parallelize over many small products
// (attention heads) themselves.
void gemm_ex(View A, View B, float* C, long ldc, int M, int N, int K, bool accumulate);
void gemm_ex_serial(View A, View B, float* C, long ldc, int M, int N, int K, bool accumulate);
}  // namespace mw::gemm

namespace mw::gemm::cpu {

// C[0:MR, 0:NR] (+)= Ap * Bp for one full register tile; `ldc` is C's row
// stride; `accumulate` false overwrites C (the first KC block, beta = 0).
// `next` is where to prefetch into L2 while the tile is summed: one 64-byte
// line (kLineFloats) every kPrefetchEvery steps of k, so the floats
// [next, next + kc / kPrefetchEvery * kLineFloats) must lie in one buffer
// (the kernel steps the pointer along; a prefetch never faults, but pointer
// arithmetic outside a buffer, or on null, is undefined). macro_kernel
// points it at this tile's share of the next B micro-panel.
constexpr int kLineFloats = 16, kPrefetchEvery = 4;
using MicroKernel = void (*)(int kc, const float* Ap, const float* Bp, float* C, int ldc,
                             bool accumulate, const float* next);

// One ISA's micro-kernel and the cache blocking tuned for it.
struct Kernel {
    const char* isa;  // "avx512" or "avx2"
    int mr, nr;       // register tile
    int kc, mc, nc;   // cache blocks; mc is a multiple of mr, nc of nr (select_kernel's
                      // nc is sized from this machine's L2, see gemm_simd.cpp)
    MicroKernel micro;
};

// AVX-512 when the CPU has avx512f, else AVX2+FMA. Setting the environment
// variable MEMWALL_ISA=avx2 forces the fallback so tests can check both
// paths on an AVX-512 machine. Throws if the CPU has neither.
const Kernel& select_kernel();

// Packs A[0:mc, 0:kc] (row stride lda) into ceil(mc/mr) panels; panel r holds
// column p's mr values contiguously, rows past mc are zero.
void pack_a(const float* A, int lda, int mc, int kc, int mr, float* Ap);

// Packs B[0:kc, 0:nc] (row stride ldb) into ceil(nc/nr) panels; panel j holds
// row p's nr values contiguously, columns past nc are zero. nr is one of the
// kernels' panel widths (32 or 16); another throws std::invalid_argument.
void pack_b(const float* B, int ldb, int kc, int nc, int nr, float* Bp);

// The same for a strided view (gemm_ex): pack_a of A's block at (i0, p0),
// pack_b of B's block at (p0, j0).
void pack_a_view(View A, int i0, int p0, int mc, int kc, int mr, float* Ap);
void pack_b_view(View B, int p0, int j0, int kc, int nc, int nr, float* Bp);

// Floats needed by pack_a / pack_b for a block of the given size.
inline long packed_a_floats(int mc, int kc, int mr) { return long((mc + mr - 1) / mr) * mr * kc; }
inline long packed_b_floats(int kc, int nc, int nr) { return long((nc + nr - 1) / nr) * nr * kc; }
// Where the KC slice starting at row pc sits in a packed K x nc block of B
// (slices are stored one after the other, each packed_b_floats(kc, nc, nr)).
inline float* packed_b_slice(float* Bp, int pc, int nc, int nr) { return Bp + packed_b_floats(pc, nc, nr); }

// A 64-byte aligned float buffer, so every packed-panel vector load sits in
// one cache line.
std::unique_ptr<float, decltype(&std::free)> alloc_floats(long n);

// The calling thread's packing buffers for A and for B, 64-byte aligned and
// grow-only (kernels/vectorization/gemm_ex.cpp): a GEMM that packs into a
// fresh multi-MiB allocation on every call pays that memory's page faults
// every time (4 MiB of packed B at n = 1024). From 2 MiB up they sit on
// huge pages where the OS grants them, as large Buffers do.
// Valid until the same thread asks for a larger one.
float* thread_scratch_a(long floats);
float* thread_scratch_b(long floats);

// C[0:mc, 0:nc] (+)= packed A block * packed B block, tile by tile; edge tiles
// go through a scratch tile so the micro-kernel only ever sees full tiles.
// While it goes, it prefetches the next B micro-panel (into L2, a share per
// tile, through the micro-kernel) and, before each tile, the next tile's
// rows of C (into L1).
void macro_kernel(const Kernel& k, int mc, int nc, int kc, const float* Ap, const float* Bp,
                  float* C, int ldc, bool accumulate);

// The traffic model shared by rungs 3 and 4 (same MC and NC): bytes_blocked
// with mb = MC (packed B re-read once per MC block), nb = NC (A once per NC
// block: packed by rung 3, read in place by rung 4); C stays in L2 across
// the KC blocks, so it is written once. Rung 4 cuts its rows into a
// multiple of the thread count of blocks, so it can re-read B up to T - 1
// times more than this counts (12 times against 11 at M = 1024 on 2
// threads: 8% more bytes than the model says).
double simd_bytes(const Shape& s, DType);

}  // namespace mw::gemm::cpu
