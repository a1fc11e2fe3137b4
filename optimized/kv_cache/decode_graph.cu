// decode_step and generate on the GPU, KV-cache lever, CUDA rung 4: the step
// captured into a CUDA graph and replayed.
//
// Change from rung 1 (optimized/kv_cache/decode_cache.cu): the step's chain
// of 51 kernel launches (generate: 52, with the device-side pick of the next
// token) is captured once into a graph (stream capture) and each step is one
// cudaGraphLaunch. The kernels, their bytes and their order are unchanged —
// the logits are bit-identical to rung 1's (checked: identical_to
// "cache") — what goes is the host's cost of 51 separate launches (a few
// microseconds each) and the gaps between kernels it leaves on the GPU. It
// can be captured because the step reads everything that changes (token,
// position, cache length) from device memory: a graph replays its launches
// with the arguments they were captured with.
// Expected: at batch 1, where a step's kernels each run for a few
// microseconds or less, the step's time falls toward the kernels' own time;
// the counters show it: launches_per_step 51 -> 1, host_us_per_step. At
// large batch the kernels' work hides the launches and the graph buys little.
// Under cuda-emu the emulator's own graphs run it (harness/emu: capture
// records, a replay reruns the records).
#include "reference/kv_cache/decode_cuda.cuh"

MW_REGISTER_VARIANT(decode_step_graph_cuda, {
    .name = "graph", .op = "decode_step", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 4,
    .rationale = "the cached step's 51 launches captured once into a CUDA graph and replayed with one "
                 "cudaGraphLaunch: same kernels and bytes, one submission",
    .needs = {"gpu"},
    .prepare = [](mw::Problem& p) {
        using namespace mw::kv_cache::cuda_decode;
        return prepare_decode_step(p, Layout::contiguous, Drive::graph);
    },
    .identical_to = "cache" });

MW_REGISTER_VARIANT(generate_graph_cuda, {
    .name = "graph", .op = "generate", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 4,
    .rationale = "each step and its device-side pick of the next token replayed from one captured CUDA graph: "
                 "a submission per token instead of 52",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::kv_cache::cuda_decode::cached_generate_bytes(s); },
    .prepare = [](mw::Problem& p) {
        using namespace mw::kv_cache::cuda_decode;
        return prepare_generate(p, Layout::contiguous, Drive::graph);
    },
    .identical_to = "cache" });
