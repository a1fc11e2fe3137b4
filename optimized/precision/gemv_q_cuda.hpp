// The machinery shared by the CUDA GEMV rungs 1-4 (optimized/precision/
// gemv_q_{fp32,half,int8,int4}.cu): how rows are dealt to warps, how x is
// staged in shared memory, and the one loop that walks a row in 16-byte
// loads. As on the CPU (gemv_q_cpu.hpp), what differs between rungs is only
// the *decoder*: how one 16-byte load of stored weights becomes fp32 values
// in registers, four at a time, and what scale / zero-point it carries. That
// decode is the lesson; each rung file defines its own.
//
// Work split (kThreads = 512 per block, 16 warps):
//   - a warp owns kRowsPerWarp = 2 output rows, a block 32 rows; the two rows
//     share every x value a lane reads from shared memory;
//   - lane l of a warp reads 16 bytes of each of its rows at a time, lanes
//     side by side: one warp-wide load is 512 contiguous bytes of a row, fully
//     coalesced, for every format (4 fp32, 8 bf16/fp16, 16 int8 or 32 int4
//     weights per lane per load);
//   - each lane keeps fp32 partial sums, and one xor-shuffle tree per
//     (row, batch item) at the end adds the 32 lanes' sums.
// x: staged per block in shared memory (32 KiB: up to 8192 columns for one
// batch item, 1024 for eight), tile by tile, zero past n_in, so the 32 rows
// of a block read x from shared memory instead of each warp from L1/L2.
// Every block stages all of x, b * n_in * 4 bytes from L2 per 32 rows: at
// b = 1, next to those rows' weights, 1/32 more traffic for fp32 W, 1/16 for
// 16-bit, 1/8 for int8, ~1/4 for int4 — from L2, not DRAM, but the reason a
// block owns 32 rows and not 2. Each lane then needs 4 consecutive x per 4
// weights it decodes (one float4 from shared memory); lanes are 16 bytes of
// W = 4..32 weights apart, so the 8 lanes of a quarter-warp would hit the
// same banks (2-way conflicts for 16-bit weights, 4-way for int8, 8-way for
// int4). The float4 unit u of x is therefore stored at u ^ ((u >> 3) & 7),
// an XOR swizzle that sends those 8 lanes to 8 different bank groups for
// every format.
// Batch: up to kMaxBatch = 8 items share one pass over W (their partial sums
// live in registers); more items take ceil(b / 8) passes, each streaming W
// again: a GEMV kernel is for decode (b ~ 1..8); the cuBLAS rungs
// (gemv_q_cublas.cu) are the answer for batched shapes.
// Weights are quantized on the host with kernels/precision/quant.hpp's
// quantize() — the same bits as the CPU rungs — and uploaded untouched, rows
// padded to 32 weights (int4: to the group). Padding weights are finite
// (zero, or the int4 code 8) and meet the zero-padded x tile, so they add
// nothing. fp32 rows are padded here (to keep every 16-byte load aligned);
// the op's W is never modified.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>

#include "harness/cuda/device_problem.hpp"
#include "harness/cuda/launch.hpp"
#include "kernels/cuda/warp.hpp"
#include "kernels/precision/dequant_bits.hpp"
#include "kernels/precision/quant.hpp"
#include "reference/precision/gemv_q.hpp"

// Unnamed namespace: nvcc and the emulator each compile these, and both
// copies end up in one binary (see harness/cuda/device_problem.hpp).
namespace mw::precision::cuda {
namespace {

constexpr int kThreads = 512, kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 2, kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int kMaxBatch = 8;
constexpr int kTileFloats = 8192;  // x staged per block: 32 KiB of shared memory

// A quantized W on the device, as quant.hpp lays it out.
struct QDev {
    const unsigned char* payload = nullptr;  // row r starts at payload + r * row_bytes
    std::int64_t row_bytes = 0;
    const float* scales_f32 = nullptr;           // int8_channel: one per row
    const std::uint16_t* scales_f16 = nullptr;   // int4: fp16 bits, [row][group]
    const std::uint16_t* zeros_f16 = nullptr;    // int4 asym: fp16 bits, [row][group]
    int ld = 0;                                  // padded row length, weights (multiple of 32)
    int groups_per_row = 0, group = 0;           // int4
};

__device__ __forceinline__ const unsigned char* row_ptr(const QDev& q, int row) {
    return q.payload + std::size_t(row) * std::size_t(q.row_bytes);
}

using mw::warp::warp_sum;

// Where float4 unit u of a staged x tile lives (see the header).
__device__ __forceinline__ int swizzle(int u) { return u ^ ((u >> 3) & 7); }

// The row loop, over decoder D:
//   static constexpr int kWeights;    // weights per 16-byte load: 4, 8, 16 or 32
//   static constexpr bool kGrouped;   // a scale per load (int4): D::scale
//   static D load(q, row, col);       // the 16 bytes holding weights col.. of row
//   void slot(k, float w[4]) const;   // weights col+4k .. col+4k+3 as fp32
//   static float row_scale(q, row);   // 1 except int8 (applied to the finished sum)
// NB (1, 2, 4, 8): batch items this block computes (x tiles of kTileFloats / NB
// columns each); blockIdx.y picks which.
template <class D, int NB>
__global__ void MW_LAUNCH_BOUNDS(kThreads)
    gemv_rows_kernel(QDev q, const float* __restrict__ x, float* __restrict__ y, int n_out, int n_in, int b) {
    constexpr int KT = kTileFloats / NB;  // columns per x tile
    constexpr int S = D::kWeights / 4;    // float4s of x per 16-byte load of W
    static_assert(KT % (32 * D::kWeights) == 0, "a tile holds whole warp-wide loads");
    MW_DYNAMIC_SHARED(float, xs);  // [NB][KT], swizzled
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int b0 = blockIdx.y * NB;
    int row[kRowsPerWarp], ld_row[kRowsPerWarp];  // ld_row: clamped, so the last block loads in bounds
    for (int r = 0; r < kRowsPerWarp; ++r) {
        row[r] = blockIdx.x * kRowsPerBlock + warp * kRowsPerWarp + r;
        ld_row[r] = min(row[r], n_out - 1);
    }
    // Ungrouped formats accumulate straight into acc; grouped ones (int4) sum
    // each 16-byte load into part, then acc += scale * part: one FMA per 32 weights.
    float acc[kRowsPerWarp][NB] = {}, part[kRowsPerWarp][NB] = {};

    for (int t0 = 0; t0 < q.ld; t0 += KT) {
        const int cols = min(KT, q.ld - t0);  // a multiple of 32
        __syncthreads();                      // every warp is done with the previous tile
#pragma unroll
        for (int bb = 0; bb < NB; ++bb)
            for (int c = threadIdx.x; c < cols; c += kThreads) {
                const int col = t0 + c;
                const float v = (b0 + bb < b && col < n_in) ? x[std::size_t(b0 + bb) * n_in + col] : 0.0f;
                xs[bb * KT + 4 * swizzle(c / 4) + c % 4] = v;
            }
        __syncthreads();
        for (int c = lane * D::kWeights; c < cols; c += 32 * D::kWeights) {
            D d[kRowsPerWarp];
#pragma unroll
            for (int r = 0; r < kRowsPerWarp; ++r) d[r] = D::load(q, ld_row[r], t0 + c);
#pragma unroll
            for (int k = 0; k < S; ++k) {
                float4 xv[NB];
#pragma unroll
                for (int bb = 0; bb < NB; ++bb)
                    xv[bb] = *reinterpret_cast<const float4*>(xs + bb * KT + 4 * swizzle(c / 4 + k));
#pragma unroll
                for (int r = 0; r < kRowsPerWarp; ++r) {
                    float w[4];
                    d[r].slot(k, w);
#pragma unroll
                    for (int bb = 0; bb < NB; ++bb) {
                        float& s = D::kGrouped ? part[r][bb] : acc[r][bb];
                        s = fmaf(w[0], xv[bb].x, s);
                        s = fmaf(w[1], xv[bb].y, s);
                        s = fmaf(w[2], xv[bb].z, s);
                        s = fmaf(w[3], xv[bb].w, s);
                    }
                }
            }
            if constexpr (D::kGrouped) {
#pragma unroll
                for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
                    for (int bb = 0; bb < NB; ++bb) {
                        acc[r][bb] = fmaf(d[r].scale, part[r][bb], acc[r][bb]);
                        part[r][bb] = 0.0f;
                    }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
        for (int bb = 0; bb < NB; ++bb) {
            const float sum = warp_sum(acc[r][bb]);
            if (lane == 0 && row[r] < n_out && b0 + bb < b)
                y[std::size_t(b0 + bb) * n_out + row[r]] = D::row_scale(q, row[r]) * sum;
        }
}

// --- host side ---------------------------------------------------------------------

// Batch items per pass over W: the smallest of 1, 2, 4, 8 that covers b (8 past it).
inline int batch_block(std::int64_t b) { return b >= 5 ? 8 : b >= 3 ? 4 : int(b); }

// Bytes the rungs 1-4 stream: gemv_bytes (W once, x, y) plus W again for
// every extra pass of 8 batch items (W is far larger than L2 at the default
// shape, and a pass's blocks run after the previous pass's).
inline double gemv_cuda_bytes(const QuantSpec& q, const Shape& s) {
    const double passes = double((s["b"] + kMaxBatch - 1) / kMaxBatch);
    return gemv_bytes(q, s) + (passes - 1) * double(s["n_out"]) * double(s["n_in"]) * effective_bits(q, s["n_in"]) / 8;
}

// W in `spec`'s storage: quantize() for every lossy format (the CPU rungs'
// bits); fp32 copied into rows padded to 32 floats so every 16-byte load is aligned.
inline QMatrix pack_weights(const QuantSpec& spec, const float* W, std::int64_t n_out, std::int64_t n_in) {
    if (spec.format != Format::f32) return quantize(spec, W, n_out, n_in);
    QMatrix m;
    m.spec = spec, m.n_out = n_out, m.n_in = n_in, m.ld = padded_cols({Format::bf16}, n_in);
    m.payload = Buffer::make("W_f32_padded", DType::f32, std::size_t(n_out * m.ld));
    std::memset(m.payload.data.get(), 0, m.payload.size_bytes());
    for (std::int64_t i = 0; i < n_out; ++i)
        std::memcpy(m.payload.as<float>() + i * m.ld, W + i * n_in, std::size_t(n_in) * sizeof(float));
    return m;
}

// A device copy of a host buffer, freed with the last Instance holding it.
inline std::shared_ptr<unsigned char> upload(const Buffer& host) {
    if (host.size_bytes() == 0) return {};
    void* p = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&p, host.size_bytes()));
    MW_CUDA_CHECK(cudaMemcpy(p, host.data.get(), host.size_bytes(), cudaMemcpyHostToDevice));
    return std::shared_ptr<unsigned char>(static_cast<unsigned char*>(p), [](unsigned char* q) { (void)cudaFree(q); });
}

template <class D, int NB>
void launch_rows(const QDev& q, const float* x, float* y, int n_out, int n_in, int b, cudaStream_t stream) {
    const dim3 grid(unsigned((n_out + kRowsPerBlock - 1) / kRowsPerBlock), unsigned((b + NB - 1) / NB));
    mw::launch(gemv_rows_kernel<D, NB>, grid, dim3(kThreads), std::size_t(kTileFloats) * sizeof(float), stream, q, x,
               y, n_out, n_in, b);
}

// The variant's prepare(): quantize on the host (untimed), upload, and time
// one launch of the row kernel.
template <class D>
std::function<Instance(Problem&)> gemv_prepare(QuantSpec spec) {
    return [spec](Problem& p) {
        const std::int64_t n_out = p.shape["n_out"], n_in = p.shape["n_in"], b = p.shape["b"];
        const QMatrix m = pack_weights(spec, p.in("W").as<float>(), n_out, n_in);
        std::shared_ptr<unsigned char> payload = upload(m.payload), scales = upload(m.scales), zeros = upload(m.zeros);
        QDev q;
        q.payload = payload.get();
        q.row_bytes = std::int64_t(m.payload.size_bytes()) / n_out;
        q.scales_f32 = spec.format == Format::int8_channel ? reinterpret_cast<const float*>(scales.get()) : nullptr;
        q.scales_f16 = spec.format == Format::int4 ? reinterpret_cast<const std::uint16_t*>(scales.get()) : nullptr;
        q.zeros_f16 = reinterpret_cast<const std::uint16_t*>(zeros.get());
        q.ld = int(m.ld);
        q.groups_per_row = int(m.groups_per_row);
        q.group = spec.group;
        const int nb = batch_block(b);
        return mw::cuda::device_instance(
            p,
            // payload, scales, zeros: captured to keep the device copies alive.
            [q, nb, n_out, n_in, b, payload, scales, zeros](mw::cuda::DeviceProblem& d) {
                const float* x = d.in<const float>("x");
                float* y = d.out<float>("y");
                const int no = int(n_out), ni = int(n_in), bi = int(b);
                if (nb == 1) launch_rows<D, 1>(q, x, y, no, ni, bi, d.stream);
                else if (nb == 2) launch_rows<D, 2>(q, x, y, no, ni, bi, d.stream);
                else if (nb == 4) launch_rows<D, 4>(q, x, y, no, ni, bi, d.stream);
                else launch_rows<D, 8>(q, x, y, no, ni, bi, d.stream);
            },
            std::size_t(m.bytes()));
    };
}

}  // namespace
}  // namespace mw::precision::cuda
