// Warp-wide reductions the CUDA kernels share (every lane of the full warp
// takes part and gets the result). Include after harness/cuda/launch.hpp, so
// that under cuda-emu the emulator supplies __shfl_xor_sync.
#pragma once

// An unnamed namespace, like harness/cuda/device_problem.hpp: nvcc and the
// emulator each compile these, and both copies end up in one binary.
namespace mw::warp {
namespace {

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

}  // namespace
}  // namespace mw::warp
