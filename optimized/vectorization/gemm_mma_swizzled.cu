// GEMM on the GPU, rung 8 of 9: tensor cores, cp.async pipeline, swizzled
// shared memory.
// (The whole ladder is listed in reference/vectorization/gemm.cu; the
// pipeline and the two shared layouts are in gemm_mma.cuh.)
//
// Change from rung 7 (mma_pipelined): the same kernel, with each stage's
// tiles stored swizzled instead of padded. Shared memory is 32 banks of 4
// bytes; an ldmatrix reads 8 rows of 16 bytes, and it costs one pass only
// if the 8 rows fall in 8 different 16-byte groups of banks. Rung 7 pads
// each row by 16 bytes, which spreads B's 144-byte rows over only 4 groups
// of every 8 (a 2-way conflict) and A's 80-byte rows over 8 but for rows 0
// and 8. Rung 8 stores chunk j of row r at chunk j ^ (r % 8) for B (128-byte
// rows) and j ^ ((r / 2) % 4) for A (64-byte rows): every 8 rows at one chunk
// column land in 8 different groups, and the padding (11% of rung 7's
// stages) is gone.
// Effect: ldmatrix at one pass per matrix; what that buys depends on how
// close to the shared-memory limit rung 7 runs (on an H100 its B loads are
// half the ldmatrix traffic). A smaller gain than rungs 6 and 7; the
// layout trick CUTLASS and every fast tensor-core GEMM uses.
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
    .rationale = "rung 7 with its shared tiles XOR-swizzled by 16-byte chunk instead of padded: the 8 rows of "
                 "every ldmatrix in 8 different bank groups, no padding",
    .needs = {"gpu", "sm_80"},
    .bytes = mma_pipelined_bytes,
    .executed_flops = mma_padded_flops,
    .compute = "bf16",
    .prepare = prepare_mma_swizzled,
    .contract_oracle = mw::gemm::oracle_bf16_inputs });
