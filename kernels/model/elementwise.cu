// Publishes the element-wise model kernels (kernels/model/elementwise.cuh)
// as this backend's table (kernels/model/elementwise.hpp): nvcc builds this
// file as backend "cuda", the host compiler through the emulator as
// "cuda-emu", and each registers itself at static initialization.
#include "harness/cuda/device_memory.hpp"
#include "kernels/model/elementwise.cuh"

namespace {

namespace k = mw::model::kernels;

const mw::model::ElementwiseKernels kTable = {
    .alloc = mw::cuda::alloc_bytes,
    .free = mw::cuda::free_bytes,
    .copy_to_device = mw::cuda::copy_to_device,
    .copy_to_host = mw::cuda::copy_to_host,
    .synchronize = mw::cuda::synchronize_device,
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
