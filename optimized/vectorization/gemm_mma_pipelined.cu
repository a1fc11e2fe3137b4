// GEMM on the GPU, rung 7 of 9: tensor cores fed by a cp.async pipeline.
// (The whole ladder is listed in reference/vectorization/gemm.cu; the warp's
// mma.sync work on a staged tile is rung 6's, and the pipeline's kernel,
// shared with rung 8, is in gemm_mma.cuh.)
//
// Change from rung 6 (mma_bf16): the tiles reach shared memory without
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
//   - the load/convert/store of rung 6 (a register round trip per element,
//     then a __syncthreads with nothing in flight) is gone from the loop: on
//     an H100 the loads of the next two tiles hide behind the mma.sync of
//     this one, which is what the multi-stage pipelines of CUTLASS and
//     cuBLAS do;
//   - global bytes: the GEMM reads bf16, half of rung 6's fp32 tiles, plus
//     the pack's one pass (read fp32 A and B, write bf16): at 4096^3 about
//     4.6 GB against rung 6's 8.6 GB (re-reads that miss L2).
// The same bf16 contract as rungs 5 and 6 (gemm::oracle_bf16_inputs), and under
// cuda-emu a stage read before its wait_group is poison (NaN), so a
// pipeline that uses a tile early fails the check.
#include "optimized/vectorization/gemm_mma.cuh"
#include "harness/cuda/device_problem.hpp"
#include "reference/vectorization/gemm.hpp"

namespace {

mw::Instance prepare_mma_pipelined(mw::Problem& p) { return mma_pipelined_instance<MmaPadded>(p); }

}  // namespace

MW_REGISTER_VARIANT(gemm_mma_pipelined_cuda, {
    .name = "mma_pipelined", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 7,
    .rationale = "rung 6's tensor-core warps fed by cp.async: A and B packed to padded bf16 once, then a "
                 "three-stage shared-memory pipeline loads tile k+2 while tile k is multiplied",
    .needs = {"gpu", "sm_80"},
    .bytes = mma_pipelined_bytes,
    .executed_flops = mma_padded_flops,
    .compute = "bf16",
    .prepare = prepare_mma_pipelined,
    .contract_oracle = mw::gemm::oracle_bf16_inputs });
