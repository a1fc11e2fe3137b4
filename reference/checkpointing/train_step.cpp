// train_step, rung 0 (the reference): store everything. The forward pass
// keeps every block's input and every activation its backward pass reads
// (kernels/model/block_cpu.hpp's BlockActs: norms, q/k/v, the [T, T]
// attention probabilities per head, the MLP's a, b and h), so the backward
// pass recomputes nothing: 3 x forward FLOPs, and activation memory that
// grows with L x tokens — L (X + R) in the ladder's notation
// (reference/checkpointing/train_step.hpp), which is what limits the batch
// or the depth a training run fits in memory.
//
// Also the op itself: its problem, its fp64 oracle, its shapes and the
// memory and FLOP models every rung declares.
#include "reference/checkpointing/train_step.hpp"

#include <omp.h>

#include <cmath>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "harness/inputs.hpp"
#include "harness/command.hpp"
#include "harness/registry.hpp"
#include "kernels/model/block_cpu.hpp"
#include "kernels/model/block_cuda.hpp"
#include "model/model.hpp"

namespace mw::checkpointing {

model::Config config_of(const Shape& s) {
    model::Config c;
    c.d_model = int(s["d_model"]), c.layers = int(s["layers"]), c.heads = int(s["heads"]);
    c.kv_heads = int(s["kv_heads"]), c.d_ff = int(s["d_ff"]), c.max_seq = int(s["seq"]);
    return c;
}
int layers_of(const Shape& s) { return int(s["layers"]); }
int batch_of(const Shape& s) { return int(s["tokens"] / s["seq"]); }
int every_of(const Shape& s) {
    const int L = layers_of(s), k = int(s["every"]);
    return k > 0 ? std::min(k, L) : std::max(1, int(std::lround(std::sqrt(double(L)))));
}

StepIO io_of(Problem& p) {
    return {p.in("x").as<float>(), p.in("params").as<float>(), p.in("dy").as<float>(),
            p.out("loss").as<float>(), p.out("dparams").as<float>(), p.out("dx").as<float>()};
}

void begin_backward(const model::Config& c, std::int64_t rows, const float* y, const StepIO& io) {
    const std::size_t n = std::size_t(rows) * std::size_t(c.d_model);
    double loss = 0;
    for (std::size_t i = 0; i < n; ++i) loss += double(y[i]) * double(io.dy[i]);
    io.loss[0] = float(loss);
    std::fill(io.dparams, io.dparams + std::size_t(c.layers) * model::layer_param_count(c), 0.0f);
    std::copy(io.dy, io.dy + n, io.dx);
}

std::map<std::string, double> memory_model(const Shape& s, Rung r) {
    const model::Config c = config_of(s);
    const int B = batch_of(s), T = int(s["seq"]), L = c.layers, k = every_of(s);
    const model::cpu::BlockSizes sz(c, B, T);
    const double X = 4.0 * double(s["tokens"]) * c.d_model, R = 4.0 * double(sz.all()),
                 G = 4.0 * double(sz.gemm_outputs());
    // The backward's scratch: the gradients of one block's activations and a
    // [T, T] score block per thread (Block::scratch_bytes), and dx's partner.
    const double S = 4.0 * (double(s["tokens"]) * (c.d_model + 2.0 * c.q_dim() + 2.0 * c.kv_dim() + 3.0 * c.d_ff) +
                            double(omp_get_max_threads()) * T * T);
    switch (r) {
        case Rung::store_all: return {{"block_inputs", L * X}, {"activations", L * R}, {"scratch", S}};
        case Rung::every_k:
            return {{"checkpoints", (std::ceil(double(L) / k) - 1) * X}, {"segment", (k - 1) * X + k * R},
                    {"scratch", 2 * X + S}};
        case Rung::selective:
            return {{"block_inputs", L * X}, {"gemm_outputs", L * G}, {"recomputed", R - G}, {"scratch", S}};
        case Rung::recompute_all: return {{"block", R}, {"scratch", 3 * X + S}};
    }
    return {};
}

double executed_flops(const Shape& s, Rung r) {
    const model::Config c = config_of(s);
    const int B = batch_of(s), T = int(s["seq"]), L = c.layers, k = every_of(s);
    const double block = B * model::block_forward_flops(c, T), useful = 3.0 * L * block;
    switch (r) {
        case Rung::store_all: return useful;
        case Rung::every_k: {
            const int last = L - (int(std::ceil(double(L) / k)) - 1) * k;  // the last segment is never rebuilt
            return useful + (L - last) * block;
        }
        case Rung::selective: return useful + (L - 1) * B * model::block_score_flops(c, T);
        case Rung::recompute_all: return useful + double(L) * (L - 1) / 2 * block;
    }
    return useful;
}

std::map<std::string, double> memory_model_cuda(const Shape& s, Rung r) {
    const model::Config c = config_of(s);
    const int B = batch_of(s), T = int(s["seq"]), L = c.layers, k = every_of(s);
    const model::cpu::BlockSizes sz(c, B, T);
    const double X = 4.0 * double(s["tokens"]) * c.d_model, R = 4.0 * double(sz.all()),
                 G = 4.0 * double(sz.gemm_outputs()), S = model::gpu::block_scratch_bytes(c, B, T),
                 P = 4.0 * double(model::layer_param_count(c)) * L;
    const double copies = 3 * X + 2 * P + 4;  // x, dy, dx; params, dparams; the loss
    switch (r) {
        case Rung::store_all:
            return {{"block_inputs", L * X}, {"activations", L * R}, {"scratch", S}, {"device_copies", copies}};
        case Rung::every_k:
            return {{"checkpoints", (std::ceil(double(L) / k) - 1) * X}, {"segment", (k - 1) * X + k * R},
                    {"scratch", 2 * X + S}, {"device_copies", copies}};
        case Rung::selective:
            return {{"block_inputs", L * X}, {"gemm_outputs", L * G}, {"recomputed", R - G}, {"scratch", S},
                    {"device_copies", copies}};
        case Rung::recompute_all: return {{"block", R}, {"scratch", 3 * X + S}, {"device_copies", copies}};
    }
    return {};
}

double executed_flops_cuda(const Shape& s, Rung r) {
    // Whole block forwards (3 per block for the step, 1 per rebuilt block),
    // each at the full [T, T] square on the GPU; selective's recomputation is
    // the score product S = Q K^T alone (O is kept), also over the square.
    const model::Config c = config_of(s);
    const int B = batch_of(s), T = int(s["seq"]), L = c.layers;
    const double block = B * model::block_forward_flops(c, T),
                 scores = B * 2.0 * c.heads * c.head_dim() * double(T) * T,  // one product over the square
                 square = block + B * 2.0 * c.heads * c.head_dim() * double(T) * (T - 1);  // + 2 products x 2 hd x T(T-1)/2 masked pairs, per head
    if (r == Rung::selective) return 3.0 * L * square + (L - 1) * scores;
    return executed_flops(s, r) / block * square;
}

namespace {

using model::cpu::Block;
using model::cpu::BlockSizes;
using model::cpu::BlockStore;

std::string validate(const Shape& s) {
    const model::Config c = config_of(s);
    if (auto e = model::validate(c); !e.empty()) return e;
    if (s["tokens"] % s["seq"])
        return "tokens = " + std::to_string(s["tokens"]) + " must be a whole number of sequences of seq = " +
               std::to_string(s["seq"]);
    if (s["every"] > s["layers"])
        return "every = " + std::to_string(s["every"]) + " must be at most layers = " + std::to_string(s["layers"]) +
               " (0 = round(sqrt(layers)))";
    return {};
}

Problem make_problem(const Shape& s, DType dtype, std::uint64_t seed) {
    const model::Config c = config_of(s);
    const std::int64_t N = s["tokens"], d = c.d_model, P = std::int64_t(model::layer_param_count(c)), L = c.layers;
    Problem p;
    p.shape = s, p.dtype = dtype, p.seed = seed;
    // Inputs depend on the seed and the stack's sizes, never on `every`: a
    // sweep of k runs every point on the same step.
    Buffer x = Buffer::make("x", DType::f32, std::size_t(N * d), {N, d});
    fill_normal(x, mix_seed(seed, "x"));
    Buffer params = Buffer::make("params", DType::f32, std::size_t(L * P), {L, P});
    for (int l = 0; l < L; ++l) {
        const auto W = model::bind_layer(c, params.as<float>() + std::size_t(l * P));
        auto fill = [&](float* at, std::size_t n, const std::string& name, double scale, double offset) {
            Buffer t = Buffer::make(name, DType::f32, n);
            fill_normal(t, mix_seed(seed, "layers." + std::to_string(l) + "." + name), scale);
            for (std::size_t i = 0; i < n; ++i) at[i] = float(offset + t.as<float>()[i]);
        };
        // Gains near 1, matrices ~ N(0, 1/d_in); the residual outputs scaled
        // by 1/sqrt(2L) so that the stream's variance does not grow with depth.
        const double res = 1 / std::sqrt(2.0 * L), sd = 1 / std::sqrt(double(d)), sf = 1 / std::sqrt(double(c.d_ff)),
                     sq = 1 / std::sqrt(double(c.q_dim()));
        fill(W.attn_norm, std::size_t(d), "attn_norm", 0.1, 1.0), fill(W.mlp_norm, std::size_t(d), "mlp_norm", 0.1, 1.0);
        fill(W.wq, std::size_t(d * c.q_dim()), "wq", sd, 0), fill(W.wk, std::size_t(d * c.kv_dim()), "wk", sd, 0);
        fill(W.wv, std::size_t(d * c.kv_dim()), "wv", sd, 0), fill(W.wo, std::size_t(c.q_dim() * d), "wo", sq * res, 0);
        fill(W.w1, std::size_t(d * c.d_ff), "w1", sd, 0), fill(W.w3, std::size_t(d * c.d_ff), "w3", sd, 0);
        fill(W.w2, std::size_t(c.d_ff * d), "w2", sf * res, 0);
    }
    Buffer dy = Buffer::make("dy", DType::f32, std::size_t(N * d), {N, d});
    fill_normal(dy, mix_seed(seed, "dy"));
    p.inputs.push_back(std::move(x)), p.inputs.push_back(std::move(params)), p.inputs.push_back(std::move(dy));
    p.outputs.push_back(Buffer::make("loss", DType::f32, 1));
    p.outputs.push_back(Buffer::make("dparams", DType::f32, std::size_t(L * P), {L, P}));
    p.outputs.push_back(Buffer::make("dx", DType::f32, std::size_t(N * d), {N, d}));
    return p;
}

// The fp64 block stack, one sequence at a time (sequences in parallel, each
// with its own weight gradients, summed at the end). The inputs do not
// depend on `every`, so the last result is kept for a sweep over k.
std::vector<std::vector<double>> oracle(const Problem& p) {
    static std::mutex mutex;
    static std::string last_key;
    static std::vector<std::vector<double>> last;
    Shape key_shape = p.shape;
    key_shape.axes.erase("every");
    const std::string key = key_shape.str() + "/" + std::to_string(p.seed);
    std::lock_guard lock(mutex);
    if (key == last_key) return last;

    const model::Config c = config_of(p.shape);
    const int B = batch_of(p.shape), T = int(p.shape["seq"]), L = c.layers, d = c.d_model;
    const std::size_t P = model::layer_param_count(c), rows = std::size_t(T) * d;
    const std::vector<double> w(p.in("params").as<float>(), p.in("params").as<float>() + std::size_t(L) * P);
    std::vector<double> loss(std::size_t(B), 0.0), dx(std::size_t(B) * rows);
    std::vector<std::vector<double>> grads(std::size_t(B), std::vector<double>(std::size_t(L) * P, 0.0));
#pragma omp parallel for schedule(dynamic, 1)
    for (int b = 0; b < B; ++b) {
        const float* x = p.in("x").as<float>() + std::size_t(b) * rows;
        const float* dy = p.in("dy").as<float>() + std::size_t(b) * rows;
        std::vector<model::RefBlockActs> acts;
        std::vector<double> h(x, x + rows);
        for (int l = 0; l < L; ++l) {
            acts.push_back(model::ref_block_forward(c, model::bind_layer(c, w.data() + std::size_t(l) * P), h, T));
            h = acts.back().x_out;
        }
        std::vector<double> g(dy, dy + rows);
        for (std::size_t i = 0; i < rows; ++i) loss[std::size_t(b)] += h[i] * g[i];
        for (int l = L - 1; l >= 0; --l)
            model::ref_block_backward(c, model::bind_layer(c, w.data() + std::size_t(l) * P),
                                      model::bind_layer(c, grads[std::size_t(b)].data() + std::size_t(l) * P),
                                      acts[std::size_t(l)], g);
        std::copy(g.begin(), g.end(), dx.begin() + std::ptrdiff_t(std::size_t(b) * rows));
    }
    std::vector<double> total_loss{0.0}, dparams(std::size_t(L) * P, 0.0);
    for (int b = 0; b < B; ++b) {
        total_loss[0] += loss[std::size_t(b)];
        for (std::size_t i = 0; i < dparams.size(); ++i) dparams[i] += grads[std::size_t(b)][i];
    }
    last_key = key;
    last = {total_loss, dparams, dx};
    return last;
}

Instance prepare_store_all(Problem& p) {
    struct State {
        Block block;
        std::vector<std::vector<float>> x;  // x[l]: the input of block l (x[0] unused: the problem's x); x[L] = y
        std::vector<BlockStore> acts;
        State(const model::Config& c, int B, int T) : block(c, B, T) {}
    };
    const model::Config c = config_of(p.shape);
    const int B = batch_of(p.shape), T = int(p.shape["seq"]), L = c.layers;
    auto st = std::make_shared<State>(c, B, T);
    const BlockSizes sz(c, B, T);
    const std::size_t X = std::size_t(p.shape["tokens"]) * std::size_t(c.d_model);
    for (int l = 0; l < L; ++l) st->x.emplace_back(l == 0 ? 0 : X), st->acts.emplace_back(sz, true, true);
    st->x.emplace_back(X);
    const StepIO io = io_of(p);
    Instance inst;
    inst.run = [st, io, c, L] {
        const std::size_t P = model::layer_param_count(c);
        auto in = [&](int l) { return l == 0 ? io.x : st->x[std::size_t(l)].data(); };
        for (int l = 0; l < L; ++l)
            st->block.forward(model::bind_layer(c, io.params + l * P), in(l), st->acts[std::size_t(l)].acts,
                              st->x[std::size_t(l) + 1].data());
        begin_backward(c, st->block.rows(), st->x.back().data(), io);
        for (int l = L - 1; l >= 0; --l)
            st->block.backward(model::bind_layer(c, io.params + l * P), model::bind_layer(c, io.dparams + l * P), in(l),
                               st->acts[std::size_t(l)].acts, io.dx);
    };
    return inst;
}

}  // namespace
}  // namespace mw::checkpointing

MW_REGISTER_OP(train_step, {
    .name = "train_step", .lever = "checkpointing",
    .summary = "one training step (forward, loss = sum(y * dy), backward) over a stack of the model's transformer "
               "blocks; outputs the loss and the gradients of every parameter and of the input",
    .axes = {"layers", "tokens", "seq", "d_model", "heads", "kv_heads", "d_ff", "every"},
    // The default model's blocks, 16 deep, two sequences of its 256-token
    // context: store_all keeps ~190 MiB of activations, far beyond an L3.
    .default_shape = {{{"layers", 16}, {"tokens", 512}, {"seq", 256}, {"d_model", 256}, {"heads", 8},
                       {"kv_heads", 4}, {"d_ff", 704}, {"every", 0}}},
    .quick_shape = {{{"layers", 4}, {"tokens", 128}, {"seq", 64}, {"d_model", 64}, {"heads", 4}, {"kv_heads", 2},
                     {"d_ff", 96}, {"every", 0}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return mw::checkpointing::executed_flops(s, mw::checkpointing::Rung::store_all); },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        const auto c = mw::checkpointing::config_of(s);
        const double X = 4.0 * double(s["tokens"]) * c.d_model, P = 4.0 * double(mw::model::layer_param_count(c)) * c.layers;
        return 3 * X + 2 * P + 4;  // x, dy and dx; params and dparams; the loss
    },
    .unit = {"tokens", [](const mw::Shape& s) { return double(s["tokens"]); }},
    .make_problem = mw::checkpointing::make_problem,
    .oracle = mw::checkpointing::oracle,
    // A gradient sums over every row, through every block.
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["tokens"]) * double(s["layers"]); }},
    .validate = mw::checkpointing::validate,
    .flag_axes = {"every"},
});

MW_REGISTER_VARIANT(train_step_store_all_cpu, {
    .name = "store_all", .op = "train_step", .lever = "checkpointing",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "every activation of every block kept for the backward pass: nothing recomputed, memory grows "
                 "with layers x tokens",
    .needs = {"avx2"},
    .executed_flops = [](const mw::Shape& s) {
        return mw::checkpointing::executed_flops(s, mw::checkpointing::Rung::store_all);
    },
    .prepare = mw::checkpointing::prepare_store_all,
    .memory_model = [](const mw::Shape& s) {
        return mw::checkpointing::memory_model(s, mw::checkpointing::Rung::store_all);
    },
});
