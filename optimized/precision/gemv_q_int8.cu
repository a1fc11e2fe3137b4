// GEMV on the GPU, precision lever, rung 3: int8 weights, symmetric, one fp32
// scale per output row. (The CUDA ladder is listed in reference/precision/gemv_q.cu.)
//
// Change from rung 2 (bf16/fp16): one byte per weight, q in [-127, 127] with
// w ~ s_row * q — quantize()'s bits, the CPU rung 3's. A lane's 16-byte load
// carries 16 weights. Decode without a conversion instruction: flip the sign
// bit (q + 128 in 0..255), drop the byte into the mantissa of 2^23 (one PRMT)
// and subtract 2^23 + 128: one integer op and one fp32 add per weight
// (dequant_bits.hpp; an int-to-float convert would run at a fraction of the
// FMA rate and could become the limit at int8's weights per byte). The row
// scale multiplies the finished dot product once, not every weight.
// Bytes: n_out * n_in + 4 * n_out of W (+ x, y): 64 MiB at 8192^2, 8.004
// bits per weight, a quarter of rung 1. Expected: bandwidth-bound, up to 4x
// faster than rung 1. x now costs more than W inside the SM: 2 bytes of
// shared-memory reads per byte of W per batch item (the two rows of a warp
// share each read), still well within shared memory's bandwidth at b = 1.
// Numerics: |w - s q| <= s_row / 2 per weight (quant.hpp).
#include "optimized/precision/gemv_q_cuda.hpp"

namespace mw::precision::cuda {
namespace {

// Weights 4k..4k+3 of the load are the four bytes of word k.
struct Int8Load {
    static constexpr int kWeights = 16;
    static constexpr bool kGrouped = false;
    uint4 v;
    __device__ static Int8Load load(const QDev& q, int row, int col) {
        return {*reinterpret_cast<const uint4*>(row_ptr(q, row) + std::size_t(col))};
    }
    __device__ void slot(int k, float w[4]) const {
        const std::uint32_t word = k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;  // constant k after unrolling
#pragma unroll
        for (int i = 0; i < 4; ++i) w[i] = bits::int8_at(word, i);
    }
    __device__ static float row_scale(const QDev& q, int row) { return q.scales_f32[row]; }
};

}  // namespace
}  // namespace mw::precision::cuda

namespace mwp = mw::precision;

MW_REGISTER_VARIANT(gemv_q_int8_channel_cuda, {
    .name = "int8_channel", .op = "gemv_q", .lever = "precision",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 3,
    .rationale = "int8 weights with one fp32 scale per row, decoded by the 2^23 trick, scaled once per row: "
                 "a quarter of fp32's bytes",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mwp::cuda::gemv_cuda_bytes({mwp::Format::int8_channel}, s); },
    .prepare = mwp::cuda::gemv_prepare<mwp::cuda::Int8Load>({mwp::Format::int8_channel}),
    .contract_oracle = mwp::contract_oracle({mwp::Format::int8_channel}) });
