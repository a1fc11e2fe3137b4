// GEMM on the GPU, rung 6 of 7: tensor cores fed by a cp.async pipeline.
// (The whole ladder is listed in reference/vectorization/gemm.cu; the warp's
// mma.sync work on a staged tile is rung 5's, in gemm_mma.cuh.)
//
// Change from rung 5 (mma_bf16): the tiles reach shared memory without
// passing through registers, and the next tiles' loads overlap this one's
// products. Two steps:
//   1. pack: A and B are rounded to bf16 once, into copies padded with zeros
//      to whole tiles (M and N to 64, K to 32), so that every row of every
//      tile is whole 16-byte chunks and the GEMM has no edge to test on the
//      way in;
//   2. the GEMM: each thread issues cp.async 16-byte copies (8 bf16) for
//      tile k + 2 while the warps multiply tile k; three stages of shared
//      memory (29 KiB), cp.async.wait_group 1 before a tile is used and a
//      __syncthreads before its stage is refilled.
// Effect:
//   - the load/convert/store of rung 5 (a register round trip per element,
//     then a __syncthreads with nothing in flight) is gone from the loop: on
//     an H100 the loads of the next two tiles hide behind the mma.sync of
//     this one, which is what the multi-stage pipelines of CUTLASS and
//     cuBLAS do;
//   - global bytes: the GEMM reads bf16, half of rung 5's fp32 tiles, plus
//     the pack's one pass (read fp32 A and B, write bf16): at 4096^3 about
//     1.2 GiB against rung 5's 2 GiB.
// The same bf16 contract as rung 5 (gemm::oracle_bf16_inputs), and under
// cuda-emu a stage read before its wait_group is poison (NaN), so a
// pipeline that uses a tile early fails the check.
#include "optimized/vectorization/gemm_mma.cuh"
#include "harness/cuda/device_problem.hpp"
#include "reference/vectorization/gemm.hpp"

#include <memory>

namespace {

constexpr int MMA_STAGES = 3;

int padded(int x, int to) { return (x + to - 1) / to * to; }

// dst[rows_p][cols_p] (bf16 bits) = src[rows][cols] rounded, zeros beyond.
__global__ void pack_bf16_kernel(const float* __restrict__ src, unsigned short* __restrict__ dst, int rows, int cols,
                                 int rows_p, int cols_p) {
    const std::size_t n = std::size_t(rows_p) * cols_p;
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
         i += std::size_t(gridDim.x) * blockDim.x) {
        const int r = int(i / cols_p), c = int(i % cols_p);
        dst[i] = mma_to_bf16(r < rows && c < cols ? src[std::size_t(r) * cols + c] : 0.0f);
    }
}

// Stage s <- tile kt of Ap (Mp x Kp) and Bp (Kp x Np): 256 16-byte chunks
// of each, two per thread, in one cp.async group.
__device__ inline void load_stage(MmaTiles& t, const unsigned short* Ap, const unsigned short* Bp, int Kp, int Np,
                                  int bm, int bn, int kt) {
    const int tid = int(threadIdx.x), k0 = kt * MMA_BK;
    for (int i = tid; i < MMA_BM * MMA_BK / 8; i += MMA_THREADS) {
        const int r = i / (MMA_BK / 8), c = i % (MMA_BK / 8) * 8;
        mw::tc::cp_async16(&t.a[r][c], Ap + std::size_t(bm + r) * Kp + k0 + c);
    }
    for (int i = tid; i < MMA_BK * MMA_BN / 8; i += MMA_THREADS) {
        const int r = i / (MMA_BN / 8), c = i % (MMA_BN / 8) * 8;
        mw::tc::cp_async16(&t.b[r][c], Bp + std::size_t(k0 + r) * Np + bn + c);
    }
    mw::tc::cp_async_commit();
}

__global__ void MW_LAUNCH_BOUNDS(MMA_THREADS)
    gemm_mma_pipelined_kernel(const unsigned short* __restrict__ Ap, const unsigned short* __restrict__ Bp,
                              float* __restrict__ C, int M, int N, int Kp, int Np) {
    __shared__ __align__(16) MmaTiles stage[MMA_STAGES];
    const int bm = int(blockIdx.y) * MMA_BM, bn = int(blockIdx.x) * MMA_BN, tiles = Kp / MMA_BK;
    MmaAcc acc{};
    // Groups committed before iteration kt: MMA_STAGES - 1 + kt, the kt-th
    // being tile kt; waiting until at most MMA_STAGES - 2 are in flight
    // lands tile kt. (An empty group past the last tile keeps the count.)
    for (int s = 0; s < MMA_STAGES - 1; ++s) {
        if (s < tiles) load_stage(stage[s], Ap, Bp, Kp, Np, bm, bn, s);
        else mw::tc::cp_async_commit();
    }
    for (int kt = 0; kt < tiles; ++kt) {
        mw::tc::cp_async_wait<MMA_STAGES - 2>();
        __syncthreads();  // tile kt visible to all; every warp done with tile kt - 1's stage
        const int next = kt + MMA_STAGES - 1;
        if (next < tiles) load_stage(stage[next % MMA_STAGES], Ap, Bp, Kp, Np, bm, bn, next);
        else mw::tc::cp_async_commit();
        mma_warp_step(stage[kt % MMA_STAGES], acc);
    }
    mw::tc::cp_async_wait<0>();
    mma_store(acc, C, M, N, bm, bn);
}

mw::Instance prepare_mma_pipelined(mw::Problem& p) {
    const int M = int(p.shape["m"]), N = int(p.shape["n"]), K = int(p.shape["k"]);
    const int Mp = padded(M, MMA_BM), Np = padded(N, MMA_BN), Kp = padded(K, MMA_BK);
    auto Ap = mw::cuda::device_array<unsigned short>(std::size_t(Mp) * Kp);
    auto Bp = mw::cuda::device_array<unsigned short>(std::size_t(Kp) * Np);
    const std::size_t workspace = (std::size_t(Mp) * Kp + std::size_t(Kp) * Np) * sizeof(unsigned short);
    return mw::cuda::device_instance(
        p,
        [=](mw::cuda::DeviceProblem& d) {
            const auto pack = [&](const float* src, unsigned short* dst, int rows, int cols, int rows_p, int cols_p) {
                const std::size_t n = std::size_t(rows_p) * cols_p;
                const unsigned blocks = unsigned(std::min<std::size_t>((n + 255) / 256, 4096));
                mw::launch(pack_bf16_kernel, dim3(blocks), dim3(256), 0, d.stream, src, dst, rows, cols, rows_p,
                           cols_p);
            };
            pack(d.in<const float>("A"), Ap.get(), M, K, Mp, Kp);
            pack(d.in<const float>("B"), Bp.get(), K, N, Kp, Np);
            const dim3 grid(unsigned(Np / MMA_BN), unsigned(Mp / MMA_BM));
            mw::launch(gemm_mma_pipelined_kernel, grid, dim3(MMA_THREADS), 0, d.stream,
                       static_cast<const unsigned short*>(Ap.get()), static_cast<const unsigned short*>(Bp.get()),
                       d.out<float>("C"), M, N, Kp, Np);
        },
        workspace);
}

// The pack (fp32 in, bf16 out, padded) and the GEMM's bf16 tiles: A read
// once per 64 columns of C, B once per 64 rows; C written once.
double bytes_pipelined(const mw::Shape& s, mw::DType) {
    const double M = s["m"], N = s["n"], K = s["k"];
    const double Mp = padded(int(M), MMA_BM), Np = padded(int(N), MMA_BN), Kp = padded(int(K), MMA_BK);
    const double pack = 4.0 * (M * K + K * N) + 2.0 * (Mp * Kp + Kp * Np);
    return pack + 2.0 * (Mp * Kp * (Np / MMA_BN) + Kp * Np * (Mp / MMA_BM)) + 4.0 * M * N;
}

}  // namespace

MW_REGISTER_VARIANT(gemm_mma_pipelined_cuda, {
    .name = "mma_pipelined", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 6,
    .rationale = "rung 5's tensor-core warps fed by cp.async: A and B packed to padded bf16 once, then a "
                 "three-stage shared-memory pipeline loads tile k+2 while tile k is multiplied",
    .needs = {"gpu", "sm_80"},
    .bytes = bytes_pipelined,
    .executed_flops = mma_padded_flops,
    .compute = "bf16",
    .prepare = prepare_mma_pipelined,
    .contract_oracle = mw::gemm::oracle_bf16_inputs });
