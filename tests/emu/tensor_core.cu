// Test kernels of the tensor-core wrappers (kernels/cuda/tensor_core.cuh):
// one warp. Each lane builds its fragments from global memory by the PTX
// ISA's layouts (or, planted, by a wrong one), or loads them with ldmatrix
// from shared memory, as a tensor-core GEMM does. Compiled twice: as C++
// through the emulator here (EmuTensorCore.*), and by nvcc for the GPU in
// tests/tensor_core (TensorCoreCuda.*); both runs make the checks of
// tensor_core_cases.hpp.
#include <cstdint>
#include <vector>

#include "harness/cuda/launch.hpp"
#include "kernels/cuda/tensor_core.cuh"
#include "kernels/cuda/wmma.cuh"
#include "tests/emu/emu_kernels.hpp"

namespace {

using u16 = std::uint16_t;

__device__ unsigned pack(u16 lo, u16 hi) { return unsigned(lo) | unsigned(hi) << 16; }

// A [16][16] row-major, B [16][8] row-major (k, n), C and D [16][8].
// wrong = 1: a[1] and a[2] swapped, the fragment a lane would hold if
// "row g + 8" and "column + 8" were confused.
template <class T> __global__ void mma_kernel(const u16* A, const u16* B, const float* C, float* D, int wrong) {
    const int lane = int(threadIdx.x), g = lane / 4, t = lane % 4;
    unsigned a[4] = {pack(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]),
                     pack(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]),
                     pack(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]),
                     pack(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9])};
    if (wrong) {
        const unsigned x = a[1];
        a[1] = a[2], a[2] = x;
    }
    const unsigned b[2] = {pack(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]),
                           pack(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g])};
    const float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1]};
    float d[4];
    mw::tc::mma_m16n8k16<T>(d, a, b, c);
    D[g * 8 + 2 * t] = d[0], D[g * 8 + 2 * t + 1] = d[1], D[(g + 8) * 8 + 2 * t] = d[2], D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

// Four 8 x 8 matrices, [4][8][8] in global memory, copied to shared memory
// with rows 24 elements apart (padding, as a bank-conflict-free layout has);
// lane l's row address: row l % 8 of matrix l / 8.
template <int N, bool Trans> __global__ void ldmatrix_kernel(const u16* M, unsigned* out) {
    __shared__ __align__(16) u16 sm[4 * 8 * 24];
    const int lane = int(threadIdx.x);
    for (int i = lane; i < 4 * 64; i += 32) sm[(i / 8) * 24 + i % 8] = M[i];
    __syncwarp();
    unsigned r[N];
    mw::tc::ldmatrix<N, Trans>(r, &sm[lane * 24]);
    for (int i = 0; i < N; ++i) out[lane * N + i] = r[i];
}

// D = A B for A [16][16], B [16][8], both row-major in shared memory: A's
// fragment by ldmatrix.x4 (matrices: rows 0-7 / 8-15 by columns 0-7 / 8-15,
// in the order a[0..3] needs), B's by ldmatrix.x2.trans (k 0-7, 8-15).
__global__ void mma_ldmatrix_kernel(const u16* A, const u16* B, float* D) {
    __shared__ __align__(16) u16 sa[16 * 16];
    __shared__ __align__(16) u16 sb[16 * 8];
    const int lane = int(threadIdx.x), g = lane / 4, t = lane % 4;
    for (int i = lane; i < 256; i += 32) sa[i] = A[i];
    for (int i = lane; i < 128; i += 32) sb[i] = B[i];
    __syncwarp();
    // Matrix j = lane / 8 of a[]: a[0] rows 0-7 cols 0-7, a[1] rows 8-15
    // cols 0-7, a[2] rows 0-7 cols 8-15, a[3] rows 8-15 cols 8-15.
    const int j = lane / 8, row = (j % 2) * 8 + lane % 8, col = (j / 2) * 8;
    unsigned a[4], b[2];
    mw::tc::ldmatrix<4>(a, &sa[row * 16 + col]);
    mw::tc::ldmatrix<2, true>(b, &sb[(lane % 16) * 8]);  // rows k 0-15 of B; lanes 16-31 ignored
    const float c[4] = {0, 0, 0, 0};
    float d[4];
    mw::tc::mma_m16n8k16<__nv_bfloat16>(d, a, b, c);
    D[g * 8 + 2 * t] = d[0], D[g * 8 + 2 * t + 1] = d[1], D[(g + 8) * 8 + 2 * t] = d[2], D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

// Two stages of a copy pipeline, one warp: lane l copies floats 4l .. 4l + 3
// of stage 0 (group 0) and of stage 1 (group 1; lane 31 reads only
// `tail_bytes` of its 16, the rest zero-filled) with cp.async; after
// wait_group 1 it writes both stages to out[0, 256), after wait_group 0 to
// out[256, 512). Stage 1 after wait_group 1 is a race on a GPU (the copy
// may have landed or not), poison under cuda-emu.
__global__ void cp_async_kernel(const float* in, float* out, int tail_bytes) {
    __shared__ __align__(16) float sm[2][128];
    const int l = int(threadIdx.x);
    mw::tc::cp_async16(&sm[0][4 * l], in + 4 * l);
    mw::tc::cp_async_commit();
    mw::tc::cp_async16(&sm[1][4 * l], in + 128 + 4 * l, l == 31 ? tail_bytes : 16);
    mw::tc::cp_async_commit();
    mw::tc::cp_async_wait<1>();
    __syncthreads();
    for (int i = 0; i < 4; ++i) out[4 * l + i] = sm[0][4 * l + i], out[128 + 4 * l + i] = sm[1][4 * l + i];
    __syncthreads();
    mw::tc::cp_async_wait<0>();
    __syncthreads();
    for (int i = 0; i < 4; ++i) out[256 + 4 * l + i] = sm[0][4 * l + i], out[384 + 4 * l + i] = sm[1][4 * l + i];
}

// D = A B + C for A, B, C, D [16][16] row-major, through the warp matrix
// API from shared memory; `shift` elements added to A's pointer (0: the
// 256-bit alignment the API requires; else, under the emulator, refused).
__global__ void wmma_kernel(const u16* A, const u16* B, const float* C, float* D, int shift) {
    namespace wmma = mw::wmma;
    __shared__ __align__(32) u16 sa[16 * 16 + 16];
    __shared__ __align__(32) u16 sb[16 * 16];
    __shared__ __align__(32) float sc[16 * 16];
    const int lane = int(threadIdx.x);
    for (int i = lane; i < 256; i += 32) sa[i + shift] = A[i], sb[i] = B[i], sc[i] = C[i];
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::load_matrix_sync(a, reinterpret_cast<const __nv_bfloat16*>(sa + shift), 16);
    wmma::load_matrix_sync(b, reinterpret_cast<const __nv_bfloat16*>(sb), 16);
    wmma::load_matrix_sync(c, sc, 16, wmma::mem_row_major);
    wmma::mma_sync(c, a, b, c);
    wmma::store_matrix_sync(sc, c, 16, wmma::mem_row_major);
    __syncwarp();
    for (int i = lane; i < 256; i += 32) D[i] = sc[i];
}

template <class T> T* device(const std::vector<T>& h) {
    T* d = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&d, h.size() * sizeof(T)));
    MW_CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

template <class T> std::vector<T> fetch(T* d, std::size_t n) {
    std::vector<T> h(n);
    MW_CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    cudaFree(d);
    return h;
}

}  // namespace

namespace emu_test {

std::vector<float> mma_tile(const std::vector<std::uint16_t>& A, const std::vector<std::uint16_t>& B,
                            const std::vector<float>& C, bool f16, bool wrong_fragment) {
    u16 *dA = device(A), *dB = device(B);
    float *dC = device(C), *dD = device(std::vector<float>(128, 0.0f));
    if (f16) mw::launch(mma_kernel<__half>, dim3(1), dim3(32), 0, nullptr, dA, dB, dC, dD, int(wrong_fragment));
    else mw::launch(mma_kernel<__nv_bfloat16>, dim3(1), dim3(32), 0, nullptr, dA, dB, dC, dD, int(wrong_fragment));
    cudaFree(dA), cudaFree(dB), cudaFree(dC);
    return fetch(dD, 128);
}

std::vector<std::uint32_t> ldmatrix_lanes(const std::vector<std::uint16_t>& M, int n, bool trans) {
    u16* dM = device(M);
    unsigned* out = device(std::vector<unsigned>(std::size_t(32 * n), 0u));
    if (n == 1) trans ? mw::launch(ldmatrix_kernel<1, true>, dim3(1), dim3(32), 0, nullptr, dM, out)
                      : mw::launch(ldmatrix_kernel<1, false>, dim3(1), dim3(32), 0, nullptr, dM, out);
    else if (n == 2) trans ? mw::launch(ldmatrix_kernel<2, true>, dim3(1), dim3(32), 0, nullptr, dM, out)
                           : mw::launch(ldmatrix_kernel<2, false>, dim3(1), dim3(32), 0, nullptr, dM, out);
    else trans ? mw::launch(ldmatrix_kernel<4, true>, dim3(1), dim3(32), 0, nullptr, dM, out)
               : mw::launch(ldmatrix_kernel<4, false>, dim3(1), dim3(32), 0, nullptr, dM, out);
    cudaFree(dM);
    const auto r = fetch(out, std::size_t(32 * n));
    return {r.begin(), r.end()};
}

std::vector<float> mma_via_ldmatrix(const std::vector<std::uint16_t>& A, const std::vector<std::uint16_t>& B) {
    u16 *dA = device(A), *dB = device(B);
    float* dD = device(std::vector<float>(128, 0.0f));
    mw::launch(mma_ldmatrix_kernel, dim3(1), dim3(32), 0, nullptr, dA, dB, dD);
    cudaFree(dA), cudaFree(dB);
    return fetch(dD, 128);
}

std::vector<float> wmma_tile(const std::vector<std::uint16_t>& A, const std::vector<std::uint16_t>& B,
                             const std::vector<float>& C, int shift) {
    u16 *dA = device(A), *dB = device(B);
    float *dC = device(C), *dD = device(std::vector<float>(256, 0.0f));
    try {
        mw::launch(wmma_kernel, dim3(1), dim3(32), 0, nullptr, dA, dB, dC, dD, shift);
    } catch (...) {  // a refused call (the misaligned test): nothing left allocated
        cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dD);
        throw;
    }
    cudaFree(dA), cudaFree(dB), cudaFree(dC);
    return fetch(dD, 256);
}

std::vector<float> cp_async_stages(const std::vector<float>& in, int tail_bytes) {
    float* dIn = device(in);
    float* out = device(std::vector<float>(512, 0.0f));
    mw::launch(cp_async_kernel, dim3(1), dim3(32), 0, nullptr, dIn, out, tail_bytes);
    cudaFree(dIn);
    return fetch(out, 512);
}

}  // namespace emu_test
