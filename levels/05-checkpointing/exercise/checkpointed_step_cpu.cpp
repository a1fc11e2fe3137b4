// Exercise checkpointed-step-cpu (level 05, checkpointing): one training step
// of a stack of L transformer blocks that keeps fewer activations than it
// could, and recomputes the rest in the backward pass.
//
//   y = block_{L-1}( ... block_0(x) ... ),   loss = sum(y * dy)
//   outputs: loss [1], dparams [L][P] (every block's parameter gradients,
//   overwritten, not accumulated across calls), dx [tokens, d_model]
//
// x and dy are [tokens, d_model] (tokens = B sequences of seq positions),
// params is [L][P] with P = mw::model::layer_param_count(c); block l's
// weights are mw::model::bind_layer(c, params + l * P), its gradients
// bind_layer(c, dparams + l * P). Inputs are const: the grader checks that
// they are unchanged.
//
// Use the project's block (kernels/model/block_cpu.hpp): Block::forward
// fills a BlockActs, Block::backward reads one (and the block's input) and
// turns d loss / d x_out into d loss / d x while adding the weight gradients.
// The grader links these kernels in (levels/05-checkpointing/exercise/
// grade_adapter_cpu.cpp): include the headers only, never their .cpp files.
//
// Graded: (1) the outputs must be bit for bit those of the project's
// store_all rung (reference/checkpointing/train_step.cpp) on the same inputs
// — the same Block calls on the same inputs give the same bits; the loss is
// the double-precision sum of y * dy in index order, rounded to float once
// (mw::checkpointing's begin_backward does that; you may copy it). (2) At
// the speed shape (16 blocks, 2048 tokens) the worker may hold at most the
// level's memory_limit_mb over all its processes: storing every block's
// activations does not fit, keeping a block input per segment of ~sqrt(L)
// blocks does. (3) Time, relative to store_all.
//
// This stub keeps everything — it is correct, and over the memory limit at
// the speed shape. Make it checkpoint. Keep the signature exactly as it is.
// The grader compiles this file with the level's flags (g++ -std=c++20 -O3
// -fopenmp, no -march=native: the kernels choose their ISA at run time).
// Check yourself with:
//     memwall grade 05 --submission levels/05-checkpointing/exercise/checkpointed_step_cpu.cpp --seed 1
#include <algorithm>
#include <vector>

#include "kernels/model/block_cpu.hpp"

extern "C" void student_train_step(const float* x, const float* params, const float* dy, float* loss, float* dparams,
                                   float* dx, int layers, int tokens, int seq, int d_model, int heads, int kv_heads,
                                   int d_ff) {
    namespace model = mw::model;
    model::Config c;
    c.layers = layers, c.d_model = d_model, c.heads = heads, c.kv_heads = kv_heads, c.d_ff = d_ff, c.max_seq = seq;
    const int B = tokens / seq, L = layers;
    const std::size_t P = model::layer_param_count(c), X = std::size_t(tokens) * std::size_t(d_model);
    model::cpu::Block block(c, B, seq);
    const model::cpu::BlockSizes sz(c, B, seq);

    // TODO: this keeps every block's input and activations: L (X + R) floats.
    std::vector<std::vector<float>> in(std::size_t(L) + 1, std::vector<float>(X));
    std::vector<model::cpu::BlockStore> acts;
    for (int l = 0; l < L; ++l) acts.emplace_back(sz, true, true);
    std::copy(x, x + X, in[0].begin());
    for (int l = 0; l < L; ++l)
        block.forward(model::bind_layer(c, params + l * P), in[std::size_t(l)].data(), acts[std::size_t(l)].acts,
                      in[std::size_t(l) + 1].data());

    double sum = 0;  // the loss, and the backward's start: dparams = 0, dx = dy
    for (std::size_t i = 0; i < X; ++i) sum += double(in[std::size_t(L)][i]) * double(dy[i]);
    loss[0] = float(sum);
    std::fill(dparams, dparams + std::size_t(L) * P, 0.0f);
    std::copy(dy, dy + X, dx);
    for (int l = L - 1; l >= 0; --l)
        block.backward(model::bind_layer(c, params + l * P), model::bind_layer(c, dparams + l * P),
                       in[std::size_t(l)].data(), acts[std::size_t(l)].acts, dx);
}
