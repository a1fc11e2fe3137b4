// The model stack's shape: a decoder-only transformer of the Llama family,
// shared by the checkpointing, KV-cache, speculative-decoding and MoE levers.
//
//   tokens -> embedding E[vocab, d]                      (byte-level: vocab 256)
//   L x {  x += Wo . attn(rope(RMSNorm(x) Wq), rope(RMSNorm(x) Wk), RMSNorm(x) Wv)
//          x += W2 . (silu(RMSNorm(x) W1) * (RMSNorm(x) W3)) }
//   logits = RMSNorm(x) E^T                              (head tied to the embedding)
//
// Attention is causal with `kv_heads` <= `heads`: query head h reads key/value
// head h / (heads / kv_heads), so MHA (kv_heads = heads), GQA and MQA
// (kv_heads = 1) are one code path. Weights are stored [d_in, d_out]
// row-major (y = x W); RoPE rotates interleaved pairs (x[2j], x[2j+1]) of each
// head by pos * base^(-2j/head_dim).
//
// Files: config.hpp (this), model.hpp (parameters, the fp64 reference
// forward/backward and the fp32 paths' entry points), reference.cpp (fp64
// oracle), corpus.hpp (the training text), kernels/model/ (the fp32 training
// step and decoder built from the levers' kernels).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mw::model {

struct Config {
    int d_model = 256;
    int layers = 4;
    int heads = 8;
    int kv_heads = 4;
    int d_ff = 704;      // SwiGLU hidden width, ~8/3 d_model rounded to a multiple of 32
    int vocab = 256;     // bytes
    int max_seq = 256;   // longest context RoPE and the caches are built for
    double rope_base = 10000.0;
    double norm_eps = 1e-5;

    int head_dim() const { return d_model / heads; }
    int q_dim() const { return heads * head_dim(); }
    int kv_dim() const { return kv_heads * head_dim(); }
    bool operator==(const Config&) const = default;
};

// Empty when valid, else a message naming the bad field, its value and the rule.
std::string validate(const Config& c);
// Throws std::invalid_argument with validate()'s message.
void require_valid(const Config& c);

// One parameter tensor inside the flat parameter vector.
struct TensorInfo {
    std::string name;                 // "layers.0.wq"
    std::vector<std::int64_t> shape;  // [d_in, d_out] for matrices
    std::size_t offset = 0, count = 0;
};

// Every parameter in storage order: embed, then per layer attn_norm, wq, wk,
// wv, wo, mlp_norm, w1, w3, w2, then final_norm.
std::vector<TensorInfo> layout(const Config& c);
std::size_t param_count(const Config& c);

// Pointers to one layer's tensors (or their gradients) inside a flat vector.
template <class P> struct LayerPtrs {
    P attn_norm, wq, wk, wv, wo, mlp_norm, w1, w3, w2;
};
template <class P> struct ParamPtrs {
    P embed;
    std::vector<LayerPtrs<P>> layer;
    P final_norm;
};

// Parameters of one block, stored contiguously in the order of LayerPtrs.
inline std::size_t layer_param_count(const Config& c) {
    const std::size_t d = std::size_t(c.d_model), qd = std::size_t(c.q_dim()), kvd = std::size_t(c.kv_dim()),
                      f = std::size_t(c.d_ff);
    return d + d * qd + 2 * d * kvd + qd * d + d + 3 * d * f;
}
// One block's tensors from a pointer to its first parameter (attn_norm [d],
// wq [d, q_dim], wk, wv [d, kv_dim], wo [q_dim, d], mlp_norm [d], w1, w3
// [d, d_ff], w2 [d_ff, d]).
template <class P> LayerPtrs<P> bind_layer(const Config& c, P flat) {
    const std::size_t d = std::size_t(c.d_model), qd = std::size_t(c.q_dim()), kvd = std::size_t(c.kv_dim()),
                      f = std::size_t(c.d_ff);
    LayerPtrs<P> w;
    w.attn_norm = flat, flat += d;
    w.wq = flat, flat += d * qd;
    w.wk = flat, flat += d * kvd;
    w.wv = flat, flat += d * kvd;
    w.wo = flat, flat += qd * d;
    w.mlp_norm = flat, flat += d;
    w.w1 = flat, flat += d * f;
    w.w3 = flat, flat += d * f;
    w.w2 = flat;
    return w;
}

template <class P> ParamPtrs<P> bind(const Config& c, P flat) {
    const std::size_t d = std::size_t(c.d_model), per_layer = layer_param_count(c);
    ParamPtrs<P> p;
    p.embed = flat;
    P at = flat + std::size_t(c.vocab) * d;
    for (int l = 0; l < c.layers; ++l, at += per_layer) p.layer.push_back(bind_layer(c, at));
    p.final_norm = at;
    return p;
}

// FLOPs of one forward pass over a causal sequence of T tokens (batch 1),
// counting 2 per multiply-add: the matrices (including the tied head) and the
// attention scores and weighted sums at each position's real prefix length.
// A training step costs 3x its forward (PaLM's "model FLOPs": the backward
// is twice the forward; recomputation is not counted).
double forward_flops(const Config& c, std::int64_t T);
// The part of it one block costs: its matrices and its attention.
double block_forward_flops(const Config& c, std::int64_t T);
// The attention scores alone (q k^T over each position's prefix), per block.
double block_score_flops(const Config& c, std::int64_t T);

// Seeded initialization (deterministic for a seed on every machine): matrices
// and the embedding ~ N(0, 0.02^2), the residual-output matrices (wo, w2)
// scaled by 1/sqrt(2 layers) so the residual stream's variance does not grow
// with depth (GPT-2's rule); RMSNorm gains 1.
std::vector<float> init_params(const Config& c, std::uint64_t seed);

// Function-preserving widening (Net2Net's idea, by tiling): the model `c`
// made `w` times wider in every width (d_model, heads, kv_heads, d_ff; head
// width, layers, vocabulary and context unchanged) whose logits equal c's in
// exact arithmetic. Every hidden vector of the wide model is the narrow one
// repeated w times: the embedding's columns and the norm gains are tiled;
// every block matrix is tiled w x w and divided by w (its input arrives w
// times, its output is wanted w times); the final norm's gain is tiled and
// divided by w, since the tied head sums over the w copies. Wide head
// h + i * heads is narrow head h, and it reads kv head kh + i * kv_heads,
// the copy of its own kv head: attention, RoPE included, is unchanged, and
// the RMS of a tiled vector is the vector's. In fp32 only the order of the
// sums differs (w a power of two: the 1/w is exact). Costs w^2 the matrix
// bytes: how the speculative lever makes the trained model memory-bound.
Config widened_config(const Config& c, int w);  // throws unless 1 <= w <= 64

template <class T> std::vector<T> widen_params(const Config& c, const T* params, int w) {
    const Config wc = widened_config(c, w);
    const auto narrow = layout(c), wide = layout(wc);
    std::vector<T> out(param_count(wc));
    for (std::size_t t = 0; t < narrow.size(); ++t) {
        const TensorInfo &n = narrow[t], &o = wide[t];
        const T* src = params + n.offset;
        T* dst = out.data() + o.offset;
        const std::size_t R = std::size_t(n.shape[0]), C = n.shape.size() == 2 ? std::size_t(n.shape[1]) : 1;
        if (n.shape.size() == 1) {  // a norm's gain
            for (std::size_t i = 0; i < std::size_t(w) * R; ++i)
                dst[i] = n.name == "final_norm" ? src[i % R] / T(w) : src[i % R];
        } else if (n.name == "embed") {  // [vocab, d]: the columns tiled
            for (std::size_t r = 0; r < R; ++r)
                for (std::size_t j = 0; j < std::size_t(w) * C; ++j) dst[r * std::size_t(w) * C + j] = src[r * C + j % C];
        } else {  // [d_in, d_out]: tiled w x w, divided by w
            for (std::size_t r = 0; r < std::size_t(w) * R; ++r)
                for (std::size_t j = 0; j < std::size_t(w) * C; ++j)
                    dst[r * std::size_t(w) * C + j] = src[(r % R) * C + j % C] / T(w);
        }
    }
    return out;
}

}  // namespace mw::model
