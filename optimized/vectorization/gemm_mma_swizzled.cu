// GEMM on the GPU, rung 8 of 9: tensor cores, cp.async pipeline, swizzled
// shared memory.
// (The whole ladder is listed in reference/vectorization/gemm.cu; the
// pipeline and the two shared layouts are in gemm_mma.cuh.)
//
// Change from rung 7 (mma_pipelined): the same kernel, with each stage's
// tiles stored swizzled instead of padded. Shared memory is 32 banks of 4
// bytes; an ldmatrix reads 8 rows of 16 bytes, and it costs one pass only
// if the 8 rows fall in 8 different 16-byte groups of banks. Unpadded rows
// of 64 bytes (A) and 128 bytes (B) would put them in 2 groups and 1 (4-way
// and 8-way conflicts). Rung 7 pads each row by 16 bytes (80 and 144 bytes:
// 5 and 9 groups, so 8 consecutive rows step through all 8). Rung 8 gets the
// same without padding: it stores chunk j of row r at chunk j ^ (r % 8) for
// B and j ^ ((r / 2) % 4) for A, so every 8 rows at one chunk column land in
// 8 different groups.
// Effect: the padding's shared memory back, 1536 of every stage's 9728
// bytes (16%): room for a fourth stage or larger tiles within the same
// budget, and the layout that tiles without room for padding (and TMA's
// swizzle modes) need. At this tile size and three stages, ldmatrix is
// conflict-free either way: expect rung 7's time, within noise; the trick
// CUTLASS and every fast tensor-core GEMM uses pays where shared memory runs
// short.
// The same bf16 contract as rungs 5-7 (gemm::oracle_bf16_inputs). Under
// cuda-emu a swizzle the stores and the loads disagree on computes a wrong
// product (banks themselves are not modeled: the gain is a GPU's to show).
#include "optimized/vectorization/gemm_mma.cuh"
#include "reference/vectorization/gemm.hpp"

namespace {

mw::Instance prepare_mma_swizzled(mw::Problem& p) { return mma_pipelined_instance<MmaSwizzled>(p); }

}  // namespace

MW_REGISTER_VARIANT(gemm_mma_swizzled_cuda, {
    .name = "mma_swizzled", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 8,
    .rationale = "rung 7 with its shared tiles XOR-swizzled by 16-byte chunk instead of padded: every ldmatrix "
                 "still conflict-free, 16% less shared memory per stage",
    .needs = {"gpu", "sm_80"},
    .bytes = mma_pipelined_bytes,
    .executed_flops = mma_padded_flops,
    .compute = "bf16",
    .prepare = prepare_mma_swizzled,
    .contract_oracle = mw::gemm::oracle_bf16_inputs });
