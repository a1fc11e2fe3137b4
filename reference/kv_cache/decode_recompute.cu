// decode_step and generate on the GPU, KV-cache lever, CUDA rung 0:
// recompute, nothing kept.
//
// The CPU's rung 0 (reference/kv_cache/decode_step.cpp, generate.cpp) on
// the GPU decoder (kernels/model/decode_cuda.cuh): to get the logits at
// position n, every position 0 .. n is fed through the model again — its
// keys and values re-projected and written into a cache that lives only for
// this pass — one position per step (this decoder has no batched prefill,
// so the prefix costs n steps of 51 launches each, not one big GEMM).
// Expected: time grows linearly with n for decode_step (n steps of a
// launch-bound chain) and quadratically with the length for generate; at
// batch 1 on a GPU every step is launch overhead, so rung 1's saving is
// about n times, whatever the bytes say.
#include "reference/kv_cache/decode_cuda.cuh"

MW_REGISTER_VARIANT(decode_step_recompute_cuda, {
    .name = "recompute", .op = "decode_step", .lever = "kv_cache",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "no cache kept: every position of the prefix fed through the model again, a step per position, "
                 "before the new position's logits",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        // A step per position, every weight read each step (the batch's rows share a read).
        const auto& dm = mw::kv_cache::decode_model(int(s["kv_heads"]), int(s["ctx"] + 1));
        return 4.0 * double(dm.params.size()) * double(s["ctx"] + 1);
    },
    .executed_flops = [](const mw::Shape& s) {
        const auto& c = mw::kv_cache::decode_model(int(s["kv_heads"]), int(s["ctx"] + 1)).config;
        return double(s["batch"]) * mw::model::forward_flops(c, s["ctx"] + 1);
    },
    .prepare = [](mw::Problem& p) {
        using namespace mw::kv_cache::cuda_decode;
        return prepare_decode_step(p, Layout::contiguous, Drive::recompute);
    } });

MW_REGISTER_VARIANT(generate_recompute_cuda, {
    .name = "recompute", .op = "generate", .lever = "kv_cache",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "no cache kept: for every new token, every position so far fed through the model again",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        double steps = 0;  // a step per position per token: every weight read each step
        for (std::int64_t len = s["prompt"]; len < s["prompt"] + s["tokens"]; ++len) steps += double(len);
        return 4.0 * double(mw::kv_cache::default_model().params.size()) * steps;
    },
    .executed_flops = [](const mw::Shape& s) {
        double f = 0;
        for (std::int64_t len = s["prompt"]; len < s["prompt"] + s["tokens"]; ++len)
            f += mw::kv_cache::forward_flops(len);
        return f;
    },
    .prepare = [](mw::Problem& p) {
        using namespace mw::kv_cache::cuda_decode;
        return prepare_generate(p, Layout::contiguous, Drive::recompute);
    } });
