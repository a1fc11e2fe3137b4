// One transformer block of the model stack in fp32 on the CPU: its forward
// pass, its manual backward pass, and the pieces of the forward pass a
// checkpointed step recomputes. The training step (model_cpu.hpp) runs a
// stack of these with every activation kept; the checkpointing lever
// (reference/checkpointing/, optimized/checkpointing/) runs the same calls
// with fewer kept, so every rung's gradients are the same arithmetic in the
// same order — bit for bit the same numbers.
//
// A block maps x [N, d] (N = B*T rows, B sequences of T positions) to
//   xn1 = rmsnorm(x) g1                        (r1: the rows' 1/rms)
//   q, k, v = xn1 Wq, xn1 Wk, xn1 Wv, then RoPE on q and k
//   p = causal softmax(q k^T / sqrt(hd)) per head,  o = p v
//   x_mid = x + o Wo
//   xn2 = rmsnorm(x_mid) g2                    (r2)
//   a, b = xn2 W1, xn2 W3;  h = silu(a) b
//   x_out = x_mid + h W2
// Every matrix product is gemm_ex (kernels/vectorization/gemm_cpu.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/model/layers_cpu.hpp"
#include "kernels/model/config.hpp"

namespace mw::model::cpu {

using LayerW = LayerPtrs<const float*>;
using LayerG = LayerPtrs<float*>;

// What one block's backward pass reads, besides its input x: pointers into
// storage the caller owns, so a rung decides which of them are kept per
// block and which share one buffer that is refilled before the backward.
struct BlockActs {
    float *xn1 = nullptr, *r1 = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *p = nullptr, *o = nullptr,
          *x_mid = nullptr, *xn2 = nullptr, *r2 = nullptr, *a = nullptr, *b = nullptr, *h = nullptr;
};

// Element counts of each activation of one block (p: [B, heads, T, T]).
struct BlockSizes {
    std::size_t xn1, r1, q, k, v, p, o, x_mid, xn2, r2, a, b, h;
    BlockSizes(const Config& c, int batch, int seq);
    // Everything a block's backward reads (its input x not included).
    std::size_t all() const { return xn1 + r1 + q + k + v + p + o + x_mid + xn2 + r2 + a + b + h; }
    // The products of the matrix multiplications and the residual sum
    // (q, k, v, o, x_mid, a, b): what a selective checkpoint keeps.
    std::size_t gemm_outputs() const { return q + k + v + o + x_mid + a + b; }
    // The rest (xn1, r1, p, xn2, r2, h): cheap to recompute from the above.
    std::size_t cheap() const { return all() - gemm_outputs(); }
};

// Owned storage for some of a block's activations: `gemm_outputs` and/or
// `cheap` ones (both: a whole BlockActs).
struct BlockStore {
    std::vector<float> data;
    BlockActs acts;
    BlockStore() = default;
    BlockStore(const BlockSizes& s, bool gemm_outputs, bool cheap);
};
// `kept`'s GEMM outputs with `cheap`'s recomputable buffers.
BlockActs combine(const BlockActs& kept, const BlockActs& cheap);

class Block {
public:
    Block(const Config& c, int batch, int seq);
    const Config& config() const { return c_; }
    int batch() const { return B_; }
    int seq() const { return T_; }
    std::int64_t rows() const { return N_; }
    // Later calls run on sequences of `seq` <= the constructed length.
    void set_seq(int seq);

    // x [N, d] -> x_out [N, d], filling every activation in A.
    void forward(const LayerW& W, const float* x, const BlockActs& A, float* x_out);
    // Refills A's cheap activations (xn1, r1, p, xn2, r2, h) from its GEMM
    // outputs and x: the same calls as forward(), so the same bits.
    void recompute_cheap(const LayerW& W, const float* x, const BlockActs& A);
    // dx holds d loss / d x_out on entry and d loss / d x on return; the
    // weight gradients are added into G.
    void backward(const LayerW& W, const LayerG& G, const float* x, const BlockActs& A, float* dx);
    // Bytes of the backward pass's own scratch (the gradients of one block's
    // activations, per-thread score blocks), allocated at construction.
    std::size_t scratch_bytes() const;

private:
    void norm_attn_in(const LayerW& W, const float* x, const BlockActs& A);
    void attention_forward(const BlockActs& A, bool with_output);
    void attention_backward(const BlockActs& A, const float* dO, float* dq, float* dk, float* dv);

    Config c_;
    int B_, T_, T_cap_;
    std::int64_t N_;
    RopeTable rope_;
    std::vector<int> pos_;  // position of each row: row % T
    std::vector<float> dxn_, dO_, dq_, dk_, dv_, dh_, da_, db_;
    std::vector<std::vector<float>> head_scratch_;  // per thread: dP / dS [T][T]
};

}  // namespace mw::model::cpu
