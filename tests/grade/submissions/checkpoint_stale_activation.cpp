// Negative control for level 05 (checkpointing): checkpoints every block
// input, but keeps the checkpoints in storage that outlives the call and
// refills it only when the shape changes — so the second call on a shape
// rebuilds its blocks from the first call's activations. The first call on
// each shape is right, the second (fresh inputs) is not: every shape loses
// its points.
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
    static std::vector<std::vector<float>> in;  // BUG: kept from the previous call
    std::vector<float> y(X);
    const bool fresh = in.size() != std::size_t(L) + 1 || in[0].size() != X;
    if (fresh) in.assign(std::size_t(L) + 1, std::vector<float>(X));
    std::copy(x, x + X, in[0].begin());
    for (int l = 0; l < L; ++l) {
        float* out = l + 1 == L ? y.data() : in[std::size_t(l) + 1].data();
        if (fresh || l + 1 == L)  // BUG: the inner checkpoints are refilled only for a new shape
            block.forward(model::bind_layer(c, params + l * P), in[std::size_t(l)].data(), acts.acts, out);
    }
    double sum = 0;
    for (std::size_t i = 0; i < X; ++i) sum += double(y[i]) * double(dy[i]);
    loss[0] = float(sum);
    std::fill(dparams, dparams + std::size_t(L) * P, 0.0f);
    std::copy(dy, dy + X, dx);
    std::vector<float> scratch(X);
    for (int l = L - 1; l >= 0; --l) {
        block.forward(model::bind_layer(c, params + l * P), in[std::size_t(l)].data(), acts.acts, scratch.data());
        block.backward(model::bind_layer(c, params + l * P), model::bind_layer(c, dparams + l * P),
                       in[std::size_t(l)].data(), acts.acts, dx);
    }
}
