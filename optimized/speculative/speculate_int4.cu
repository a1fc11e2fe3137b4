// speculate on the GPU, speculative lever, CUDA rung 1: an INT4 copy of the
// target drafts.
//
// Change from rung 0 (reference/speculative/speculate.cu): a second GPU
// decoder holds the target's matrices in INT4 (groups of 32 weights, an
// fp32 scale each: 5 bits per weight; dequantized in registers inside the
// GEMV, kernels/model/decode_cuda.cuh's gemv_rows_int4_kernel) and drafts K
// tokens a round, each picked on the device; the fp32 target verifies the
// K + 1 positions in one step of K + 1 rows and keeps the drafts that match
// its own greedy choice, plus its own next token (reference/speculative/
// speculate_cuda.cuh). Tokens are target_only's, bit for bit.
// Expected: a round costs one target step of K + 1 rows — about one step's
// time at batch 1, where the step is launch-bound — plus K draft steps,
// each about as long as a target step for the same reason (int4 saves
// bytes, and bytes are not what a batch-1 step waits for), and yields
// E = (1 - alpha^(K+1)) / (1 - alpha) tokens. So the win on a GPU comes
// from the host round trips saved (one per round instead of one per
// token), not from the draft's cheaper weights — unless the draft's steps
// are also captured into a graph, or the target is large enough (model 1)
// for its bytes to matter.
#include "reference/speculative/speculate_cuda.cuh"

MW_REGISTER_VARIANT(speculate_int4_cuda, {
    .name = "int4", .op = "speculate", .lever = "speculative",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 1,
    .rationale = "the target's INT4 copy drafts k tokens on the GPU, the fp32 target verifies k + 1 positions in "
                 "one step: one host round trip per round, not per token",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        const auto& c = mw::speculative::target_model(s).config;
        return mw::speculative::speculate_bytes_floor(s, double(mw::model::param_count(c)) * 5.0 / 8);
    },
    .prepare = [](mw::Problem& p) { return mw::speculative::cuda::prepare(p, true); },
    .accepts = mw::speculative::cuda::accepts,
    .identical_to = "target_only" });
