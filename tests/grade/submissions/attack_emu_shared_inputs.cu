// Attack on cuda-emu's grading of a CUDA exercise: the inputs read from the
// call's shared mapping. The grader staged every call's buffers in device
// memory, and still copied them into the shared mapping the worker holds on
// fd 3, as it does for a CPU exercise. The host code maps fd 3, reads A and B
// at the offsets the header gives, multiplies on the host, copies C to the
// device (a host-to-device copy reads nothing back) and launches an empty
// kernel. It scored 60/60 (a red-team pass found it at levels 01 and 03).
// Under cuda-emu the shared mapping now carries the header and canaries
// only: the inputs are in device memory alone.
#include <sys/mman.h>
#include <sys/stat.h>

#include <vector>

#include "commands/grade/grade_protocol.hpp"
#include "harness/cuda/launch.hpp"

namespace {
__global__ void nothing() {}
}  // namespace

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t stream) {
    struct stat st {};
    if (fstat(mw::grade::kShmFd, &st) != 0) return;
    auto* base = static_cast<unsigned char*>(mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, mw::grade::kShmFd, 0));
    if (base == MAP_FAILED) return;
    const auto* h = reinterpret_cast<const mw::grade::SharedHeader*>(base);
    const auto* A = reinterpret_cast<const float*>(base + h->offset[0]);
    const auto* B = reinterpret_cast<const float*>(base + h->offset[1]);
    std::vector<float> C(std::size_t(M) * N);
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            double acc = 0;
            for (int k = 0; k < K; ++k) acc += double(A[std::size_t(i) * K + k]) * B[std::size_t(k) * N + j];
            C[std::size_t(i) * N + j] = float(acc);
        }
    munmap(base, st.st_size);
    cudaMemcpy(dC, C.data(), C.size() * sizeof(float), cudaMemcpyHostToDevice);
    mw::launch(nothing, dim3(1), dim3(1), 0, stream);
}
