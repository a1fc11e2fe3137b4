// What plain C++ needs to know of the GPU block (kernels/model/block_cuda.cuh,
// nvcc only): its fixed cuBLAS workspace and the device bytes it allocates
// beside the activations, for the memory models of the checkpointing lever's
// CUDA rungs (reference/checkpointing/train_step.hpp).
#pragma once

#include <cstddef>

#include "kernels/model/config.hpp"

namespace mw::model::gpu {

// cuBLAS's workspace, fixed so that algorithm choice cannot depend on what
// the pool happens to hold: 32 MiB, what NVIDIA recommends on Hopper.
inline constexpr std::size_t kCublasWorkspaceBytes = std::size_t(32) << 20;

// Device bytes of one Block's own buffers: the backward's gradients of one
// block's activations (dxn and the residual's partner, dO, dq, dk, dv, dh,
// da, db), dS for every head [B, heads, T, T], the positions, the RoPE
// table and the cuBLAS workspace.
inline double block_scratch_bytes(const Config& c, int batch, int seq) {
    const double N = double(batch) * seq;
    return 4.0 * (N * (2.0 * c.d_model + 2.0 * c.q_dim() + 2.0 * c.kv_dim() + 3.0 * c.d_ff) +
                  double(batch) * c.heads * seq * seq + N + double(c.head_dim() / 2)) +
           double(kCublasWorkspaceBytes);
}

}  // namespace mw::model::gpu
