// Publishes the paged KV-cache kernels (kernels/kv_cache/paged_attention.cuh)
// as this backend's table (kernels/kv_cache/paged_attention.hpp): nvcc builds
// this file as backend "cuda", the host compiler through the emulator as
// "cuda-emu", and each registers itself at static initialization.
#include "harness/cuda/device_memory.hpp"
#include "kernels/kv_cache/paged_attention.cuh"

namespace {

void append(const mw::kv_cache::PagedKv& kv, const std::int32_t* start, const float* k_new, const float* v_new, int b,
            int count) {
    mw::kv_cache::paged::kv_append(kv, start, k_new, v_new, b, count);
}
void decode(const mw::kv_cache::PagedKv& kv, const float* q, float* o, int b, int heads, float* workspace) {
    mw::kv_cache::paged::paged_decode(kv, q, o, b, heads, workspace);
}

const mw::kv_cache::PagedKernels kTable = {
    .alloc = mw::cuda::alloc_bytes,
    .free = mw::cuda::free_bytes,
    .copy_to_device = mw::cuda::copy_to_device,
    .copy_to_host = mw::cuda::copy_to_host,
    .synchronize = mw::cuda::synchronize_device,
    .kv_append = append,
    .paged_decode = decode,
};

[[maybe_unused]] const bool kRegistered = mw::kv_cache::detail::register_paged_kernels(MW_CUDA_BACKEND, &kTable);

}  // namespace
