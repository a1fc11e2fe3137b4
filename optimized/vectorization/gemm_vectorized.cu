// GEMM on the GPU, rung 4 of 9: vectorized (float4) global access.
// (The whole ladder is listed in reference/vectorization/gemm.cu.)
//
// Change from rung 3 (register_tiles): the same 128x128 block tile, 8x8
// per-thread tile and BK = 8, with two changes to how data moves:
//   - global loads and stores are 16-byte float4: each thread fetches its
//     share of the A tile (4 floats) and of the B tile (4 floats) with one
//     load instruction each instead of four, and writes C four floats at a time;
//   - the A tile is stored transposed in shared memory, As[k][m], so the 8
//     values a thread needs for one k are contiguous (two 16-byte shared
//     loads instead of eight 4-byte ones) and the two rows a warp reads sit
//     in different banks.
// Effect: bytes are those of rung 3, bytes_blocked(s, 128, 128); what drops is
// the instruction count: 4x fewer global load/store instructions and fewer
// shared loads, leaving more issue slots for FMAs.
// Edge tiles (M, N or K not a multiple of the tile) and shapes whose rows are
// not 16-byte aligned (K or N not a multiple of 4) fall back to guarded scalar
// accesses, element by element.
#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"
#include "reference/vectorization/gemm.hpp"

#include <cstdint>

namespace {

constexpr int BM = 128, BN = 128, BK = 8;  // block tile of C, and K step
constexpr int TM = 8, TN = 8;              // per-thread tile of C
constexpr int THREADS = (BM / TM) * (BN / TN);  // 256
static_assert(BM * BK == 4 * THREADS && BK * BN == 4 * THREADS, "one float4 of each tile per thread");

// Four consecutive floats of row `row` starting at column `col` of a
// rows x cols row-major matrix, zero outside it. `vec` says rows are 16-byte
// aligned (cols % 4 == 0 and an aligned base), so an in-bounds group of four
// can be one float4 load.
__device__ __forceinline__ float4 load4(const float* __restrict__ p, int row, int rows, int col, int cols,
                                        bool vec) {
    float4 v;
    v.x = v.y = v.z = v.w = 0.0f;
    if (row >= rows) return v;
    const float* src = p + row * cols;
    if (vec && col + 3 < cols) return *reinterpret_cast<const float4*>(src + col);
    if (col + 0 < cols) v.x = src[col + 0];
    if (col + 1 < cols) v.y = src[col + 1];
    if (col + 2 < cols) v.z = src[col + 2];
    if (col + 3 < cols) v.w = src[col + 3];
    return v;
}

__device__ __forceinline__ void unpack(float4 v, float* out) {
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
}

// At most 128 registers a thread, so two 256-thread blocks (16 warps) share
// an SM; uncapped, nvcc spends ~136-166 and only one block fits.
__global__ void MW_LAUNCH_BOUNDS(THREADS, 2)
    gemm_vectorized_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                           int M, int N, int K, bool vec_a, bool vec_bc) {
    // float4 storage keeps every row 16-byte aligned, so the compute loop
    // reads four floats per shared load.
    __shared__ float4 As4[BK][BM / 4];  // A tile transposed: element (m, k) at As[k][m]
    __shared__ float4 Bs4[BK][BN / 4];
    float(*As)[BM] = reinterpret_cast<float(*)[BM]>(As4);
    const int tid = threadIdx.x;
    const int trow = tid / (BN / TN), tcol = tid % (BN / TN);
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    // This thread's float4 of each tile: A tile rows hold 2 float4s, B tile rows 32.
    const int a_r = tid / (BK / 4), a_c = (tid % (BK / 4)) * 4;
    const int b_r = tid / (BN / 4), b_c = (tid % (BN / 4)) * 4;

    float acc[TM][TN] = {};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        const float4 va = load4(A, bm + a_r, M, k0 + a_c, K, vec_a);
        As[a_c + 0][a_r] = va.x;
        As[a_c + 1][a_r] = va.y;
        As[a_c + 2][a_r] = va.z;
        As[a_c + 3][a_r] = va.w;
        Bs4[b_r][b_c / 4] = load4(B, k0 + b_r, K, bn + b_c, N, vec_bc);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int q = 0; q < TM / 4; ++q) unpack(As4[k][trow * (TM / 4) + q], a + 4 * q);
#pragma unroll
            for (int q = 0; q < TN / 4; ++q) unpack(Bs4[k][tcol * (TN / 4) + q], b + 4 * q);
#pragma unroll
            for (int m = 0; m < TM; ++m)
#pragma unroll
                for (int n = 0; n < TN; ++n) acc[m][n] += a[m] * b[n];
        }
        __syncthreads();  // before the next iteration overwrites the tiles
    }

#pragma unroll
    for (int m = 0; m < TM; ++m) {
        const int r = bm + trow * TM + m;
        if (r >= M) break;  // rows only grow with m
        float* dst = C + r * N;
#pragma unroll
        for (int n = 0; n < TN; n += 4) {
            const int c = bn + tcol * TN + n;
            if (vec_bc && c + 3 < N) {
                float4 v;
                v.x = acc[m][n + 0];
                v.y = acc[m][n + 1];
                v.z = acc[m][n + 2];
                v.w = acc[m][n + 3];
                *reinterpret_cast<float4*>(dst + c) = v;
            } else {
#pragma unroll
                for (int q = 0; q < 4; ++q)
                    if (c + q < N) dst[c + q] = acc[m][n + q];
            }
        }
    }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

mw::Instance prepare_vectorized(mw::Problem& p) {
    const int M = int(p.shape["m"]), N = int(p.shape["n"]), K = int(p.shape["k"]);
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        const float* A = d.in<const float>("A");
        const float* B = d.in<const float>("B");
        float* C = d.out<float>("C");
        // float4 access needs every row start on a 16-byte boundary.
        const bool vec_a = K % 4 == 0 && aligned16(A);
        const bool vec_bc = N % 4 == 0 && aligned16(B) && aligned16(C);
        const dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
        mw::launch(gemm_vectorized_kernel, grid, dim3(THREADS), 0, d.stream, A, B, C, M, N, K, vec_a, vec_bc);
    });
}

}  // namespace

MW_REGISTER_VARIANT(gemm_vectorized_cuda, {
    .name = "vectorized", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 4,
    .rationale = "rung 3 with 16-byte float4 global loads and stores and a transposed A tile, "
                 "so one instruction moves four floats and shared reads of A are contiguous",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::gemm::bytes_blocked(s, 128, 128); },
    .prepare = prepare_vectorized });
