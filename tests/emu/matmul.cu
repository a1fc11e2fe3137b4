// cuda-emu test kernel: shared-memory tiled matmul, a template over the tile
// size (so the emulator must find and poison template statics), with two
// deliberately broken twins that each drop one __syncthreads.
#include "harness/cuda/launch.hpp"
#include "tests/emu/emu_kernels.hpp"

namespace {

// kMissing: 0 correct, 1 no barrier after loading the tiles (threads read
// tile entries their neighbours have not written), 2 no barrier before the
// next tiles are loaded (fast threads overwrite entries still being read).
template <int TILE, int kMissing>
__global__ void tiled_matmul_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = row < M && ka < K ? A[static_cast<long>(row) * K + ka] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = kb < K && col < N ? B[static_cast<long>(kb) * N + col] : 0.0f;
        if (kMissing != 1) __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        if (kMissing != 2) __syncthreads();
    }
    if (row < M && col < N) C[static_cast<long>(row) * N + col] = acc;
}

template <int TILE>
void launch_tiled(const float* A, const float* B, float* C, int M, int N, int K, int missing) {
    const dim3 block(TILE, TILE), grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    if (missing == 1) mw::launch(tiled_matmul_kernel<TILE, 1>, grid, block, 0, nullptr, A, B, C, M, N, K);
    else if (missing == 2) mw::launch(tiled_matmul_kernel<TILE, 2>, grid, block, 0, nullptr, A, B, C, M, N, K);
    else mw::launch(tiled_matmul_kernel<TILE, 0>, grid, block, 0, nullptr, A, B, C, M, N, K);
}

}  // namespace

namespace emu_test {

std::vector<float> tiled_matmul(const std::vector<float>& A, const std::vector<float>& B, int M, int N, int K,
                                int tile, int missing) {
    float *dA = nullptr, *dB = nullptr, *dC = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&dA, A.size() * sizeof(float)));
    MW_CUDA_CHECK(cudaMalloc(&dB, B.size() * sizeof(float)));
    MW_CUDA_CHECK(cudaMalloc(&dC, static_cast<std::size_t>(M) * N * sizeof(float)));
    MW_CUDA_CHECK(cudaMemcpy(dA, A.data(), A.size() * sizeof(float), cudaMemcpyHostToDevice));
    MW_CUDA_CHECK(cudaMemcpy(dB, B.data(), B.size() * sizeof(float), cudaMemcpyHostToDevice));
    if (tile == 16) launch_tiled<16>(dA, dB, dC, M, N, K, missing);
    else launch_tiled<32>(dA, dB, dC, M, N, K, missing);
    std::vector<float> C(static_cast<std::size_t>(M) * N);
    MW_CUDA_CHECK(cudaMemcpy(C.data(), dC, C.size() * sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    return C;
}

}  // namespace emu_test
