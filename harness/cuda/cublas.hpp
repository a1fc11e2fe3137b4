// cuBLAS glue shared by the vendor rungs and the GPU calibration. nvcc only:
// include it inside `#if !MEMWALL_EMU` (cuda-emu has no cuBLAS).
#pragma once

#include <cublas_v2.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace mw::cuda {

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

}  // namespace mw::cuda
