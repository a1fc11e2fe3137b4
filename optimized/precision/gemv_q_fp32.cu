// GEMV on the GPU, precision lever, rung 1: fp32 weights, a warp per row pair,
// coalesced 16-byte loads. (The CUDA ladder is listed in reference/precision/gemv_q.cu.)
//
// Change from rung 0 (naive): the same fp32 weights, 4 bytes each, but read
// the way DRAM wants them. Instead of one thread per output walking its own
// row (32 rows per warp instruction, 32 sectors for 128 useful bytes), a warp
// owns two rows and its 32 lanes read 16 bytes each, side by side: one
// instruction moves 512 contiguous bytes of a row. Lanes keep partial sums,
// a shuffle tree adds them; x is staged once per block in shared memory and
// shared by the block's 32 rows and by up to 8 batch items, so W is streamed
// once for b <= 8 (the naive rung streams it once per batch item).
// (The skeleton is optimized/precision/gemv_q_cuda.hpp; this file is its
// decoder, which here has nothing to decode.)
// Bytes: 4 * n_out * n_in of W (+ x, y), the op's compulsory bytes: 256 MiB at
// n_out = n_in = 8192. Expected: bandwidth-bound, time ~ bytes / HBM bandwidth
// (a few TB/s on sm_80 / sm_90), the baseline the lower-precision rungs
// divide: from here on only the bytes per weight change.
#include "optimized/precision/gemv_q_cuda.hpp"

namespace mw::precision::cuda {
namespace {

struct F32Load {
    static constexpr int kWeights = 4;
    static constexpr bool kGrouped = false;
    float4 v;
    __device__ static F32Load load(const QDev& q, int row, int col) {
        return {*reinterpret_cast<const float4*>(row_ptr(q, row) + 4 * std::size_t(col))};
    }
    __device__ void slot(int, float w[4]) const { w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w; }
    __device__ static float row_scale(const QDev&, int) { return 1.0f; }
};

}  // namespace
}  // namespace mw::precision::cuda

MW_REGISTER_VARIANT(gemv_q_fp32_cuda, {
    .name = "fp32", .op = "gemv_q", .lever = "precision",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 1,
    .rationale = "a warp per row pair, 16-byte coalesced loads, x staged in shared memory: "
                 "the same 4 bytes per weight as naive, now at HBM bandwidth",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        return mw::precision::cuda::gemv_cuda_bytes({mw::precision::Format::f32}, s);
    },
    .prepare = mw::precision::cuda::gemv_prepare<mw::precision::cuda::F32Load>({mw::precision::Format::f32}) });
