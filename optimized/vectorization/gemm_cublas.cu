// GEMM on the GPU, vendor rungs: cuBLAS SGEMM, and cublasGemmEx on bf16.
// (The whole ladder is listed in reference/vectorization/gemm.cu.)
//
// What the hand-written ladder is measured against. cuBLAS picks, per shape and
// GPU, a kernel that goes well beyond rung 4: larger warp-level tiles,
// double-buffered asynchronous copies into shared memory, split-K for skinny
// shapes. Math mode is left at the default, which on sm_80+ does NOT use TF32
// tensor cores for SGEMM, so this is fp32 against fp32.
// cuBLAS is column-major; a row-major matrix is its column-major transpose, so
// row-major C = A*B is computed as column-major C^T = B^T * A^T: call with
// (m, n, k) = (N, M, K), B first (ld N), then A (ld K), C with ld N.
// Cost model: none given, so the op's compulsory bytes are used (the kernel
// cuBLAS picks, and so its reuse, is not known in advance).
// The bf16 rung: A and B rounded to bf16 by the tensor-core rungs' pack
// kernel (gemm_mma.cuh, here without padding), then cublasGemmEx with bf16
// inputs, fp32 output and CUBLAS_COMPUTE_32F: the same contract as rungs
// 5-8 (gemm::oracle_bf16_inputs) and the ceiling they are measured against.
// Real GPU only: the emulator has no cuBLAS.
#include "harness/cuda/launch.hpp"

#if !MEMWALL_EMU
#include "harness/cuda/cublas.hpp"
#include "harness/cuda/device_problem.hpp"
#include "reference/vectorization/gemm.hpp"

#include "optimized/vectorization/gemm_mma.cuh"

#include <cublas_v2.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace {

using mw::cuda::cublas_check;
using mw::cuda::make_cublas_handle;

mw::Instance prepare_cublas(mw::Problem& p) {
    const int M = int(p.shape["m"]), N = int(p.shape["n"]), K = int(p.shape["k"]);
    auto handle = make_cublas_handle();
    return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
        const float alpha = 1.0f, beta = 0.0f;
        cublas_check(cublasSetStream(handle.get(), d.stream), "cublasSetStream");
        cublas_check(cublasSgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha,
                                 d.in<const float>("B"), N, d.in<const float>("A"), K, &beta,
                                 d.out<float>("C"), N),
                     "cublasSgemm");
    });
}

mw::Instance prepare_cublas_bf16(mw::Problem& p) {
    const int M = int(p.shape["m"]), N = int(p.shape["n"]), K = int(p.shape["k"]);
    auto handle = make_cublas_handle();
    auto A16 = mw::cuda::device_array<unsigned short>(std::size_t(M) * K);
    auto B16 = mw::cuda::device_array<unsigned short>(std::size_t(K) * N);
    const std::size_t workspace = (std::size_t(M) * K + std::size_t(K) * N) * sizeof(unsigned short);
    return mw::cuda::device_instance(
        p,
        [=](mw::cuda::DeviceProblem& d) {
            mma_pack(d.stream, d.in<const float>("A"), A16.get(), M, K, M, K);
            mma_pack(d.stream, d.in<const float>("B"), B16.get(), K, N, K, N);
            const float alpha = 1.0f, beta = 0.0f;
            cublas_check(cublasSetStream(handle.get(), d.stream), "cublasSetStream");
            cublas_check(cublasGemmEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B16.get(),
                                      CUDA_R_16BF, N, A16.get(), CUDA_R_16BF, K, &beta, d.out<float>("C"),
                                      CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                         "cublasGemmEx");
        },
        workspace);
}

}  // namespace

MW_REGISTER_VARIANT(gemm_cublas_bf16_cuda, {
    .name = "cublas_bf16", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::vendor, .backend = MW_CUDA_BACKEND, .rung = 10,
    .rationale = "cublasGemmEx on bf16 tensor cores (inputs rounded by the ladder's pack kernel, fp32 "
                 "accumulate): the ceiling of rungs 5-8",
    .needs = {"gpu", "sm_80"},
    .compute = "bf16",
    .prepare = prepare_cublas_bf16,
    .contract_oracle = mw::gemm::oracle_bf16_inputs });

MW_REGISTER_VARIANT(gemm_cublas_cuda, {
    .name = "cublas", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::vendor, .backend = MW_CUDA_BACKEND, .rung = 9,
    .rationale = "NVIDIA's tuned SGEMM, the ceiling the hand-written ladder is measured against",
    .needs = {"gpu"},
    .prepare = prepare_cublas });

#endif  // !MEMWALL_EMU
