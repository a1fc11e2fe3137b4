// What the tensor-core GEMM rungs share: the block tile, its bf16 shared
// layouts, a warp's work on one staged tile (fragments by ldmatrix,
// products by mma.sync) and its store, and the cp.async pipeline. The
// rungs: gemm_wmma.cu (rung 5, the tiles through the wmma API), gemm_mma.cu
// (rung 6, by hand, staged by plain loads), gemm_mma_pipelined.cu (rung 7,
// by cp.async in a three-stage pipeline) and gemm_mma_swizzled.cu (rung 8,
// the same with a swizzled shared layout); the
// instruction wrappers and the fragment layouts they follow:
// kernels/cuda/tensor_core.cuh.
//
// A block of 4 warps computes a 64x64 block of C, each warp a 32x32
// quarter as 2 x 4 tiles of 16x8 (one mma.sync m16n8k16 each per 16 of K),
// from a 64x32 tile of A and a 32x64 tile of B in shared memory, bf16.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"
#include "harness/registry.hpp"
#include "kernels/cuda/tensor_core.cuh"

namespace {

constexpr int MMA_BM = 64, MMA_BN = 64, MMA_BK = 32;  // block tile of C, and K step
constexpr int MMA_THREADS = 128;                      // 4 warps, 2 x 2 over the block tile
constexpr int MMA_PAD = 8;  // bf16 elements after each shared row: rows stay 16-byte aligned for ldmatrix

// One stage of staged operands (bf16 bits), two layouts. Each row of a
// tile is whole 16-byte chunks (8 bf16): what one cp.async moves, and one
// row of an 8x8 matrix that ldmatrix reads. at_a(r, c) / at_b(r, c): the
// element at row r, column c (c % 8 == 0: the start of its chunk).
//
// Padded (rungs 5-7): 8 bf16 after each row, so that rows are 80 and
// 144 bytes apart: 5 and 9 groups of 16 bytes, so the 8 consecutive rows an
// ldmatrix reads step through all 8 of the 128 bytes' 16-byte bank groups
// (unpadded, 64 and 128 bytes, they would share 2 and 1 of them).
struct MmaPadded {
    unsigned short a[MMA_BM][MMA_BK + MMA_PAD];
    unsigned short b[MMA_BK][MMA_BN + MMA_PAD];
    __device__ unsigned short* at_a(int r, int c) { return &a[r][c]; }
    __device__ unsigned short* at_b(int r, int c) { return &b[r][c]; }
    __device__ const unsigned short* at_a(int r, int c) const { return &a[r][c]; }
    __device__ const unsigned short* at_b(int r, int c) const { return &b[r][c]; }
};

// Swizzled (rung 8): no padding; chunk j of row r is stored at chunk
// j ^ f(r), with f(r) = (r / 2) % 4 for A's 64-byte rows (two rows per 128
// bytes of banks) and r % 8 for B's 128-byte rows. The 8 rows an ldmatrix
// reads (at one chunk column) land in 8 different 16-byte bank groups, as
// padded rows do, with no shared memory spent on padding.
struct MmaSwizzled {
    unsigned short a[MMA_BM][MMA_BK];
    unsigned short b[MMA_BK][MMA_BN];
    __device__ static int swz_a(int r, int c) { return ((c / 8) ^ ((r / 2) % 4)) * 8 + c % 8; }
    __device__ static int swz_b(int r, int c) { return ((c / 8) ^ (r % 8)) * 8 + c % 8; }
    __device__ unsigned short* at_a(int r, int c) { return &a[r][swz_a(r, c)]; }
    __device__ unsigned short* at_b(int r, int c) { return &b[r][swz_b(r, c)]; }
    __device__ const unsigned short* at_a(int r, int c) const { return &a[r][swz_a(r, c)]; }
    __device__ const unsigned short* at_b(int r, int c) const { return &b[r][swz_b(r, c)]; }
};

struct MmaAcc {
    float v[2][4][4];  // [16-row tile][8-column tile][fragment element]
};

// The warp's 32x32 of the block tile: rows wm.., columns wn.. .
__device__ inline int mma_warp_row() { return int(threadIdx.x / 32) / 2 * 32; }
__device__ inline int mma_warp_col() { return int(threadIdx.x / 32) % 2 * 32; }

// acc += the warp's part of A_tile B_tile. A's fragment of a 16x16 tile:
// lanes 8j..8j+7 give the rows of matrix j (a[0]: rows 0-7 cols 0-7, a[1]:
// rows 8-15, a[2]: cols 8-15, a[3]: both); B's: rows k 0-15 of an 8-wide
// column strip, transposed into the "col" fragment.
template <class Tiles> __device__ inline void mma_warp_step(const Tiles& t, MmaAcc& acc) {
    const int lane = int(threadIdx.x % 32), j = lane / 8, wm = mma_warp_row(), wn = mma_warp_col();
    for (int kk = 0; kk < MMA_BK; kk += 16) {
        unsigned a[2][4], b[4][2];
        for (int mi = 0; mi < 2; ++mi)
            mw::tc::ldmatrix<4>(a[mi], t.at_a(wm + mi * 16 + (j % 2) * 8 + lane % 8, kk + (j / 2) * 8));
        for (int ni = 0; ni < 4; ++ni) mw::tc::ldmatrix<2, true>(b[ni], t.at_b(kk + lane % 16, wn + ni * 8));
        for (int mi = 0; mi < 2; ++mi)
            for (int ni = 0; ni < 4; ++ni)
                mw::tc::mma_m16n8k16<__nv_bfloat16>(acc.v[mi][ni], a[mi], b[ni], acc.v[mi][ni]);
    }
}

// The warp's accumulators into C (M x N, row-major) for the block tile at
// (bm, bn). D's fragment: lane (g, t) holds rows g and g + 8, columns 2t
// and 2t + 1.
__device__ inline void mma_store(const MmaAcc& acc, float* C, int M, int N, int bm, int bn) {
    const int lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
    for (int mi = 0; mi < 2; ++mi)
        for (int ni = 0; ni < 4; ++ni)
            for (int h = 0; h < 2; ++h) {
                const int r = bm + mma_warp_row() + mi * 16 + g + 8 * h, c = bn + mma_warp_col() + ni * 8 + 2 * t;
                if (r >= M) continue;
                if (c < N) C[std::size_t(r) * N + c] = acc.v[mi][ni][2 * h];
                if (c + 1 < N) C[std::size_t(r) * N + c + 1] = acc.v[mi][ni][2 * h + 1];
            }
}

// The multiply-adds the block tiles really do, as FLOPs: every dimension
// padded to the tile (zeros multiplied at the edges).
inline double mma_padded_flops(const mw::Shape& s) {
    const auto up = [](double x, double to) { return std::ceil(x / to) * to; };
    return 2.0 * up(double(s["m"]), MMA_BM) * up(double(s["n"]), MMA_BN) * up(double(s["k"]), MMA_BK);
}

__device__ inline unsigned short mma_to_bf16(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }

// Rungs 5 and 6: the block stages tile k0 of A (M x K) and B (K x N), fp32
// in global memory, rounded to bf16 on the way to shared memory, zeros past
// the edges. Consecutive threads take consecutive columns: coalesced rows.
__device__ inline void mma_stage_rounded(MmaPadded& t, const float* A, const float* B, int M, int N, int K, int bm,
                                         int bn, int k0) {
    const int tid = int(threadIdx.x);
    for (int i = tid; i < MMA_BM * MMA_BK; i += MMA_THREADS) {
        const int r = i / MMA_BK, c = i % MMA_BK, gr = bm + r, gc = k0 + c;
        *t.at_a(r, c) = mma_to_bf16(gr < M && gc < K ? A[std::size_t(gr) * K + gc] : 0.0f);
    }
    for (int i = tid; i < MMA_BK * MMA_BN; i += MMA_THREADS) {
        const int r = i / MMA_BN, c = i % MMA_BN, gr = k0 + r, gc = bn + c;
        *t.at_b(r, c) = mma_to_bf16(gr < K && gc < N ? B[std::size_t(gr) * N + gc] : 0.0f);
    }
}


// --- the cp.async pipeline of rungs 7 and 8 -----------------------------------

constexpr int MMA_STAGES = 3;

inline int mma_padded(int x, int to) { return (x + to - 1) / to * to; }

// dst[rows_p][cols_p] (bf16 bits) = src[rows][cols] rounded, zeros beyond.
__global__ void mma_pack_bf16_kernel(const float* __restrict__ src, unsigned short* __restrict__ dst, int rows,
                                     int cols, int rows_p, int cols_p) {
    const std::size_t n = std::size_t(rows_p) * cols_p;
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
         i += std::size_t(gridDim.x) * blockDim.x) {
        const int r = int(i / cols_p), c = int(i % cols_p);
        dst[i] = mma_to_bf16(r < rows && c < cols ? src[std::size_t(r) * cols + c] : 0.0f);
    }
}

// Stage t <- tile kt of Ap (Mp x Kp) and Bp (Kp x Np): 256 16-byte chunks
// of each, two per thread, in one cp.async group.
template <class Tiles>
__device__ inline void mma_load_stage(Tiles& t, const unsigned short* Ap, const unsigned short* Bp, int Kp, int Np,
                                      int bm, int bn, int kt) {
    const int tid = int(threadIdx.x), k0 = kt * MMA_BK;
    for (int i = tid; i < MMA_BM * MMA_BK / 8; i += MMA_THREADS) {
        const int r = i / (MMA_BK / 8), c = i % (MMA_BK / 8) * 8;
        mw::tc::cp_async16(t.at_a(r, c), Ap + std::size_t(bm + r) * Kp + k0 + c);
    }
    for (int i = tid; i < MMA_BK * MMA_BN / 8; i += MMA_THREADS) {
        const int r = i / (MMA_BN / 8), c = i % (MMA_BN / 8) * 8;
        mw::tc::cp_async16(t.at_b(r, c), Bp + std::size_t(k0 + r) * Np + bn + c);
    }
    mw::tc::cp_async_commit();
}

template <class Tiles>
__global__ void MW_LAUNCH_BOUNDS(MMA_THREADS)
    gemm_mma_pipelined_kernel(const unsigned short* __restrict__ Ap, const unsigned short* __restrict__ Bp,
                              float* __restrict__ C, int M, int N, int Kp, int Np) {
    __shared__ __align__(16) Tiles stage[MMA_STAGES];
    const int bm = int(blockIdx.y) * MMA_BM, bn = int(blockIdx.x) * MMA_BN, tiles = Kp / MMA_BK;
    MmaAcc acc{};
    // Groups committed before iteration kt: MMA_STAGES - 1 + kt, the kt-th
    // being tile kt; waiting until at most MMA_STAGES - 2 are in flight
    // lands tile kt. (An empty group past the last tile keeps the count.)
    for (int s = 0; s < MMA_STAGES - 1; ++s) {
        if (s < tiles) mma_load_stage(stage[s], Ap, Bp, Kp, Np, bm, bn, s);
        else mw::tc::cp_async_commit();
    }
    for (int kt = 0; kt < tiles; ++kt) {
        mw::tc::cp_async_wait<MMA_STAGES - 2>();
        __syncthreads();  // tile kt visible to all; every warp done with tile kt - 1's stage
        const int next = kt + MMA_STAGES - 1;
        if (next < tiles) mma_load_stage(stage[next % MMA_STAGES], Ap, Bp, Kp, Np, bm, bn, next);
        else mw::tc::cp_async_commit();
        mma_warp_step(stage[kt % MMA_STAGES], acc);
    }
    mw::tc::cp_async_wait<0>();
    mma_store(acc, C, M, N, bm, bn);
}

// Enqueues the pack of src (rows x cols, fp32) into dst (rows_p x cols_p, bf16).
inline void mma_pack(cudaStream_t stream, const float* src, unsigned short* dst, int rows, int cols, int rows_p,
                     int cols_p) {
    const std::size_t n = std::size_t(rows_p) * cols_p;
    const unsigned blocks = unsigned(std::clamp<std::size_t>((n + 255) / 256, 1, 4096));
    mw::launch(mma_pack_bf16_kernel, dim3(blocks), dim3(256), 0, stream, src, dst, rows, cols, rows_p, cols_p);
}

// The pack of A and B into padded bf16 workspaces, then the pipelined GEMM.
template <class Tiles> mw::Instance mma_pipelined_instance(mw::Problem& p) {
    const int M = int(p.shape["m"]), N = int(p.shape["n"]), K = int(p.shape["k"]);
    const int Mp = mma_padded(M, MMA_BM), Np = mma_padded(N, MMA_BN), Kp = mma_padded(K, MMA_BK);
    auto Ap = mw::cuda::device_array<unsigned short>(std::size_t(Mp) * Kp);
    auto Bp = mw::cuda::device_array<unsigned short>(std::size_t(Kp) * Np);
    const std::size_t workspace = (std::size_t(Mp) * Kp + std::size_t(Kp) * Np) * sizeof(unsigned short);
    return mw::cuda::device_instance(
        p,
        [=](mw::cuda::DeviceProblem& d) {
            mma_pack(d.stream, d.in<const float>("A"), Ap.get(), M, K, Mp, Kp);
            mma_pack(d.stream, d.in<const float>("B"), Bp.get(), K, N, Kp, Np);
            const dim3 grid(unsigned(Np / MMA_BN), unsigned(Mp / MMA_BM));
            mw::launch(gemm_mma_pipelined_kernel<Tiles>, grid, dim3(MMA_THREADS), 0, d.stream,
                       static_cast<const unsigned short*>(Ap.get()), static_cast<const unsigned short*>(Bp.get()),
                       d.out<float>("C"), M, N, Kp, Np);
        },
        workspace);
}

// The pack (fp32 in, bf16 out, padded) and the GEMM's bf16 tiles: A read
// once per 64 columns of C, B once per 64 rows; C written once.
inline double mma_pipelined_bytes(const mw::Shape& s, mw::DType) {
    const double M = s["m"], N = s["n"], K = s["k"];
    const double Mp = mma_padded(int(M), MMA_BM), Np = mma_padded(int(N), MMA_BN), Kp = mma_padded(int(K), MMA_BK);
    const double pack = 4.0 * (M * K + K * N) + 2.0 * (Mp * Kp + Kp * Np);
    return pack + 2.0 * (Mp * Kp * (Np / MMA_BN) + Kp * Np * (Mp / MMA_BM)) + 4.0 * M * N;
}

}  // namespace
