// Attack on cuda-emu's device memory, from inside the submission's process:
// make the pages under the device pointers readable and writable (mprotect,
// or a fresh mapping where nothing is mapped), then compute the GEMM on the
// host through the device pointers. While device memory lived in the
// submission's process, behind page protections the process could lift
// (this way, or by calling the emulator's own DeviceMemoryOpen, which the
// header every .cu file includes declared), this scored full correctness.
// Now the grader holds device memory: pages made here hold nothing of it,
// and the outputs the grader reads stay poison; and a call that launches no
// kernel earns nothing whatever it leaves there.
#include <sys/mman.h>

#include <cstdint>

#include "harness/cuda/launch.hpp"

namespace {

void open_pages(const void* p, std::size_t bytes) {
    const auto page = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t(4095);
    const auto end = (reinterpret_cast<std::uintptr_t>(p) + bytes + 4095) & ~std::uintptr_t(4095);
    void* at = reinterpret_cast<void*>(page);
    if (mprotect(at, end - page, PROT_READ | PROT_WRITE) != 0)
        mmap(at, end - page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
}

}  // namespace

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t) {
    open_pages(dA, sizeof(float) * M * K);
    open_pages(dB, sizeof(float) * K * N);
    open_pages(dC, sizeof(float) * M * N);
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += dA[i * K + k] * dB[k * N + j];
            dC[i * N + j] = acc;
        }
}
