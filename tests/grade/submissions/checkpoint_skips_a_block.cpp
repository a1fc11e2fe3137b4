// Negative control for level 05 (checkpointing): checkpoints every block
// input and rebuilds each block just before its backward — but never runs the
// backward of block 0, so its parameter gradients stay zero and dx is the
// gradient at block 1's input. Every shape loses its points.
#include <algorithm>
#include <vector>

#include "kernels/model/block_cpu.hpp"

extern "C" void student_train_step(const float* x, const float* params, const float* dy, float* loss, float* dparams,
                                   float* dx, int layers, int tokens, int seq, int d_model, int heads, int kv_heads,
                                   int d_ff) {
    namespace model = mw::model;
    model::Config c;
    c.layers = layers, c.d_model = d_model, c.heads = heads, c.kv_heads = kv_heads, c.d_ff = d_ff, c.max_seq = seq;
    const int L = layers;
    const std::size_t P = model::layer_param_count(c), X = std::size_t(tokens) * std::size_t(d_model);
    model::cpu::Block block(c, tokens / seq, seq);
    model::cpu::BlockStore acts(model::cpu::BlockSizes(c, tokens / seq, seq), true, true);
    std::vector<std::vector<float>> in(std::size_t(L) + 1, std::vector<float>(X));
    std::copy(x, x + X, in[0].begin());
    for (int l = 0; l < L; ++l)
        block.forward(model::bind_layer(c, params + l * P), in[std::size_t(l)].data(), acts.acts,
                      in[std::size_t(l) + 1].data());
    double sum = 0;
    for (std::size_t i = 0; i < X; ++i) sum += double(in[std::size_t(L)][i]) * double(dy[i]);
    loss[0] = float(sum);
    std::fill(dparams, dparams + std::size_t(L) * P, 0.0f);
    std::copy(dy, dy + X, dx);
    std::vector<float> scratch(X);
    for (int l = L - 1; l >= 1; --l) {  // BUG: block 0 skipped
        block.forward(model::bind_layer(c, params + l * P), in[std::size_t(l)].data(), acts.acts, scratch.data());
        block.backward(model::bind_layer(c, params + l * P), model::bind_layer(c, dparams + l * P),
                       in[std::size_t(l)].data(), acts.acts, dx);
    }
}
