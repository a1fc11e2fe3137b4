// One transformer block of the model stack in fp32 on the GPU: the CPU
// block's forward, backward and recompute_cheap (kernels/model/block_cpu.hpp,
// where the math is spelled out), with every matrix product a cuBLAS SGEMM
// and the rest the model's CUDA kernels (kernels/model/elementwise.cuh:
// RMSNorm, RoPE, SwiGLU, the causal softmax of score rows and its backward,
// the residual adds). The checkpointing lever's CUDA rungs
// (reference/checkpointing/train_step.cu, optimized/checkpointing/*.cu) run
// stacks of it.
//
// Matrix products, row-major, weights [d_in, d_out] as on the CPU:
//   projections     y = x W, dx (+)= dy W^T, dW += x^T dy     cublasSgemm
//   attention       per query head h (kv head h / (heads / kv_heads): GQA),
//                   one cublasSgemmStridedBatched over the B sequences for
//                   each of S = Q K^T, O = P V, dP = dO V^T, dV (+)= P^T dO,
//                   dQ = dS K, dK (+)= dS^T Q. The query heads of one group
//                   add into their kv head's dK, dV in head order (beta = 0
//                   for the group's first), on one stream: a fixed order.
// The products cover the whole [T, T] square: the causal mask is applied by
// the softmax (zeros above the diagonal), so about half of the attention's
// score FLOPs multiply zeros — what a dense vendor GEMM costs (the CPU block
// skips those tiles). (A sequence's head is not one stride away from the
// next sequence's, nor a GQA group's kv head from the next query head's, so
// (sequence, head) cannot be one strided batch: heads are a loop.)
//
// Determinism: one handle, one stream, a fixed workspace set with
// cublasSetWorkspace (cublasSetStream resets it, so bind() sets both),
// atomics not allowed, default math (fp32, no TF32). cuBLAS then returns the
// same bits for the same call on the same GPU and library version; every
// buffer is its own cudaMalloc (256-byte aligned), so a rung that calls the
// same products on other buffers gets the same algorithms. The block's own
// kernels reduce in fixed orders (no atomics).
//
// nvcc only (cuBLAS): include inside `#if !MEMWALL_EMU` — except in
// tests/checkpointing/test_block_cuda_emu.cpp, which runs it under cuda-emu
// on a loop-based stand-in for cuBLAS. Everything sits in an unnamed
// namespace, as in kernels/model/elementwise.cuh.
#pragma once

#include "harness/cuda/launch.hpp"

#include <cublas_v2.h>  // under cuda-emu: tests/checkpointing/fake_cublas/, a test's stand-in

#if MEMWALL_EMU && !defined(MW_FAKE_CUBLAS)
#error "kernels/model/block_cuda.cuh uses cuBLAS, which cuda-emu lacks: include it inside #if !MEMWALL_EMU"
#endif

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/cuda/cublas.hpp"
#include "kernels/model/block_cpu.hpp"  // BlockActs, BlockSizes: pointers and counts, host or device alike
#include "kernels/model/block_cuda.hpp"  // kCublasWorkspaceBytes, block_scratch_bytes (the allocations below)
#include "kernels/model/elementwise.cuh"

namespace mw::model::gpu {
namespace {

using LayerW = LayerPtrs<const float*>;
using LayerG = LayerPtrs<float*>;
using cpu::BlockActs;
using cpu::BlockSizes;

// Every device allocation of one instance, freed with it; `bytes` is their
// sum, the instance's declared workspace (Instance::workspace_bytes).
class DeviceMemory {
public:
    DeviceMemory() = default;
    DeviceMemory(const DeviceMemory&) = delete;
    DeviceMemory& operator=(const DeviceMemory&) = delete;
    ~DeviceMemory() {
        for (void* p : blocks_) (void)cudaFree(p);
    }
    template <class T> T* take(std::size_t n) {
        void* p = nullptr;
        MW_CUDA_CHECK(cudaMalloc(&p, (n ? n : 1) * sizeof(T)));
        blocks_.push_back(p);
        bytes_ += n * sizeof(T);
        return static_cast<T*>(p);
    }
    // One block's activations, each its own allocation: all of them, or
    // (as BlockStore on the CPU) only the GEMM outputs (q, k, v, o, x_mid,
    // a, b) or only the cheap rest (xn1, r1, p, xn2, r2, h); the fields not
    // taken stay null, for model::cpu::combine.
    BlockActs acts(const BlockSizes& s, bool gemm_outputs = true, bool cheap = true) {
        BlockActs A;
        auto part = [&](float*& p, std::size_t n, bool want) {
            if (want) p = take<float>(n);
        };
        part(A.xn1, s.xn1, cheap), part(A.r1, s.r1, cheap), part(A.q, s.q, gemm_outputs);
        part(A.k, s.k, gemm_outputs), part(A.v, s.v, gemm_outputs), part(A.p, s.p, cheap);
        part(A.o, s.o, gemm_outputs), part(A.x_mid, s.x_mid, gemm_outputs), part(A.xn2, s.xn2, cheap);
        part(A.r2, s.r2, cheap), part(A.a, s.a, gemm_outputs), part(A.b, s.b, gemm_outputs);
        part(A.h, s.h, cheap);
        return A;
    }
    std::size_t bytes() const { return bytes_; }

private:
    std::vector<void*> blocks_;
    std::size_t bytes_ = 0;
};

class Block {
public:
    // Device buffers (scratch, positions, RoPE table, cuBLAS workspace) come from `mem`.
    Block(const Config& c, int batch, int seq, DeviceMemory& mem)
        : c_(c), B_(batch), T_(seq), N_(std::int64_t(batch) * seq), handle_(cuda::make_cublas_handle()) {
        require_valid(c);
        if (batch <= 0 || seq <= 0 || seq > c.max_seq)
            throw std::invalid_argument("gpu::Block: batch " + std::to_string(batch) + ", seq " + std::to_string(seq) +
                                        ": need batch >= 1 and 1 <= seq <= max_seq = " + std::to_string(c.max_seq));
        if (N_ * std::max(c.d_ff, std::max(c.d_model, c.q_dim())) > INT32_MAX ||
            std::int64_t(batch) * c.heads * seq * seq > INT32_MAX)
            throw std::invalid_argument("gpu::Block: tensors beyond 2^31 elements (kernels index with int)");
        const std::size_t N = std::size_t(N_), d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), f = c.d_ff;
        dxn_ = mem.take<float>(N * d), dres_ = mem.take<float>(N * d), dO_ = mem.take<float>(N * qd);
        dq_ = mem.take<float>(N * qd), dk_ = mem.take<float>(N * kvd), dv_ = mem.take<float>(N * kvd);
        dh_ = mem.take<float>(N * f), da_ = mem.take<float>(N * f), db_ = mem.take<float>(N * f);
        dS_ = mem.take<float>(std::size_t(batch) * c.heads * seq * seq);
        std::vector<std::int32_t> pos(N);
        for (std::size_t r = 0; r < N; ++r) pos[r] = std::int32_t(r % std::size_t(seq));
        const std::vector<float> inv_freq = rope_inv_freq(c.head_dim(), c.rope_base);
        pos_ = mem.take<std::int32_t>(N), inv_freq_ = mem.take<float>(inv_freq.size());
        MW_CUDA_CHECK(cudaMemcpy(pos_, pos.data(), N * sizeof(std::int32_t), cudaMemcpyHostToDevice));
        MW_CUDA_CHECK(cudaMemcpy(inv_freq_, inv_freq.data(), inv_freq.size() * sizeof(float), cudaMemcpyHostToDevice));
        workspace_ = mem.take<char>(kCublasWorkspaceBytes);
        cuda::cublas_check(cublasSetMathMode(handle_.get(), CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
        cuda::cublas_check(cublasSetAtomicsMode(handle_.get(), CUBLAS_ATOMICS_NOT_ALLOWED), "cublasSetAtomicsMode");
    }

    // Every later call enqueues on `stream`.
    void bind(cudaStream_t stream) {
        stream_ = stream;
        cuda::cublas_check(cublasSetStream(handle_.get(), stream), "cublasSetStream");
        cuda::cublas_check(cublasSetWorkspace(handle_.get(), workspace_, kCublasWorkspaceBytes), "cublasSetWorkspace");
    }
    cudaStream_t stream() const { return stream_; }
    std::int64_t rows() const { return N_; }

    // x [N, d] -> x_out [N, d], filling every activation in A.
    void forward(const LayerW& W, const float* x, const BlockActs& A, float* x_out) {
        const int d = c_.d_model, qd = c_.q_dim(), kvd = c_.kv_dim(), f = c_.d_ff;
        attn_in(W, x, A);
        proj(A.xn1, W.wq, A.q, d, qd);
        proj(A.xn1, W.wk, A.k, d, kvd);
        proj(A.xn1, W.wv, A.v, d, kvd);
        kernels::rope_forward(A.q, A.q, pos_, inv_freq_, rows32(), c_.heads, c_.head_dim(), stream_);
        kernels::rope_forward(A.k, A.k, pos_, inv_freq_, rows32(), c_.kv_heads, c_.head_dim(), stream_);
        attention_forward(A, true);
        proj(A.o, W.wo, A.x_mid, qd, d);
        kernels::add(x, A.x_mid, A.x_mid, N_ * d, stream_);
        mlp_in(W, A);
        proj(A.xn2, W.w1, A.a, d, f);
        proj(A.xn2, W.w3, A.b, d, f);
        kernels::swiglu_forward(A.a, A.b, A.h, N_ * f, stream_);
        proj(A.h, W.w2, x_out, f, d);
        kernels::add(A.x_mid, x_out, x_out, N_ * d, stream_);
    }

    // Refills A's cheap activations (xn1, r1, p, xn2, r2, h) from its GEMM
    // outputs and x: the same calls as forward(), so the same bits.
    void recompute_cheap(const LayerW& W, const float* x, const BlockActs& A) {
        attn_in(W, x, A);
        attention_forward(A, false);
        mlp_in(W, A);
        kernels::swiglu_forward(A.a, A.b, A.h, N_ * c_.d_ff, stream_);
    }

    // dx holds d loss / d x_out on entry and d loss / d x on return; the
    // weight gradients are added into G.
    void backward(const LayerW& W, const LayerG& G, const float* x, const BlockActs& A, float* dx) {
        const int d = c_.d_model, qd = c_.q_dim(), kvd = c_.kv_dim(), f = c_.d_ff;
        const float* dxc = dx;
        // MLP: x_out = x_mid + h W2 (dx becomes d x_mid: the residual plus the norm's gradient).
        proj_back(A.h, W.w2, dxc, dh_, false, G.w2, f, d);
        kernels::swiglu_backward(A.a, A.b, dh_, da_, db_, N_ * f, stream_);
        proj_back(A.xn2, W.w1, da_, dxn_, false, G.w1, d, f);
        proj_back(A.xn2, W.w3, db_, dxn_, true, G.w3, d, f);
        kernels::rmsnorm_backward(A.x_mid, W.mlp_norm, A.r2, dxn_, dres_, G.mlp_norm, rows32(), d, stream_);
        kernels::add(dxc, dres_, dx, N_ * d, stream_);
        // Attention: x_mid = x + o Wo (dx becomes d x).
        proj_back(A.o, W.wo, dxc, dO_, false, G.wo, qd, d);
        attention_backward(A);
        kernels::rope_backward(dq_, dq_, pos_, inv_freq_, rows32(), c_.heads, c_.head_dim(), stream_);
        kernels::rope_backward(dk_, dk_, pos_, inv_freq_, rows32(), c_.kv_heads, c_.head_dim(), stream_);
        proj_back(A.xn1, W.wq, dq_, dxn_, false, G.wq, d, qd);
        proj_back(A.xn1, W.wk, dk_, dxn_, true, G.wk, d, kvd);
        proj_back(A.xn1, W.wv, dv_, dxn_, true, G.wv, d, kvd);
        kernels::rmsnorm_backward(x, W.attn_norm, A.r1, dxn_, dres_, G.attn_norm, rows32(), d, stream_);
        kernels::add(dxc, dres_, dx, N_ * d, stream_);
    }

private:
    int rows32() const { return int(N_); }

    // C[M, N] = op(A)[M, K] op(B)[K, N] (+ beta C), all row-major; `ta`: A is
    // stored [K, M] (op = transpose), likewise `tb`. cuBLAS is column-major
    // and a row-major matrix is its column-major transpose, so this is
    // C^T = op(B)^T op(A)^T: B first, the flags carried over. `batch` > 1:
    // strided batches (strides in elements).
    void gemm(bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb, float beta,
              float* C, int ldc, int batch = 1, long long sa = 0, long long sb = 0, long long sc = 0) {
        const float one = 1.0f;
        const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        if (batch == 1)
            cuda::cublas_check(cublasSgemm(handle_.get(), opb, opa, N, M, K, &one, B, ldb, A, lda, &beta, C, ldc),
                               "cublasSgemm");
        else
            cuda::cublas_check(cublasSgemmStridedBatched(handle_.get(), opb, opa, N, M, K, &one, B, ldb, sb, A, lda, sa,
                                                         &beta, C, ldc, sc, batch),
                               "cublasSgemmStridedBatched");
    }
    // y[N, n] = x[N, m] W[m, n]
    void proj(const float* x, const float* W, float* y, int m, int n) {
        gemm(false, false, rows32(), n, m, x, m, W, n, 0.0f, y, n);
    }
    // dx[N, m] (+)= dy W^T;  dW[m, n] += x^T dy
    void proj_back(const float* x, const float* W, const float* dy, float* dx, bool dx_accumulate, float* dW, int m,
                   int n) {
        gemm(false, true, rows32(), m, n, dy, n, W, n, dx_accumulate ? 1.0f : 0.0f, dx, m);
        gemm(true, false, m, n, rows32(), x, m, dy, n, 1.0f, dW, n);
    }

    void attn_in(const LayerW& W, const float* x, const BlockActs& A) {
        kernels::rmsnorm_forward(x, W.attn_norm, A.xn1, A.r1, rows32(), c_.d_model, float(c_.norm_eps), stream_);
    }
    void mlp_in(const LayerW& W, const BlockActs& A) {
        kernels::rmsnorm_forward(A.x_mid, W.mlp_norm, A.xn2, A.r2, rows32(), c_.d_model, float(c_.norm_eps), stream_);
    }

    // Per query head h, batched over the sequences: P_h = Q_h K_kh^T, then
    // the causal softmax of every row at once, then O_h = P_h V_kh.
    void attention_forward(const BlockActs& A, bool with_output) {
        const int T = T_, hd = c_.head_dim(), H = c_.heads, qd = c_.q_dim(), kvd = c_.kv_dim(), group = H / c_.kv_heads;
        const long long sq = (long long)T * qd, skv = (long long)T * kvd, sp = (long long)H * T * T;
        for (int h = 0; h < H; ++h) {
            const int kh = h / group;
            gemm(false, true, T, T, hd, A.q + h * hd, qd, A.k + kh * hd, kvd, 0.0f, A.p + std::size_t(h) * T * T, T, B_,
                 sq, skv, sp);
        }
        kernels::softmax_causal_forward(A.p, B_ * H * T, T, scale(), stream_);
        if (!with_output) return;
        for (int h = 0; h < H; ++h) {
            const int kh = h / group;
            gemm(false, false, T, hd, T, A.p + std::size_t(h) * T * T, T, A.v + kh * hd, kvd, 0.0f, A.o + h * hd, qd,
                 B_, sp, skv, sq);
        }
    }

    // dP = dO V^T; dS = P (dP - rowsum(dP P)) scale; dV (+)= P^T dO;
    // dQ = dS K; dK (+)= dS^T Q — dK, dV summed over the group's heads in order.
    void attention_backward(const BlockActs& A) {
        const int T = T_, hd = c_.head_dim(), H = c_.heads, qd = c_.q_dim(), kvd = c_.kv_dim(), group = H / c_.kv_heads;
        const long long sq = (long long)T * qd, skv = (long long)T * kvd, sp = (long long)H * T * T;
        for (int h = 0; h < H; ++h) {
            const int kh = h / group;
            gemm(false, true, T, T, hd, dO_ + h * hd, qd, A.v + kh * hd, kvd, 0.0f, dS_ + std::size_t(h) * T * T, T, B_,
                 sq, skv, sp);
        }
        kernels::softmax_causal_backward(A.p, dS_, B_ * H * T, T, scale(), stream_);
        for (int h = 0; h < H; ++h) {
            const int kh = h / group;
            const float beta = h % group == 0 ? 0.0f : 1.0f;
            const float* P = A.p + std::size_t(h) * T * T;
            const float* dS = dS_ + std::size_t(h) * T * T;
            gemm(true, false, T, hd, T, P, T, dO_ + h * hd, qd, beta, dv_ + kh * hd, kvd, B_, sp, sq, skv);
            gemm(false, false, T, hd, T, dS, T, A.k + kh * hd, kvd, 0.0f, dq_ + h * hd, qd, B_, sp, skv, sq);
            gemm(true, false, T, hd, T, dS, T, A.q + h * hd, qd, beta, dk_ + kh * hd, kvd, B_, sp, sq, skv);
        }
    }

    float scale() const { return 1.0f / std::sqrt(float(c_.head_dim())); }

    Config c_;
    int B_, T_;
    std::int64_t N_;
    std::shared_ptr<cublasContext> handle_;
    cudaStream_t stream_{};
    float *dxn_, *dres_, *dO_, *dq_, *dk_, *dv_, *dh_, *da_, *db_, *dS_, *inv_freq_;
    std::int32_t* pos_;
    char* workspace_;
};

// The backward pass's start, every CUDA rung of train_step alike (the CPU's
// checkpointing::begin_backward): loss = sum(y * dy) by the dot kernel's
// fixed-order double sum, dparams zeroed, dx = dy; all on `stream`. n: the
// floats of y, dy and dx; n_params: of dparams.
inline void begin_backward(const float* y, const float* dy, std::size_t n, float* loss, float* dparams,
                           std::size_t n_params, float* dx, cudaStream_t stream) {
    kernels::dot(y, dy, loss, std::int64_t(n), stream);
    MW_CUDA_CHECK(cudaMemsetAsync(dparams, 0, n_params * sizeof(float), stream));
    MW_CUDA_CHECK(cudaMemcpyAsync(dx, dy, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace
}  // namespace mw::model::gpu
