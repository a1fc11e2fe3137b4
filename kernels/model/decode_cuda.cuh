// The model stack's decoder on the GPU: one decode step of `batch`
// sequences (one new token each) through the trained model, every weight on
// the device, the keys and values in a paged cache. Compiled by nvcc
// (backend "cuda") and by the host compiler through the emulator
// ("cuda-emu") from this one source; the KV-cache lever's CUDA rungs of
// decode_step and generate (reference/kv_cache/decode_cuda.hpp) run it.
//
// A step is a fixed chain of launches that reads everything that changes
// from one step to the next — each sequence's input token, its position and
// its cache length — from device arrays (tokens(), positions(), lengths()),
// never from launch arguments. That is what lets one step be captured into
// a CUDA graph once and replayed at every position (optimized/kv_cache/
// decode_graph.cu), and what lets generate's loop pick the next token on the
// device (advance(): argmax, no copy to the host between steps).
//
// Per layer, with x the residual stream [batch][d]:
//   rmsnorm            xn = RMSNorm(x)                     (kernels/model/elementwise.cuh)
//   gemv_rows          q | k | v = xn [Wq | Wk | Wv]       one launch, three outputs
//   rope (x2)          q, k turned by each row's position  (elementwise.cuh)
//   kv_append          k, v into the cache at the position (kernels/kv_cache/paged_attention.cuh)
//   paged_decode (x2)  o = attention of q over the cache   (split + merge, paged_attention.cuh)
//   gemv_rows          x += o Wo                            (accumulating)
//   rmsnorm            xn = RMSNorm(x)
//   gemv_rows          a | b = xn [W1 | W3]
//   swiglu             h = silu(a) * b                      (elementwise.cuh)
//   gemv_rows          x += h W2
// after the embedding's gather, and then the final RMSNorm and the tied head
// (logits = xn E^T): 3 + 12 x layers launches (51 for the default 4-layer
// model). At batch 1 each launch does
// microseconds of work or less — the whole model is 12 MB, 3 us of an H100's
// bandwidth — so launch overhead, not bytes, is what a step costs.
//
// gemv_rows: the weights are stored transposed from the model's [d_in,
// d_out] (y = x W) into rows [d_out][d_in] (a matrix is read along its rows,
// contiguously); one warp per output row, a block of 4 warps, lanes strided
// over d_in (a warp reads 128 contiguous bytes per step), and 4 sequences'
// dot products per pass over the row: at batch B the row is read B / 4 times
// (from L1/L2 after the first). Each output is reduced by warp shuffles and
// written by lane 0.
//
// The cache: per layer a pool of pages of kPageSize positions
// [page][16][kv_heads][hd] for K and for V, and one block table [batch]
// [max_pages] for all layers (a sequence's i-th page has the same number in
// every layer's pool). A contiguous cache is the identity table (sequence
// s's pages s x max_pages ..); a paged one deals the pool's pages in any
// order. The attention kernels read through the table either way. With
// Elem::i8 the pages hold int8 codes and a scale per (position, kv head)
// (kv_cache::PagedKv8: the CPU's int8 cache rule, kernels/kv_cache/
// attend.hpp), written by kv_append's int8 kernel and widened back inside
// the split kernel.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/cuda/device_problem.hpp"
#include "kernels/cuda/warp.hpp"
#include "kernels/kv_cache/kv_store.hpp"  // Elem
#include "kernels/kv_cache/paged_attention.cuh"
#include "kernels/model/config.hpp"
#include "kernels/model/elementwise.cuh"

namespace mw::model::gpu_decode {
namespace {

constexpr int kGemvWarps = 4;       // output rows per block of gemv_rows
constexpr int kGemvSequences = 4;   // sequences per pass over a weight row
constexpr int kAdvanceThreads = 256;

// Where gemv_rows' output rows go: rows [begin[i], begin[i + 1]) to out[i]
// ([batch][begin[i + 1] - begin[i]]), written or (accumulate) added to.
struct RowOutputs {
    float* out[3] = {nullptr, nullptr, nullptr};
    int begin[4] = {0, 0, 0, 0};
    int parts = 1;
    bool accumulate = false;
};

__global__ void MW_LAUNCH_BOUNDS(kGemvWarps * 32)
    gemv_rows_kernel(const float* __restrict__ W, const float* __restrict__ x, int batch, int d_in, RowOutputs o) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r = blockIdx.x * kGemvWarps + warp;
    if (r >= o.begin[o.parts]) return;  // the whole warp: no shuffle is left waiting
    int part = 0;
    while (r >= o.begin[part + 1]) ++part;
    const int width = o.begin[part + 1] - o.begin[part], col = r - o.begin[part];
    const float* w = W + std::int64_t(r) * d_in;
    for (int b0 = 0; b0 < batch; b0 += kGemvSequences) {
        float acc[kGemvSequences] = {};
        for (int i = lane; i < d_in; i += 32) {
            const float wi = w[i];
#pragma unroll
            for (int j = 0; j < kGemvSequences; ++j)
                if (b0 + j < batch) acc[j] += wi * x[std::int64_t(b0 + j) * d_in + i];
        }
#pragma unroll
        for (int j = 0; j < kGemvSequences; ++j) {
            if (b0 + j >= batch) break;  // the same for the whole warp: no shuffle left waiting
            const float s = mw::warp::warp_sum(acc[j]);
            if (lane == 0) {
                float* y = o.out[part] + std::int64_t(b0 + j) * width + col;
                *y = o.accumulate ? *y + s : s;
            }
        }
    }
}

// The same over int4 weights, dequantized in registers: row r holds codes
// q + 8 (q in -7..7), two per byte (weight 2j in byte j's low nibble, 2j + 1
// in its high one), and an fp32 scale per group of 32 weights along the row
// (w = s q). A lane reads one 32-bit word, 8 weights, per step (a warp 128
// bytes of codes: 256 weights), so 4 lanes share a group's scale; d_in must be a
// multiple of 32 (Int4Weights checks it).
__global__ void MW_LAUNCH_BOUNDS(kGemvWarps * 32)
    gemv_rows_int4_kernel(const std::uint32_t* __restrict__ codes, const float* __restrict__ scales,
                          const float* __restrict__ x, int batch, int d_in, RowOutputs o) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r = blockIdx.x * kGemvWarps + warp;
    if (r >= o.begin[o.parts]) return;
    int part = 0;
    while (r >= o.begin[part + 1]) ++part;
    const int width = o.begin[part + 1] - o.begin[part], col = r - o.begin[part];
    const std::uint32_t* row = codes + std::int64_t(r) * (d_in / 8);
    const float* row_scales = scales + std::int64_t(r) * (d_in / 32);
    for (int b0 = 0; b0 < batch; b0 += kGemvSequences) {
        float acc[kGemvSequences] = {};
        for (int i0 = lane * 8; i0 < d_in; i0 += 256) {
            const std::uint32_t word = row[i0 / 8];
            const float sc = row_scales[i0 / 32];
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const float w = sc * float(int((word >> (4 * k)) & 15u) - 8);
#pragma unroll
                for (int j = 0; j < kGemvSequences; ++j)
                    if (b0 + j < batch) acc[j] += w * x[std::int64_t(b0 + j) * d_in + i0 + k];
            }
        }
#pragma unroll
        for (int j = 0; j < kGemvSequences; ++j) {
            if (b0 + j >= batch) break;  // the same for the whole warp: no shuffle left waiting
            const float s = mw::warp::warp_sum(acc[j]);
            if (lane == 0) {
                float* y = o.out[part] + std::int64_t(b0 + j) * width + col;
                *y = o.accumulate ? *y + s : s;
            }
        }
    }
}

// x[s] = E[token[s]]: one block per sequence.
__global__ void embed_kernel(const float* __restrict__ E, const std::int32_t* __restrict__ token,
                             float* __restrict__ x, int d) {
    const std::int64_t from = std::int64_t(token[blockIdx.x]) * d, to = std::int64_t(blockIdx.x) * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) x[to + i] = E[from + i];
}

// The index of z[0 .. vocab)'s maximum, the lowest among equal maxima (as
// std::max_element), for every thread of a block of kAdvanceThreads; the
// scratch arrays are the caller's shared memory, free again on return.
__device__ __forceinline__ int block_argmax(const float* z, int vocab, float* best_v, int* best_i) {
    float v = -INFINITY;
    int at = vocab;
    for (int i = threadIdx.x; i < vocab; i += kAdvanceThreads)
        if (z[i] > v || at == vocab) v = z[i], at = i;
    best_v[threadIdx.x] = v, best_i[threadIdx.x] = at;
    __syncthreads();
    for (int half = kAdvanceThreads / 2; half > 0; half /= 2) {
        if (int(threadIdx.x) < half) {
            const float v2 = best_v[threadIdx.x + half];
            const int i2 = best_i[threadIdx.x + half];
            if (i2 < vocab && (best_i[threadIdx.x] == vocab || v2 > best_v[threadIdx.x] ||
                               (v2 == best_v[threadIdx.x] && i2 < best_i[threadIdx.x])))
                best_v[threadIdx.x] = v2, best_i[threadIdx.x] = i2;
        }
        __syncthreads();
    }
    const int best = best_i[0];
    __syncthreads();  // every thread has read it: the scratch may be reused
    return best;
}

// generate's step-to-step glue, one sequence: after the step at position
// p = pos[0], the next input is the prompt's token p + 1 while the prompt
// lasts, else the greedy pick — the logits' argmax, the lowest index among
// equal maxima, as std::max_element — which is also written to out[p + 1 -
// n_prompt]. The token goes to token[0]; when next_pos is given, p + 1 goes
// there and p + 2 to next_len (the cache length of the next step).
__global__ void MW_LAUNCH_BOUNDS(kAdvanceThreads)
    advance_kernel(const float* __restrict__ logits, int vocab, const std::int32_t* __restrict__ prompt, int n_prompt,
                   std::int32_t* out, std::int32_t* token, const std::int32_t* pos, std::int32_t* next_pos_out,
                   std::int32_t* next_len) {
    __shared__ float best_v[kAdvanceThreads];
    __shared__ int best_i[kAdvanceThreads];
    const int next_pos = pos[0] + 1;
    const int best = block_argmax(logits, vocab, best_v, best_i);
    if (threadIdx.x == 0) {
        int next;
        if (next_pos < n_prompt) {
            next = prompt[next_pos];
        } else {
            next = best;
            if (out) out[next_pos - n_prompt] = next;
        }
        token[0] = next;
        if (next_pos_out) next_pos_out[0] = next_pos, next_len[0] = next_pos + 1;
    }
}

// What a step reads that changes from step to step, device arrays of
// `batch`: each sequence's input token, its position, and its cache length
// after the step (position + 1).
struct StepInputs {
    const std::int32_t* tokens = nullptr;
    const std::int32_t* positions = nullptr;
    const std::int32_t* lengths = nullptr;
};

// A weight matrix on the device as rows [d_out][d_in]: fp32, or int4 codes
// and group scales (gemv_rows_int4_kernel's layout).
struct Weights {
    std::shared_ptr<float> f32;
    std::shared_ptr<std::uint32_t> codes;
    std::shared_ptr<float> scales;
    int d_out = 0, d_in = 0;
    double bytes() const {
        return f32 ? 4.0 * d_out * d_in : double(d_out) * d_in / 2 + 4.0 * double(d_out) * (d_in / 32);
    }
};

inline void gemv_rows(const Weights& W, const float* x, int batch, const RowOutputs& o, cudaStream_t stream) {
    const dim3 grid(unsigned((o.begin[o.parts] + kGemvWarps - 1) / kGemvWarps)), block(kGemvWarps * 32);
    if (W.f32)
        mw::launch(gemv_rows_kernel, grid, block, 0, stream, (const float*)W.f32.get(), x, batch, W.d_in, o);
    else
        mw::launch(gemv_rows_int4_kernel, grid, block, 0, stream, (const std::uint32_t*)W.codes.get(),
                   (const float*)W.scales.get(), x, batch, W.d_in, o);
}

inline RowOutputs one_output(float* y, int n_out, bool accumulate) {
    RowOutputs o;
    o.out[0] = y, o.begin[1] = n_out, o.parts = 1, o.accumulate = accumulate;
    return o;
}

template <class T> std::shared_ptr<T> upload(const std::vector<T>& host) {
    auto d = mw::cuda::device_array<T>(host.size());
    if (!host.empty())
        MW_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

// Rows [d_out][d_in] of W_a | W_b | ... (each [d_in, d_out_i], the model's layout).
inline std::vector<float> rows_of(int d_in, std::initializer_list<std::pair<const float*, int>> parts) {
    int n_out = 0;
    for (const auto& p : parts) n_out += p.second;
    std::vector<float> rows(std::size_t(n_out) * d_in);
    std::size_t r = 0;
    for (const auto& [W, cols] : parts)
        for (int j = 0; j < cols; ++j, ++r)
            for (int i = 0; i < d_in; ++i) rows[r * d_in + i] = W[std::size_t(i) * cols + j];
    return rows;
}

// The decoder's weight formats: fp32, or int4 with an fp32 scale per 32
// weights (symmetric: s = max|w| / 7 over the group, q = round(w / s)
// clamped to -7..7; s = 1 for an all-zero group).
enum class WeightFormat { f32, int4 };

inline Weights upload_weights(const std::vector<float>& rows, int d_out, int d_in, WeightFormat f) {
    Weights W;
    W.d_out = d_out, W.d_in = d_in;
    if (f == WeightFormat::f32) {
        W.f32 = upload(rows);
        return W;
    }
    if (d_in % 32)
        throw std::invalid_argument("int4 GPU weights need rows of a multiple of 32 weights, not " + std::to_string(d_in));
    std::vector<std::uint32_t> codes(std::size_t(d_out) * (d_in / 8), 0u);
    std::vector<float> scales(std::size_t(d_out) * (d_in / 32));
    for (int r = 0; r < d_out; ++r)
        for (int g = 0; g < d_in / 32; ++g) {
            const float* w = rows.data() + std::size_t(r) * d_in + std::size_t(g) * 32;
            float amax = 0;
            for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(w[i]));
            const float sc = amax > 0 ? amax / 7.0f : 1.0f;
            scales[std::size_t(r) * (d_in / 32) + g] = sc;
            for (int i = 0; i < 32; ++i) {
                const long q = std::lrint(std::clamp(w[i] / sc, -7.0f, 7.0f)) + 8;
                codes[std::size_t(r) * (d_in / 8) + std::size_t(g) * 4 + i / 8] |= std::uint32_t(q) << (4 * (i % 8));
            }
        }
    W.codes = upload(codes);
    W.scales = upload(scales);
    return W;
}

// The decoder: the model's weights (fp32, or int4 for a draft model) and a
// cache for up to `batch` rows per step, row r reading and writing the
// pages of row r of `table` ([batch][max_pages] page numbers, all below
// `pool_pages`; rows may share a sequence's pages: speculative decoding's
// verify feeds several positions of one sequence in one step), its values
// fp32 or int8 (`elem`). Holds its device memory; steps run on the stream
// they are enqueued on.
class Decoder {
public:
    Decoder(const Config& c, const float* params, int batch, int max_pages, int pool_pages,
            const std::vector<std::int32_t>& table, kv_cache::Elem elem = kv_cache::Elem::f32,
            WeightFormat weights = WeightFormat::f32)
        : c_(c), batch_(batch), max_pages_(max_pages), elem_(elem) {
        require_valid(c);
        if (c.head_dim() > kv_cache::kPagedMaxHd || c.head_dim() % 2)
            throw std::invalid_argument("the GPU decoder takes an even head_dim <= " +
                                        std::to_string(kv_cache::kPagedMaxHd) + ", not " + std::to_string(c.head_dim()));
        if (batch < 1 || max_pages < 1 || table.size() != std::size_t(batch) * max_pages)
            throw std::invalid_argument("GPU decoder: a block table of batch x max_pages page numbers is needed");
        for (std::int32_t page : table)
            if (page < 0 || page >= pool_pages)
                throw std::invalid_argument("GPU decoder: page " + std::to_string(page) + " outside the pool of " +
                                            std::to_string(pool_pages));
        const auto P = bind(c, params);
        const int d = c.d_model;
        const std::vector<float> embed(P.embed, P.embed + std::size_t(c.vocab) * d);
        embed_ = upload(embed);  // the gather's table, fp32 whatever the weights' format
        head_ = upload_weights(embed, c.vocab, d, weights);  // the tied head: the embedding's rows
        final_norm_ = upload(std::vector<float>(P.final_norm, P.final_norm + d));
        const int qkv = c.q_dim() + 2 * c.kv_dim();
        for (const auto& W : P.layer) {
            Layer L;
            L.attn_norm = upload(std::vector<float>(W.attn_norm, W.attn_norm + d));
            L.mlp_norm = upload(std::vector<float>(W.mlp_norm, W.mlp_norm + d));
            L.qkv = upload_weights(rows_of(d, {{W.wq, c.q_dim()}, {W.wk, c.kv_dim()}, {W.wv, c.kv_dim()}}), qkv, d, weights);
            L.wo = upload_weights(rows_of(c.q_dim(), {{W.wo, d}}), d, c.q_dim(), weights);
            L.w13 = upload_weights(rows_of(d, {{W.w1, c.d_ff}, {W.w3, c.d_ff}}), 2 * c.d_ff, d, weights);
            L.w2 = upload_weights(rows_of(c.d_ff, {{W.w2, d}}), d, c.d_ff, weights);
            layer_.push_back(std::move(L));
        }
        const std::size_t slots = std::size_t(pool_pages) * kv_cache::kPageSize;
        pool_floats_ = slots * c.kv_dim();
        pool_scales_ = slots * c.kv_heads;
        if (elem == kv_cache::Elem::f32) {
            K_ = mw::cuda::device_array<float>(pool_floats_ * c.layers);
            V_ = mw::cuda::device_array<float>(pool_floats_ * c.layers);
        } else {
            K8_ = mw::cuda::device_array<std::int8_t>(pool_floats_ * c.layers);
            V8_ = mw::cuda::device_array<std::int8_t>(pool_floats_ * c.layers);
            KS_ = mw::cuda::device_array<float>(pool_scales_ * c.layers);
            VS_ = mw::cuda::device_array<float>(pool_scales_ * c.layers);
        }
        table_ = upload(table);
        const std::size_t B = std::size_t(batch);
        tokens_ = mw::cuda::device_array<std::int32_t>(B);
        pos_ = mw::cuda::device_array<std::int32_t>(B);
        lens_ = mw::cuda::device_array<std::int32_t>(B);
        x_ = mw::cuda::device_array<float>(B * d);
        xn_ = mw::cuda::device_array<float>(B * d);
        rstd_ = mw::cuda::device_array<float>(B);
        q_ = mw::cuda::device_array<float>(B * c.q_dim());
        k_ = mw::cuda::device_array<float>(B * c.kv_dim());
        v_ = mw::cuda::device_array<float>(B * c.kv_dim());
        o_ = mw::cuda::device_array<float>(B * c.q_dim());
        a_ = mw::cuda::device_array<float>(B * c.d_ff);
        b_ = mw::cuda::device_array<float>(B * c.d_ff);
        h_ = mw::cuda::device_array<float>(B * c.d_ff);
        logits_ = mw::cuda::device_array<float>(B * c.vocab);
        inv_freq_ = upload(rope_inv_freq(c.head_dim(), c.rope_base));
        ws_ = mw::cuda::device_array<float>(kv_cache::paged_workspace_floats(batch, c.heads, c.head_dim(), max_pages));
    }

    const Config& config() const { return c_; }
    int batch() const { return batch_; }
    // Positions a sequence can hold.
    int max_len() const { return max_pages_ * kv_cache::kPageSize; }
    // The decoder's own step inputs (StepInputs), device arrays of `batch`:
    // what a captured step reads, copied in before a call or set by enqueue_advance.
    std::int32_t* tokens() const { return tokens_.get(); }
    std::int32_t* positions() const { return pos_.get(); }
    std::int32_t* lengths() const { return lens_.get(); }
    StepInputs own_inputs() const { return {tokens_.get(), pos_.get(), lens_.get()}; }
    // The last step's logits, device [batch][vocab] (unless the step wrote them elsewhere).
    const float* logits() const { return logits_.get(); }

    // One decode step of rows 0 .. rows - 1 (all `batch` by default),
    // enqueued on `stream`, reading its inputs from `in`: each row's key and
    // value rows written into the cache at its position, its logits into
    // `logits_out` (device [rows][vocab]; null: logits()). Positions must be
    // below max_len() (not checked on the device); rows sharing a
    // sequence's pages see each other's keys and values up to their own
    // position (every row is appended before any attends).
    void enqueue_step(cudaStream_t stream, const StepInputs& in, float* logits_out = nullptr, int rows = 0) const {
        if (rows > batch_) throw std::invalid_argument("GPU decoder: " + std::to_string(rows) + " rows, room for " +
                                                       std::to_string(batch_));
        const int d = c_.d_model, hd = c_.head_dim(), B = rows > 0 ? rows : batch_;
        const float eps = float(c_.norm_eps);
        mw::launch(embed_kernel, dim3(unsigned(B)), dim3(128), 0, stream, (const float*)embed_.get(), in.tokens, x_.get(),
                   d);
        // The new rows into layer l's cache, then attention over it.
        auto attend = [&](const auto& kv) {
            kv_cache::paged::kv_append(kv, in.positions, k_.get(), v_.get(), B, 1, stream);
            kv_cache::paged::paged_decode(kv, q_.get(), o_.get(), B, c_.heads, ws_.get(), stream);
        };
        for (int l = 0; l < c_.layers; ++l) {
            const Layer& L = layer_[std::size_t(l)];
            const std::size_t at = std::size_t(l) * pool_floats_, at_scale = std::size_t(l) * pool_scales_;
            kernels::rmsnorm_forward(x_.get(), L.attn_norm.get(), xn_.get(), rstd_.get(), B, d, eps, stream);
            RowOutputs qkv;
            qkv.out[0] = q_.get(), qkv.out[1] = k_.get(), qkv.out[2] = v_.get(), qkv.parts = 3;
            qkv.begin[1] = c_.q_dim(), qkv.begin[2] = c_.q_dim() + c_.kv_dim(), qkv.begin[3] = c_.q_dim() + 2 * c_.kv_dim();
            gemv_rows(L.qkv, xn_.get(), B, qkv, stream);
            kernels::rope_forward(q_.get(), q_.get(), in.positions, inv_freq_.get(), B, c_.heads, hd, stream);
            kernels::rope_forward(k_.get(), k_.get(), in.positions, inv_freq_.get(), B, c_.kv_heads, hd, stream);
            if (elem_ == kv_cache::Elem::f32)
                attend(kv_cache::PagedKv{K_.get() + at, V_.get() + at, table_.get(), in.lengths, max_pages_,
                                         c_.kv_heads, hd});
            else
                attend(kv_cache::PagedKv8{K8_.get() + at, V8_.get() + at, KS_.get() + at_scale, VS_.get() + at_scale,
                                          table_.get(), in.lengths, max_pages_, c_.kv_heads, hd});
            gemv_rows(L.wo, o_.get(), B, one_output(x_.get(), d, true), stream);
            kernels::rmsnorm_forward(x_.get(), L.mlp_norm.get(), xn_.get(), rstd_.get(), B, d, eps, stream);
            RowOutputs ab;
            ab.out[0] = a_.get(), ab.out[1] = b_.get(), ab.parts = 2, ab.begin[1] = c_.d_ff, ab.begin[2] = 2 * c_.d_ff;
            gemv_rows(L.w13, xn_.get(), B, ab, stream);
            kernels::swiglu_forward(a_.get(), b_.get(), h_.get(), std::int64_t(B) * c_.d_ff, stream);
            gemv_rows(L.w2, h_.get(), B, one_output(x_.get(), d, true), stream);
        }
        kernels::rmsnorm_forward(x_.get(), final_norm_.get(), xn_.get(), rstd_.get(), B, d, eps, stream);
        gemv_rows(head_, xn_.get(), B, one_output(logits_out ? logits_out : logits_.get(), c_.vocab, false), stream);
    }
    // Kernel launches in one enqueue_step.
    int launches_per_step() const { return 3 + 12 * c_.layers; }

    // generate's glue after a step of sequence 0 (batch 1) that read the
    // decoder's own inputs and wrote logits(): its next token, position and
    // length, on the device (advance_kernel above).
    void enqueue_advance(const std::int32_t* prompt, int n_prompt, std::int32_t* out, cudaStream_t stream) const {
        mw::launch(advance_kernel, dim3(1), dim3(kAdvanceThreads), 0, stream, (const float*)logits_.get(), c_.vocab,
                   prompt, n_prompt, out, tokens_.get(), (const std::int32_t*)pos_.get(), pos_.get(), lens_.get());
    }
    // The greedy pick from row `row` of logits() after a step whose row
    // was at position *pos: written to *token and (out non-null) to
    // out[*pos + 1 - n_prompt] (positions and lengths left alone).
    void enqueue_pick(const std::int32_t* pos, int n_prompt, std::int32_t* out, std::int32_t* token,
                      cudaStream_t stream, int row = 0) const {
        mw::launch(advance_kernel, dim3(1), dim3(kAdvanceThreads), 0, stream,
                   (const float*)logits_.get() + std::size_t(row) * c_.vocab, c_.vocab, (const std::int32_t*)nullptr,
                   n_prompt, out, token, pos, (std::int32_t*)nullptr, (std::int32_t*)nullptr);
    }

    // Bytes of the matrices a step reads (every layer's and the head).
    double weight_bytes() const {
        double b = head_.bytes();
        for (const auto& L : layer_) b += L.qkv.bytes() + L.wo.bytes() + L.w13.bytes() + L.w2.bytes();
        return b;
    }
    // Device bytes the decoder holds: the matrices, the embedding's and the
    // norms' fp32 copies, the cache pools, the table and the scratch.
    double device_bytes() const {
        const double vectors = double(c_.vocab) * c_.d_model + c_.d_model + 2.0 * c_.layers * c_.d_model;
        return weight_bytes() + 4.0 * vectors + cache_bytes() + cache_table_bytes() + scratch_bytes();
    }
    // Bytes of the cache's pools (every layer, K and V; int8: codes and scales).
    double cache_bytes() const {
        return elem_ == kv_cache::Elem::f32 ? 8.0 * double(pool_floats_) * c_.layers
                                            : 2.0 * double(c_.layers) * (double(pool_floats_) + 4.0 * double(pool_scales_));
    }

private:
    double cache_table_bytes() const { return 4.0 * double(batch_) * max_pages_; }
    double scratch_bytes() const {
        const double B = batch_;
        return 4.0 * (3 * B + B * (2.0 * c_.d_model + 1 + 2.0 * c_.q_dim() + 2.0 * c_.kv_dim() + 3.0 * c_.d_ff + c_.vocab) +
                      double(c_.head_dim() / 2) +
                      double(kv_cache::paged_workspace_floats(batch_, c_.heads, c_.head_dim(), max_pages_)));
    }

    struct Layer {
        std::shared_ptr<float> attn_norm, mlp_norm;
        Weights qkv, wo, w13, w2;
    };
    Config c_;
    int batch_, max_pages_;
    kv_cache::Elem elem_;
    std::size_t pool_floats_ = 0;  // values of one layer's K (or V) pool
    std::size_t pool_scales_ = 0;  // int8: scales of one layer's K (or V) pool
    std::shared_ptr<float> embed_, final_norm_, K_, V_, KS_, VS_, x_, xn_, rstd_, q_, k_, v_, o_, a_, b_, h_, logits_,
        inv_freq_, ws_;
    std::shared_ptr<std::int8_t> K8_, V8_;
    std::vector<Layer> layer_;
    Weights head_;
    std::shared_ptr<std::int32_t> table_, tokens_, pos_, lens_;
};

}  // namespace
}  // namespace mw::model::gpu_decode
