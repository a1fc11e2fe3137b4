// Publishes the element-wise model kernels (kernels/model/elementwise.cuh)
// as this backend's table (kernels/model/elementwise.hpp): nvcc builds this
// file as backend "cuda", the host compiler through the emulator as
// "cuda-emu", and each registers itself at static initialization.
#include "kernels/model/elementwise.cuh"

namespace {

void* device_alloc(std::size_t bytes) {
    void* p = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
void device_free(void* p) { MW_CUDA_CHECK(cudaFree(p)); }
void copy_to_device(void* dst, const void* src, std::size_t bytes) {
    MW_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void copy_to_host(void* dst, const void* src, std::size_t bytes) {
    MW_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void synchronize() { MW_CUDA_CHECK(cudaDeviceSynchronize()); }

namespace k = mw::model::kernels;

const mw::model::ElementwiseKernels kTable = {
    .alloc = device_alloc,
    .free = device_free,
    .copy_to_device = copy_to_device,
    .copy_to_host = copy_to_host,
    .synchronize = synchronize,
    .rmsnorm_forward = k::rmsnorm_forward,
    .rmsnorm_backward = k::rmsnorm_backward,
    .rope_forward = k::rope_forward,
    .rope_backward = k::rope_backward,
    .swiglu_forward = k::swiglu_forward,
    .swiglu_backward = k::swiglu_backward,
    .softmax_causal_forward = k::softmax_causal_forward,
    .softmax_causal_backward = k::softmax_causal_backward,
    .add = k::add,
    .dot = k::dot,
};

[[maybe_unused]] const bool kRegistered = mw::model::detail::register_elementwise_kernels(MW_CUDA_BACKEND, &kTable);

}  // namespace
