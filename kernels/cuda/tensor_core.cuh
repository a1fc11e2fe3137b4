// Tensor-core instructions for the CUDA rungs, and the asynchronous copy
// that feeds them, one wrapper each (sm_80 and later): compiled by nvcc, the PTX instruction itself; under cuda-emu, a
// body of warp shuffles that follows the per-thread fragment layouts the PTX
// ISA documents ("Matrix Fragments for mma.m16n8k16 with floating point
// type", "Warp-level matrix load instruction: ldmatrix"). Each lane holds
// only its own fragment and the emulated body gathers the rest from the
// other lanes, so a kernel that hands a lane the wrong fragment computes
// the wrong product under emulation, as it would on a GPU
// (tests/emu/tensor_core.cu plants such a kernel).
//
// Lane l of the warp: g = l / 4 (the PTX ISA's groupID), t = l % 4
// (threadID_in_group). Two 16-bit elements share a 32-bit register, the
// lower column (or row, for B) in the low half.
//
//   mma_m16n8k16<T>(d, a, b, c): D = A B + C, A 16 x 16 (row-major), B 16 x 8
//   (k x n), C and D 16 x 8 in f32; T = __nv_bfloat16 or __half inputs.
//     a[0] = A[g][2t, 2t+1]     a[1] = A[g+8][2t, 2t+1]
//     a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
//     b[0] = B[2t, 2t+1][g]     b[1] = B[2t+8, 2t+9][g]
//     c[0] = C[g][2t]  c[1] = C[g][2t+1]  c[2] = C[g+8][2t]  c[3] = C[g+8][2t+1]  (d alike)
//   The products of 16-bit inputs are exact in f32; the emulation sums them
//   in double and rounds once, which a GPU's f32 accumulation matches to a
//   few units in the last place (tests compare with a tolerance).
//
//   ldmatrix<N, Trans>(r, row): N = 1, 2 or 4 8 x 8 matrices of 16-bit
//   elements from shared memory. Lane l gives `row`, the address of row
//   l % 8 of matrix l / 8 (lanes 0-7 for N = 1, 0-15 for N = 2; the others'
//   are ignored); each row is 16 contiguous, 16-byte aligned bytes. Lane l
//   receives in r[i], of matrix i: row l / 4, columns 2 (l % 4) and
//   2 (l % 4) + 1; with Trans, column l / 4 of rows 2 (l % 4) and
//   2 (l % 4) + 1 (the matrix transposed on the way: an A row-major tile
//   loaded as B's "col" fragment).
//
//   cp_async16(dst, src, src_bytes): cp.async.cg.shared.global, 16 bytes
//   from global `src` to shared `dst` (both 16-byte aligned) without
//   passing through registers; only `src_bytes` (0..16) are read, the rest
//   of the 16 zero-filled (a tile's edge: no read past the matrix).
//   cp_async_commit(): closes this thread's current group of copies;
//   cp_async_wait<N>(): waits until at most the newest N committed groups
//   are still in flight (a copy not yet committed is not waited for). The
//   copies land in shared memory only then, and other threads see them
//   after a __syncthreads that follows the wait. Per thread; no warp-wide
//   convergence needed. Under cuda-emu the destination holds poison (0xff
//   bytes, NaN in every float format) from issue to the wait that
//   completes it, so a kernel that reads a stage before waiting for it
//   fails under emulation as it may on a GPU.
//
// mma and ldmatrix: all 32 lanes of the warp must call each wrapper
// together, converged (the .sync.aligned of the instructions).
#pragma once

#include <cstdint>
#include <type_traits>

#include "harness/cuda/launch.hpp"

#if !MEMWALL_EMU
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace mw::tc {

#if MEMWALL_EMU
namespace emu_detail {
template <class T> inline double lo(unsigned r) {
    const auto h = static_cast<unsigned short>(r & 0xffffu);
    if constexpr (std::is_same_v<T, __half>) return __half2float(__half(__half_raw{h}));
    else return double(::mw::emu::detail::bf16_to_f32(h));
}
template <class T> inline double hi(unsigned r) { return lo<T>(r >> 16); }
}  // namespace emu_detail
#endif

template <class T>
__device__ inline void mma_m16n8k16(float d[4], const unsigned a[4], const unsigned b[2], const float c[4]) {
#if MEMWALL_EMU
    using namespace emu_detail;
    const unsigned full = 0xffffffffu;
    const int lane = int(threadIdx.x % 32u), g = lane / 4, t = lane % 4;
    // Row g and row g + 8 of A (16 values each), columns 2t and 2t + 1 of B.
    double rows[2][16], cols[2][16];
    for (int s = 0; s < 4; ++s) {  // lane 4g + s holds A's k = 2s, 2s+1, 2s+8, 2s+9 of rows g and g + 8
        const unsigned a0 = __shfl_sync(full, a[0], 4 * g + s), a1 = __shfl_sync(full, a[1], 4 * g + s);
        const unsigned a2 = __shfl_sync(full, a[2], 4 * g + s), a3 = __shfl_sync(full, a[3], 4 * g + s);
        rows[0][2 * s] = lo<T>(a0), rows[0][2 * s + 1] = hi<T>(a0), rows[0][2 * s + 8] = lo<T>(a2), rows[0][2 * s + 9] = hi<T>(a2);
        rows[1][2 * s] = lo<T>(a1), rows[1][2 * s + 1] = hi<T>(a1), rows[1][2 * s + 8] = lo<T>(a3), rows[1][2 * s + 9] = hi<T>(a3);
        for (int j = 0; j < 2; ++j) {  // lane 4n + s holds B's k = 2s, 2s+1 (b[0]) and 2s+8, 2s+9 (b[1]) of column n
            const int n = 2 * t + j;
            const unsigned b0 = __shfl_sync(full, b[0], 4 * n + s), b1 = __shfl_sync(full, b[1], 4 * n + s);
            cols[j][2 * s] = lo<T>(b0), cols[j][2 * s + 1] = hi<T>(b0), cols[j][2 * s + 8] = lo<T>(b1), cols[j][2 * s + 9] = hi<T>(b1);
        }
    }
    for (int i = 0; i < 4; ++i) {
        const double* r = rows[i / 2];
        const double* col = cols[i % 2];
        double acc = c[i];
        for (int k = 0; k < 16; ++k) acc += r[k] * col[k];
        d[i] = float(acc);
    }
#else
    static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "bf16 or f16 inputs");
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%10,%11,%12,%13};\n"
            : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
              "f"(c[3]));
    else
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%10,%11,%12,%13};\n"
            : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
              "f"(c[3]));
#endif
}

template <int N, bool Trans = false> __device__ inline void ldmatrix(unsigned r[N], const void* row) {
    static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
#if MEMWALL_EMU
    const unsigned full = 0xffffffffu;
    const int lane = int(threadIdx.x % 32u);
    const auto mine = reinterpret_cast<std::uintptr_t>(row);
    for (int i = 0; i < N; ++i) {
        if (!Trans) {
            const auto at = reinterpret_cast<const unsigned short*>(__shfl_sync(full, mine, 8 * i + lane / 4));
            r[i] = unsigned(at[2 * (lane % 4)]) | unsigned(at[2 * (lane % 4) + 1]) << 16;
        } else {
            const auto r0 = reinterpret_cast<const unsigned short*>(__shfl_sync(full, mine, 8 * i + 2 * (lane % 4)));
            const auto r1 = reinterpret_cast<const unsigned short*>(__shfl_sync(full, mine, 8 * i + 2 * (lane % 4) + 1));
            r[i] = unsigned(r0[lane / 4]) | unsigned(r1[lane / 4]) << 16;
        }
    }
#else
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
    if constexpr (N == 1 && !Trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(addr));
    else if constexpr (N == 1)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(addr));
    else if constexpr (N == 2 && !Trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
    else if constexpr (N == 2)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(r[0]), "=r"(r[1])
                     : "r"(addr));
    else if constexpr (!Trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(addr));
#endif
}

__device__ inline void cp_async16(void* dst, const void* src, int src_bytes = 16) {
#if MEMWALL_EMU
    ::mw::emu::detail::async_copy(dst, src, 16, src_bytes);
#else
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(src_bytes));
#endif
}

__device__ inline void cp_async_commit() {
#if MEMWALL_EMU
    ::mw::emu::detail::async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int N> __device__ inline void cp_async_wait() {
    static_assert(N >= 0 && N <= 7, "cp.async.wait_group takes 0..7");
#if MEMWALL_EMU
    ::mw::emu::detail::async_wait(N);
#else
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

}  // namespace mw::tc
