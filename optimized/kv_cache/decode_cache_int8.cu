// decode_step and generate on the GPU, KV-cache lever, CUDA rung 2: the
// cache stored in INT8.
//
// Change from rung 1 (optimized/kv_cache/decode_cache.cu): each position's
// key and value rows are stored as int8 codes with one fp32 scale per
// (position, kv head), the CPU's rule (optimized/kv_cache/cache_int8.cpp;
// kernels/kv_cache/attend.hpp's quantize_row_int8): kv_append's int8
// kernel finds each head's max|x| with a warp reduction and writes the
// codes, and the split kernel widens them back (scale x code) as it reads
// (kernels/kv_cache/paged_attention.cuh). The cache shrinks from 8 to
// 2 + 8 / head_dim bytes per value pair (2.25 at head_dim 32): 3.6x fewer
// bytes for attention to read.
// Expected: the same time as rung 1 at the default model's short contexts
// (its whole cache is a few MB, in the L2 of a big GPU, and the step is
// launch-bound at small batch); the bytes pay at long contexts and large
// batches, where the cache's read is most of a step. Checked against the
// fp64 model with its cache rows rounded the same way (the contract
// oracle), the error against the exact model reported beside it.
#include "reference/kv_cache/decode_cuda.cuh"

MW_REGISTER_VARIANT(decode_step_cache_int8_cuda, {
    .name = "cache_int8", .op = "decode_step", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 2,
    .rationale = "the cache stored int8 with a scale per position and kv head, quantized as it is appended and "
                 "widened as attention reads it: 3.6x fewer bytes of cache",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        const auto& dm = mw::kv_cache::decode_model(int(s["kv_heads"]), int(s["ctx"] + 1));
        const auto& c = dm.config;
        const mw::kv_cache::KvGeometry g{c.layers, c.kv_heads, c.head_dim()};
        return 4.0 * double(dm.params.size()) +
               double(s["batch"]) * double(s["ctx"]) * mw::kv_cache::bytes_per_position(g, mw::kv_cache::Elem::i8);
    },
    .prepare = [](mw::Problem& p) {
        using namespace mw::kv_cache::cuda_decode;
        return prepare_decode_step(p, Layout::contiguous, Drive::eager, mw::kv_cache::Elem::i8);
    },
    .contract_oracle = mw::kv_cache::decode_step_int8_oracle,
    .tolerance_scale = mw::kv_cache::kInt8CodeFlipSlack });

MW_REGISTER_VARIANT(generate_cache_int8_cuda, {
    .name = "cache_int8", .op = "generate", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 2,
    .rationale = "the cache stored int8 with a scale per position and kv head; tokens checked against the fp64 "
                 "model with its cache rounded the same way",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        return mw::kv_cache::cuda_decode::cached_generate_bytes(s, mw::kv_cache::Elem::i8);
    },
    .prepare = [](mw::Problem& p) {
        using namespace mw::kv_cache::cuda_decode;
        return prepare_generate(p, Layout::contiguous, Drive::eager, mw::kv_cache::Elem::i8);
    },
    .contract_oracle = mw::kv_cache::generate_int8_oracle,
    .tolerance_scale = mw::kv_cache::kInt8CodeFlipSlack });
