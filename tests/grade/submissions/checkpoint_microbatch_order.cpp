// Negative control for level 05 (checkpointing): saves memory another way —
// one sequence at a time (micro-batches), each through its own stored
// forward and backward, its weight gradients added into dparams. The same
// mathematics, and the same numbers for a single sequence; but with two or
// more sequences every weight gradient (a sum over all rows) is summed in
// another order than store_all's one pass over the rows, so the bits differ.
// The shapes of one sequence keep their points; the others lose theirs.
#include <algorithm>
#include <vector>

#include "kernels/model/block_cpu.hpp"

extern "C" void student_train_step(const float* x, const float* params, const float* dy, float* loss, float* dparams,
                                   float* dx, int layers, int tokens, int seq, int d_model, int heads, int kv_heads,
                                   int d_ff) {
    namespace model = mw::model;
    model::Config c;
    c.layers = layers, c.d_model = d_model, c.heads = heads, c.kv_heads = kv_heads, c.d_ff = d_ff, c.max_seq = seq;
    const int L = layers, B = tokens / seq;
    const std::size_t P = model::layer_param_count(c), X1 = std::size_t(seq) * std::size_t(d_model);
    model::cpu::Block block(c, 1, seq);
    std::vector<model::cpu::BlockStore> acts;
    for (int l = 0; l < L; ++l) acts.emplace_back(model::cpu::BlockSizes(c, 1, seq), true, true);
    std::vector<std::vector<float>> in(std::size_t(L) + 1, std::vector<float>(X1));
    std::fill(dparams, dparams + std::size_t(L) * P, 0.0f);
    double sum = 0;
    for (int b = 0; b < B; ++b) {
        std::copy(x + b * X1, x + (b + 1) * X1, in[0].begin());
        for (int l = 0; l < L; ++l)
            block.forward(model::bind_layer(c, params + l * P), in[std::size_t(l)].data(), acts[std::size_t(l)].acts,
                          in[std::size_t(l) + 1].data());
        for (std::size_t i = 0; i < X1; ++i) sum += double(in[std::size_t(L)][i]) * double(dy[b * X1 + i]);
        float* g = dx + b * X1;
        std::copy(dy + b * X1, dy + (b + 1) * X1, g);
        for (int l = L - 1; l >= 0; --l)
            block.backward(model::bind_layer(c, params + l * P), model::bind_layer(c, dparams + l * P),
                           in[std::size_t(l)].data(), acts[std::size_t(l)].acts, g);
    }
    loss[0] = float(sum);
}
