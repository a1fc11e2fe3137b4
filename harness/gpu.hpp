// What the harness knows about GPUs. Implemented by harness/cuda/device.cu when
// the CUDA backend is built, by harness/gpu_none.cpp otherwise.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "harness/ceilings.hpp"

namespace mw {

// Number of usable CUDA devices; 0 without a driver or a GPU (never throws).
int gpu_count();
// Why there is no GPU ("no CUDA driver (error 35)", "CUDA backend not built"), or empty.
std::string gpu_absent_reason();
// GPU block of the results' `machine`: name, SMs, clocks, driver, CUDA and
// cuBLAS versions. Empty object when there is no GPU.
nlohmann::json gpu_machine_info();
// Fills the GPU fields of `c` (DRAM and L2 bandwidth kernels, cuBLAS GEMM
// peaks per dtype). Does nothing without a GPU.
void calibrate_gpu(Ceilings& c, bool quick);
// Whether the CUDA backend was compiled into this binary.
bool cuda_backend_built();

}  // namespace mw
