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
// oracle), corpus.hpp (the training text), optimized/model/ (the fp32 training
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

template <class P> ParamPtrs<P> bind(const Config& c, P flat) {
    const auto t = layout(c);
    std::size_t at = 0;
    auto next = [&] { return flat + t[at++].offset; };
    ParamPtrs<P> p;
    p.embed = next();
    for (int l = 0; l < c.layers; ++l) {
        LayerPtrs<P> w;
        w.attn_norm = next(), w.wq = next(), w.wk = next(), w.wv = next(), w.wo = next();
        w.mlp_norm = next(), w.w1 = next(), w.w3 = next(), w.w2 = next();
        p.layer.push_back(w);
    }
    p.final_norm = next();
    return p;
}

// FLOPs of one forward pass over a causal sequence of T tokens (batch 1),
// counting 2 per multiply-add: the matrices (including the tied head) and the
// attention scores and weighted sums at each position's real prefix length.
// A training step costs 3x its forward (PaLM's "model FLOPs": the backward
// is twice the forward; recomputation is not counted).
double forward_flops(const Config& c, std::int64_t T);

}  // namespace mw::model
