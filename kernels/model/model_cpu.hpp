// The model stack in fp32 on the CPU, built from the levers' kernels: every
// matrix product is the vectorization lever's packed SIMD GEMM (gemm_ex,
// kernels/vectorization/gemm_cpu.hpp), attention rows go through the fusion
// lever's softmax row kernels, the element-wise layers are
// kernels/model/layers_cpu.hpp. The fp64 oracle is model/.
//
// TrainStep: the forward pass of a batch of B sequences of T tokens with
// every activation the backward pass needs kept ("store everything" — the
// checkpointing lever's starting point), the manual backward pass, and the
// loss. The layers are kernels/model/block_cpu.hpp's Block, run in turn;
// attention is materialized per head ([T, T] probabilities kept for the
// backward pass).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/model/block_cpu.hpp"
#include "kernels/kv_cache/kv_store.hpp"
#include "kernels/model/layers_cpu.hpp"
#include "kernels/precision/gemv.hpp"
#include "kernels/precision/quant.hpp"
#include "kernels/model/config.hpp"

namespace mw {
class FreeCores;  // harness/disturbance.hpp
}

namespace mw::model::cpu {

class TrainStep {
public:
    TrainStep(const Config& c, int batch, int seq);
    const Config& config() const { return c_; }

    // Mean cross-entropy over the B*T predictions of targets from tokens
    // (both [B][T]); `logits` (optional) receives [B*T][vocab].
    double forward(const float* params, const int* tokens, const int* targets, float* logits = nullptr);
    // forward(), then the gradient of the mean loss added into `grads`
    // (param_count values; the caller zeroes them).
    double forward_backward(const float* params, float* grads, const int* tokens, const int* targets);

    // Runs later calls on sequences of `seq` tokens, at most the length the
    // step was built for (its buffers are reused, nothing is allocated).
    void set_seq(int seq);

    int batch() const { return block_.batch(); }
    int seq() const { return block_.seq(); }

private:
    Config c_;
    Block block_;
    std::int64_t N_;  // B * T rows
    std::vector<std::vector<float>> x_;  // residual stream entering layer l (x_[layers] leaves the last)
    std::vector<BlockStore> layer_;
    std::vector<float> xf_, rf_, z_, dz_, dx_, dxf_;
};

// Token-by-token decoding through a key/value cache
// (kernels/kv_cache/kv_store.hpp: contiguous fp32 or int8, or paged). Every
// projection is one GEMV of the precision lever on weights prepared once, at
// construction, as [d_out][d_in] rows in `weights`' format (fp32 by default;
// bf16, int8 or int4 make a quantized copy of the model) and repacked for
// the fastest rung (kernels/precision/gemv.hpp, rung 6: 16-row panels; the
// quantized formats round x to bf16 or int8 per block inside the GEMV, as
// rungs 5-6 do). Wq|Wk|Wv and W1|W3 are stacked so each is one pass over its
// weights, and the n rows of one step (several sequences, or the positions
// of one prompt) share that pass. The tied head is the embedding itself,
// already [vocab][d_model] rows. Attention over the cache is the store's:
// one kv head's group of query heads per task, tasks over the threads.
// A step runs on the threads other processes leave free (FreeCores: of the
// count OpenMP would use, at most the cores others left over the last
// 0.1 s): a step is a parallel region per weight matrix (~17 for the trained
// model), and a thread parked behind a neighbour would hold every barrier.
class Decoder {
public:
    // One sequence (id 0) in a contiguous fp32 cache of c.max_seq positions.
    Decoder(const Config& c, const float* params, precision::QuantSpec weights = {});
    // Sequences kept in `store` (not owned; its geometry must be the
    // model's), at positions below max_pos (the RoPE table's length).
    Decoder(const Config& c, const float* params, precision::QuantSpec weights, kv_cache::KvStore& store,
            int max_pos);
    ~Decoder();

    // The one-sequence interface (first constructor): appends `token` at
    // position() and returns its next-token logits [vocab] (valid until the
    // next call). Throws past max_seq.
    void reset();
    int position() const { return len_; }
    const float* step(int token);

    // n rows at once: token[i] appended at position pos[i] of sequence
    // seq[i], whose cache must have room for it (KvStore::grow). Rows of one
    // sequence may follow each other at consecutive positions (a prompt):
    // each attends to the positions before it and itself. Returns the
    // logits [n][vocab] (valid until the next call).
    const float* step(int n, const int* seq, const int* pos, const int* token);

    const Config& config() const { return c_; }
    kv_cache::KvStore& store() { return *store_; }
    // Bytes of weights one step streams (the GEMV's stored bytes).
    double weight_bytes() const;
    // How many steps ran on fewer threads than asked, and why (a summary's
    // note that the machine was busy).
    const FreeCores& free_cores() const { return *free_cores_; }

    // A weight matrix in the fastest layout its format has: repacked panels
    // (rung 6) for f32, bf16, int8_channel and int4; f16 keeps rung 2's rows.
    struct Mat {
        precision::QMatrix rows;
        precision::PackedMatrix panels;
        bool packed = false;
        void apply(const float* x, std::int64_t n, float* y) const;
        double bytes() const;
    };

private:
    struct LayerQ {
        Mat qkv, wo, w13, w2;
        const float *attn_norm, *mlp_norm;
    };
    void build(const float* params, precision::QuantSpec weights);
    void resize(int n);
    Config c_;
    std::unique_ptr<kv_cache::KvStore> own_;
    kv_cache::KvStore* store_;
    std::vector<LayerQ> layer_;
    Mat head_;
    const float* embed_;
    const float* final_norm_;
    RopeTable rope_;
    int len_ = 0, rows_ = 0;
    std::vector<float> x_, xn_, qkv_, o_, h13_, h_, tmp_, logits_, rstd_;
    std::unique_ptr<FreeCores> free_cores_;
};

// AdamW (decoupled weight decay) over the flat parameter vector; matrices
// and the embedding are decayed, RMSNorm gains are not.
struct AdamW {
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
    std::int64_t step = 0;
    std::vector<float> m, v;
    std::vector<unsigned char> decay;  // per parameter: 1 = decayed
    AdamW(const Config& c);
    void update(float* params, const float* grads, float lr_now);
};

// Scales grads so that their global L2 norm is at most max_norm; returns the
// norm before clipping.
double clip_grad_norm(float* grads, std::size_t n, double max_norm);

}  // namespace mw::model::cpu
