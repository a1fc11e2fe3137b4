// cuBLAS glue shared by the vendor rungs and the GPU calibration. nvcc only:
// include it inside `#if !MEMWALL_EMU` (cuda-emu has no cuBLAS).
#pragma once

#include <cublas_v2.h>

#include <memory>
#include <stdexcept>
#include <string>

// An unnamed namespace, as in harness/cuda/device_problem.hpp: a test may
// compile kernels/model/block_cuda.cuh against a stand-in for cuBLAS
// (tests/checkpointing/fake_cublas/), and its copies of these must not be
// merged with the real ones by the linker.
namespace mw::cuda {
namespace {

// Throws, naming the call, unless cuBLAS reports success.
inline void cublas_check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(std::string(what) + " failed: cuBLAS status " + std::to_string(int(s)));
}

// A cuBLAS handle destroyed with its last owner (an Instance).
inline std::shared_ptr<cublasContext> make_cublas_handle() {
    cublasHandle_t h = nullptr;
    cublas_check(cublasCreate(&h), "cublasCreate");
    return {h, [](cublasHandle_t p) { (void)cublasDestroy(p); }};
}

}  // namespace
}  // namespace mw::cuda
