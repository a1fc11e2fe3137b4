// GEMV on the GPU, precision lever, vendor rung: cuBLAS GEMM on fp16 / bf16
// weights with fp32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F).
// (The CUDA ladder is listed in reference/precision/gemv_q.cu.)
//
// What the hand-written rungs are measured against, and the answer for
// batched shapes. W is stored as quantize()'s fp16 / bf16 bits (the rung 2
// weights); cuBLAS has no 16-bit-weight x fp32-activation GEMM, so the timed
// call first rounds x to the same 16-bit type (a tiny kernel: b * n_in
// values), then computes y = W16 x16 in fp32 on the tensor cores, writing
// fp32 y. The products of two 16-bit values are exact in fp32, so the only
// extra error is the rounding of x: this rung's contract is
// y = dequant(W) round16(x), checked with the fp32 tolerance.
// cuBLAS is column-major: row-major W[n_out][ld] is the column-major n_in x
// n_out matrix W^T (lda = ld), so y^T = op(W^T)^T x^T is
// (m, n, k) = (n_out, b, n_in) with transa = T; x[b][n_in] is column-major
// n_in x b (ldb = n_in) and y[b][n_out] column-major n_out x b (ldc = n_out).
// Bytes: 2 * n_out * n_in of W plus x (fp32 read, 16-bit written and read
// again) and y. At b = 1 that is rung 2's traffic, so a GEMV-shaped GEMM can
// at best tie rung 2; as b grows W is still streamed once while the
// hand-written kernels re-stream it every 8 batch items, and past the ridge
// (hundreds of items) the tensor cores make this rung compute-bound at a far
// higher roof than the fp32 FMA rungs.
// Real GPU only: the emulator has no cuBLAS.
#include "harness/cuda/launch.hpp"

#if !MEMWALL_EMU
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/cuda/cublas.hpp"
#include "harness/cuda/device_problem.hpp"
#include "harness/inputs.hpp"
#include "optimized/precision/gemv_q_cuda.hpp"
#include "reference/precision/gemv_q.hpp"
#include "kernels/precision/quant.hpp"

namespace {

namespace mwp = mw::precision;

using mw::cuda::cublas_check;
using mw::cuda::make_cublas_handle;

// x rounded to nearest even, as the host's f32_to_bf16 / f32_to_f16 do.
template <bool BF16>
__global__ void round_x_kernel(const float* __restrict__ x, unsigned short* __restrict__ x16, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if constexpr (BF16) x16[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
    else x16[i] = __half_as_ushort(__float2half_rn(x[i]));
}

template <bool BF16>
mw::Instance prepare_cublas(mw::Problem& p) {
    const std::int64_t n_out = p.shape["n_out"], n_in = p.shape["n_in"], b = p.shape["b"];
    const mwp::QMatrix m = mwp::quantize({BF16 ? mwp::Format::bf16 : mwp::Format::f16}, p.in("W").as<float>(), n_out, n_in);
    std::shared_ptr<unsigned char> w16 = mwp::cuda::upload(m.payload);
    std::shared_ptr<unsigned char> x16 = mwp::cuda::upload(mw::Buffer::make("x16", mw::DType::f16, std::size_t(b * n_in)));
    auto handle = make_cublas_handle();
    const int no = int(n_out), ni = int(n_in), bi = int(b), ld = int(m.ld), nx = int(b * n_in);
    const cudaDataType t16 = BF16 ? CUDA_R_16BF : CUDA_R_16F;
    return mw::cuda::device_instance(
        p,
        [=](mw::cuda::DeviceProblem& d) {
            mw::launch(round_x_kernel<BF16>, dim3(unsigned((nx + 255) / 256)), dim3(256), 0, d.stream,
                       d.in<const float>("x"), reinterpret_cast<unsigned short*>(x16.get()), nx);
            const float alpha = 1.0f, beta = 0.0f;
            cublas_check(cublasSetStream(handle.get(), d.stream), "cublasSetStream");
            cublas_check(cublasGemmEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, no, bi, ni, &alpha, w16.get(), t16, ld,
                                      x16.get(), t16, ni, &beta, d.out<float>("y"), CUDA_R_32F, no,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                         "cublasGemmEx");
        },
        std::size_t(m.bytes()) + std::size_t(b * n_in) * 2);
}

// y = dequant(W) round16(x) in fp64: the function this rung computes.
std::function<std::vector<std::vector<double>>(const mw::Problem&)> contract_rounded_x(mwp::Format f) {
    return [f](const mw::Problem& p) {
        const std::int64_t n_out = p.shape["n_out"], n_in = p.shape["n_in"], b = p.shape["b"];
        const mwp::QMatrix m = mwp::quantize({f}, p.in("W").as<float>(), n_out, n_in);
        const float* x = p.in("x").as<float>();
        std::vector<float> xr(std::size_t(b * n_in));
        for (std::size_t i = 0; i < xr.size(); ++i)
            xr[i] = f == mwp::Format::bf16 ? mw::bf16_to_f32(mw::f32_to_bf16(x[i])) : mw::f16_to_f32(mw::f32_to_f16(x[i]));
        return std::vector<std::vector<double>>{mwp::dequant_oracle(m, xr.data(), b)};
    };
}

double cublas_bytes(const mw::Shape& s, mw::DType) {
    return mwp::gemv_bytes({mwp::Format::f16}, s) + 4.0 * double(s["b"]) * double(s["n_in"]);  // x16 written, read
}

}  // namespace

MW_REGISTER_VARIANT(gemv_q_cublas_fp16_cuda, {
    .name = "cublas_fp16", .op = "gemv_q", .lever = "precision",
    .role = mw::Role::vendor, .backend = MW_CUDA_BACKEND, .rung = 5,
    .rationale = "cuBLAS GemmEx on fp16 weights and fp16-rounded x, fp32 accumulation: the vendor ceiling, "
                 "and the path for batched shapes",
    .needs = {"gpu"},
    .bytes = cublas_bytes,
    .prepare = prepare_cublas<false>,
    .contract_oracle = contract_rounded_x(mwp::Format::f16) });

MW_REGISTER_VARIANT(gemv_q_cublas_bf16_cuda, {
    .name = "cublas_bf16", .op = "gemv_q", .lever = "precision",
    .role = mw::Role::vendor, .backend = MW_CUDA_BACKEND, .rung = 5,
    .rationale = "cuBLAS GemmEx on bf16 weights and bf16-rounded x, fp32 accumulation: the vendor ceiling, "
                 "and the path for batched shapes",
    .needs = {"gpu"},
    .bytes = cublas_bytes,
    .prepare = prepare_cublas<true>,
    .contract_oracle = contract_rounded_x(mwp::Format::bf16) });

#endif  // !MEMWALL_EMU
