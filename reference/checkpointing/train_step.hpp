// The gradient-checkpointing lever: one training step (forward, loss,
// backward) over a stack of L transformer blocks of the model stack
// (kernels/model/block_cpu.hpp), keeping fewer activations and recomputing
// the rest during the backward pass. One op:
//
//   train_step: x [tokens, d] through L blocks to y; loss = sum(y * dy) for a
//   given upstream gradient dy; outputs the loss, the gradient of every block
//   parameter and of x. Axes: layers, tokens (B sequences of seq positions),
//   seq, d_model, heads, kv_heads, d_ff, and every (the segment length k of
//   every_k; 0 = round(sqrt(layers))). Checked against the fp64 block stack
//   (model/reference.cpp); every rung's outputs must also be bit
//   for bit those of store_all (Variant::identical_to): the same calls on the
//   same inputs, so the same numbers.
//
// The ladder (CPU), each rung one idea:
//   reference/checkpointing/train_step.cpp                  rung 0  store_all: every activation of every block kept
//   optimized/checkpointing/train_step_every_k.cpp             1  every_k: a block input per k-block segment kept, segments rebuilt
//   optimized/checkpointing/train_step_selective.cpp           2  selective: GEMM outputs kept, norms/softmax/SwiGLU recomputed
//   optimized/checkpointing/train_step_recompute_all.cpp       3  recompute_all: only the stack's input kept (the limit)
//
// The ladder (CUDA, kernels/model/block_cuda.cuh: cuBLAS products, the model's kernels):
//   reference/checkpointing/train_step.cu                   rung 0  store_all
//   optimized/checkpointing/train_step_every_k.cu              1  every_k
//   optimized/checkpointing/train_step_selective.cu            2  selective
//   optimized/checkpointing/train_step_recompute_all.cu        3  recompute_all
// On a GPU every rung must also give store_all's bits (one handle, one stream,
// a fixed cuBLAS workspace, no atomics: the same calls, the same algorithms).
// Not under cuda-emu (no cuBLAS there); their kernels are checked under
// cuda-emu one by one (tests/model_kernels).
//
// Memory model (bytes beyond the problem's buffers, float32), with
// X = tokens x d x 4 (one block input), R = one block's activations
// (BlockSizes::all() x 4) and S = the backward's scratch:
//   store_all      L X + L R + S            (x_1..x_L kept, every block's R)
//   every_k        (ceil(L/k) - 1) X  [checkpoints]  +  (k - 1) X + k R  [one segment rebuilt]  +  2 X + S
//   selective      L X + L G  [kept]  +  (R - G)  [one block's cheap part]  +  S    (G = GEMM outputs)
//   recompute_all  R  [one block]  +  3 X + S
// Extra forward work (executed FLOPs beyond 3 x forward): every_k rebuilds
// every block but the last segment's; selective recomputes each block's
// attention scores but the last's; recompute_all rebuilds the prefix 0..l-1
// before each block l < L-1: L (L - 1) / 2 block forwards.
//
// Run:   memwall run train_step                        (L 16, 2 x 256 tokens: activations far beyond the L3)
//        scripts/checkpoint-sweep.sh                   (k = 1..L, peak memory vs step time)
//        memwall run train_step --backend cuda         (the CUDA rungs; device memory declared, bits compared)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "harness/registry.hpp"
#include "kernels/model/config.hpp"

namespace mw::checkpointing {

// The block config of a shape (vocab and the rest unused by a block).
model::Config config_of(const Shape& s);
int layers_of(const Shape& s);
int batch_of(const Shape& s);  // tokens / seq
int every_of(const Shape& s);  // k, with 0 -> round(sqrt(L)), at most L

// Rung 2's prepare, defined in optimized/checkpointing/train_step_every_k.cpp
// (level 05's reference solution runs it over the student's arrays).
Instance prepare_every_k(Problem& p);

// The inputs and outputs every rung reads and writes.
struct StepIO {
    const float* x;       // [tokens, d]
    const float* params;  // [layers][layer_param_count]
    const float* dy;      // [tokens, d]
    float* loss;          // [1]
    float* dparams;       // [layers][layer_param_count]
    float* dx;            // [tokens, d]
};
StepIO io_of(Problem& p);

// loss = sum(y * dy), accumulated in double in index order (every rung the
// same bits); also zeroes dparams and sets dx = dy, the backward's start.
void begin_backward(const model::Config& c, std::int64_t rows, const float* y, const StepIO& io);

enum class Rung { store_all, every_k, selective, recompute_all };
// The rung's memory model as named terms (bytes), see above.
std::map<std::string, double> memory_model(const Shape& s, Rung r);
// FLOPs the rung executes: 3 x forward + its recomputation.
double executed_flops(const Shape& s, Rung r);

// The CUDA rungs. Device memory: the same terms with the GPU block's scratch
// (model::gpu::block_scratch_bytes: dS for every head, the cuBLAS
// workspace) and the device copies of the problem's buffers, which a GPU
// rung holds beside the host's. FLOPs: the batched products multiply the
// whole [T, T] score square, masked half included.
std::map<std::string, double> memory_model_cuda(const Shape& s, Rung r);
double executed_flops_cuda(const Shape& s, Rung r);

}  // namespace mw::checkpointing
