// gemm_ex: the packed SIMD GEMM of rungs 3 and 4 (gemm_simd.cpp,
// gemm_threads.cpp) with the generality code outside the lesson needs —
// transposed operands, row strides, C += A B — for the model stack's forward
// and backward passes (model/, optimized/model/). Same pack
// layout, same micro-kernel and same cache blocks (select_kernel()); only
// the packing reads through a strided view, and the threaded version deals
// out 2-D tiles of C (MC rows by NR-multiple column strips) per NC block.
//
// Why 2-D tiles: the backward pass's weight gradients are dW = X^T dY with
// M = d_in (256..704 rows) and K = tokens (thousands), so rung 4's split of
// the rows alone gives 4-8 blocks for 2 threads, each an eighth to a quarter
// of the call: a core slowed by another process for a moment holds the
// other at the last barrier for up to that long. Cutting the columns too
// (in whole NR panels) gives at least 4 tiles per thread; the A block is
// then packed once per column tile, a copy of M*K floats per tile against
// 2*M*N*K FLOPs (under 1% at N >= 256).
//
// Packing buffers are grow-only thread_local scratch: a training step makes
// dozens of GEMM calls, and a fresh multi-MiB allocation per call would pay
// its page faults every time.
#include <omp.h>

#include <algorithm>

#include "harness/registry.hpp"
#include "kernels/vectorization/gemm_cpu.hpp"

namespace mw::gemm::cpu {

// Both packs walk the source along whichever of its strides is 1, so every
// source line is read once in order; the scattered side is the packed
// panel, which is small enough to sit in L1 (kc x mr or kc x nr floats).
void pack_a_view(View A, int i0, int p0, int mc, int kc, int mr, float* Ap) {
    for (int r0 = 0; r0 < mc; r0 += mr, Ap += long(mr) * kc) {
        const int rows = std::min(mr, mc - r0);
        const float* base = A.p + long(i0 + r0) * A.rs + long(p0) * A.cs;
        if (A.cs == 1) {  // row-major A: row i is contiguous along p
            for (int i = 0; i < rows; ++i) {
                const float* row = base + long(i) * A.rs;
                for (int p = 0; p < kc; ++p) Ap[long(p) * mr + i] = row[p];
            }
        } else {  // column p is contiguous (rs == 1) or nothing is
            for (int p = 0; p < kc; ++p) {
                const float* col = base + long(p) * A.cs;
                for (int i = 0; i < rows; ++i) Ap[long(p) * mr + i] = col[long(i) * A.rs];
            }
        }
        for (int p = 0; p < kc && rows < mr; ++p)
            for (int i = rows; i < mr; ++i) Ap[long(p) * mr + i] = 0.0f;
    }
}

void pack_b_view(View B, int p0, int j0, int kc, int nc, int nr, float* Bp) {
    for (int c0 = 0; c0 < nc; c0 += nr, Bp += long(nr) * kc) {
        const int cols = std::min(nr, nc - c0);
        const float* base = B.p + long(p0) * B.rs + long(j0 + c0) * B.cs;
        if (B.cs == 1) {  // row-major B: row p is contiguous along j
            for (int p = 0; p < kc; ++p) {
                const float* row = base + long(p) * B.rs;
                std::copy(row, row + cols, Bp + long(p) * nr);
            }
        } else {  // a transposed B: column j is contiguous along p
            for (int j = 0; j < cols; ++j) {
                const float* col = base + long(j) * B.cs;
                for (int p = 0; p < kc; ++p) Bp[long(p) * nr + j] = col[long(p) * B.rs];
            }
        }
        for (int p = 0; p < kc && cols < nr; ++p) std::fill(Bp + long(p) * nr + cols, Bp + long(p + 1) * nr, 0.0f);
    }
}

namespace {

// A grow-only packing buffer, made by Buffer::make: from 2 MiB up it is
// mapped on huge pages where the OS grants them (harness/memtrack.hpp),
// since packed B is read panel by panel all through the call; on 4 KiB
// pages every 64 lines cost a TLB miss, a two-level walk under a
// hypervisor. On the Zen 4 EPYC of results/epyc-kvm-2c, rung 4 at 2048^3 on
// 2 threads against the same rung with the old buffer (a std::vector on
// 4 KiB pages), interleaved rounds in one process: about 1% faster in every
// round of two runs (79.6-79.8 ms against 80.9-82.9, then 80.3-83.8
// against 81.2-84.6; oneDNN 78.5-79.5 in both); at 1024^3 no difference.
float* grow(Buffer& buf, long floats) {
    if (!buf.data || buf.count < std::size_t(floats)) buf = Buffer::make("gemm packing scratch", DType::f32, std::size_t(floats));
    return buf.as<float>();
}

thread_local Buffer tl_a, tl_b;

}  // namespace

float* thread_scratch_a(long floats) { return grow(tl_a, floats); }
float* thread_scratch_b(long floats) { return grow(tl_b, floats); }

}  // namespace mw::gemm::cpu

namespace mw::gemm {

void gemm_ex_serial(View A, View B, float* C, long ldc, int M, int N, int K, bool accumulate) {
    if (M <= 0 || N <= 0) return;
    const cpu::Kernel& k = cpu::select_kernel();
    if (K <= 0) {
        for (int i = 0; i < M && !accumulate; ++i) std::fill(C + long(i) * ldc, C + long(i) * ldc + N, 0.0f);
        return;
    }
    const int ncb = std::min(k.nc, N);
    float* Ap = cpu::thread_scratch_a(cpu::packed_a_floats(std::min(k.mc, M), std::min(k.kc, K), k.mr));
    float* Bp = cpu::thread_scratch_b(cpu::packed_b_floats(K, ncb, k.nr));
    for (int jc = 0; jc < N; jc += k.nc) {
        const int nc = std::min(k.nc, N - jc);
        for (int pc = 0; pc < K; pc += k.kc)
            cpu::pack_b_view(B, pc, jc, std::min(k.kc, K - pc), nc, k.nr, cpu::packed_b_slice(Bp, pc, nc, k.nr));
        for (int ic = 0; ic < M; ic += k.mc) {
            const int mc = std::min(k.mc, M - ic);
            for (int pc = 0; pc < K; pc += k.kc) {
                const int kc = std::min(k.kc, K - pc);
                cpu::pack_a_view(A, ic, pc, mc, kc, k.mr, Ap);
                cpu::macro_kernel(k, mc, nc, kc, Ap, cpu::packed_b_slice(Bp, pc, nc, k.nr), C + long(ic) * ldc + jc,
                                  int(ldc), accumulate || pc > 0);
            }
        }
    }
}

void gemm_ex(View A, View B, float* C, long ldc, int M, int N, int K, bool accumulate) {
    const int threads = omp_get_max_threads();
    const cpu::Kernel& k = cpu::select_kernel();
    // Small products: the fork/join would cost more than it saves.
    if (threads == 1 || double(M) * N * K < 2e5 || K <= 0 || omp_in_parallel())
        return gemm_ex_serial(A, B, C, ldc, M, N, K, accumulate);
    const int ncb = std::min(k.nc, N);
    float* Bp = cpu::thread_scratch_b(cpu::packed_b_floats(K, ncb, k.nr));
    const long a_floats = cpu::packed_a_floats(std::min(k.mc, M), std::min(k.kc, K), k.mr);
    for (int jc = 0; jc < N; jc += k.nc) {
        const int nc = std::min(k.nc, N - jc);
        // Column tiles in whole NR panels, enough for >= 4 tiles per thread.
        const int m_blocks = (M + k.mc - 1) / k.mc, panels = (nc + k.nr - 1) / k.nr;
        const int n_tiles = std::clamp((4 * threads + m_blocks - 1) / m_blocks, 1, panels);
        const int tile_cols = (panels + n_tiles - 1) / n_tiles * k.nr;
#pragma omp parallel num_threads(threads)
        {
#pragma omp for collapse(2) schedule(dynamic, 4)
            for (int pc = 0; pc < K; pc += k.kc)
                for (int j = 0; j < nc; j += k.nr) {
                    const int kc = std::min(k.kc, K - pc);
                    cpu::pack_b_view(B, pc, jc + j, kc, std::min(k.nr, nc - j), k.nr,
                                     cpu::packed_b_slice(Bp, pc, nc, k.nr) + long(j) * kc);
                }
            float* Ap = cpu::thread_scratch_a(a_floats);
#pragma omp for collapse(2) schedule(dynamic, 1)
            for (int ic = 0; ic < M; ic += k.mc)
                for (int j0 = 0; j0 < nc; j0 += tile_cols) {
                    const int mc = std::min(k.mc, M - ic), cols = std::min(tile_cols, nc - j0);
                    for (int pc = 0; pc < K; pc += k.kc) {
                        const int kc = std::min(k.kc, K - pc);
                        cpu::pack_a_view(A, ic, pc, mc, kc, k.mr, Ap);
                        cpu::macro_kernel(k, mc, cols, kc, Ap, cpu::packed_b_slice(Bp, pc, nc, k.nr) + long(j0) * kc,
                                          C + long(ic) * ldc + jc + j0, int(ldc), accumulate || pc > 0);
                    }
                }
        }
    }
}

}  // namespace mw::gemm
