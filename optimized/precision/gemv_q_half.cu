// GEMV on the GPU, precision lever, rung 2: bf16 and fp16 weights, fp32
// accumulation. (The CUDA ladder is listed in reference/precision/gemv_q.cu.)
//
// Change from rung 1 (fp32): each weight is stored in 16 bits, the bits
// quantize() gives the CPU rungs (round to nearest even), and widened to fp32
// in registers right before the FMA; x, the partial sums and y stay fp32.
// A lane's 16-byte load now carries 8 weights instead of 4.
//   bf16: the top half of an fp32 — widening is a shift or a mask;
//   fp16: exponent and mantissa moved into fp32's place and multiplied by
//         2^112 (kernels/precision/dequant_bits.hpp): exact, subnormals
//         included, no conversion instruction.
// Bytes: 2 * n_out * n_in of W (+ x, y): 128 MiB at 8192^2, half of rung 1.
// Expected: still bandwidth-bound (the widening costs 1-4 integer/fp32 ops per
// weight, far below what an SM issues while waiting on HBM), so up to 2x
// faster than rung 1.
// Numerics: per-weight error <= 2^-8 |w| (bf16) or 2^-11 |w| (fp16).
#include "optimized/precision/gemv_q_cuda.hpp"

namespace mw::precision::cuda {
namespace {

// Weights 4k..4k+3 of the load are the two halves of words 2k and 2k+1.
template <bool BF16>
struct HalfLoad {
    static constexpr int kWeights = 8;
    static constexpr bool kGrouped = false;
    uint4 v;
    __device__ static HalfLoad load(const QDev& q, int row, int col) {
        return {*reinterpret_cast<const uint4*>(row_ptr(q, row) + 2 * std::size_t(col))};
    }
    __device__ void slot(int k, float w[4]) const {
        const std::uint32_t a = k == 0 ? v.x : v.z, b = k == 0 ? v.y : v.w;  // k is a constant after unrolling
        if constexpr (BF16) {
            w[0] = bits::bf16_lo(a); w[1] = bits::bf16_hi(a);
            w[2] = bits::bf16_lo(b); w[3] = bits::bf16_hi(b);
        } else {
            w[0] = bits::f16_lo(a); w[1] = bits::f16_hi(a);
            w[2] = bits::f16_lo(b); w[3] = bits::f16_hi(b);
        }
    }
    __device__ static float row_scale(const QDev&, int) { return 1.0f; }
};

}  // namespace
}  // namespace mw::precision::cuda

namespace mwp = mw::precision;

MW_REGISTER_VARIANT(gemv_q_bf16_cuda, {
    .name = "bf16", .op = "gemv_q", .lever = "precision",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 2,
    .rationale = "bf16 weights widened to fp32 in registers (a shift): half the bytes of fp32",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mwp::cuda::gemv_cuda_bytes({mwp::Format::bf16}, s); },
    .prepare = mwp::cuda::gemv_prepare<mwp::cuda::HalfLoad<true>>({mwp::Format::bf16}),
    .contract_oracle = mwp::contract_oracle({mwp::Format::bf16}) });

MW_REGISTER_VARIANT(gemv_q_fp16_cuda, {
    .name = "fp16", .op = "gemv_q", .lever = "precision",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 2,
    .rationale = "fp16 weights widened to fp32 in registers by bit arithmetic: half the bytes of fp32",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mwp::cuda::gemv_cuda_bytes({mwp::Format::f16}, s); },
    .prepare = mwp::cuda::gemv_prepare<mwp::cuda::HalfLoad<false>>({mwp::Format::f16}),
    .contract_oracle = mwp::contract_oracle({mwp::Format::f16}) });
