// Attack on cuda-emu's grading of a CUDA exercise, after red-team batch 9's
// attack_device_hog_transpose.cu: emulated device memory lives in the
// grader's own process, outside every sandbox's cgroup, so a submission that
// allocated and touched the level's whole memory limit (4 GiB) of it made
// the grader, in a container of 6 GiB, the process the machine killed (no
// report). Now the grader keeps at most 1 GiB of device memory.
//
// This control allocates device memory 64 MiB at a time, setting each, until
// an allocation fails, and fails with "DEVICE_MIB <how much it got>".
#include <cstdio>
#include <stdexcept>

#include "harness/cuda/launch.hpp"

void student_gemm_cuda(const float*, const float*, float*, int, int, int, cudaStream_t) {
    constexpr std::size_t kStep = std::size_t(64) << 20;
    int got = 0;
    for (void* p = nullptr; got < 256 && cudaMalloc(&p, kStep) == cudaSuccess; ++got) cudaMemset(p, 1, kStep);
    char buf[64];
    std::snprintf(buf, sizeof buf, "DEVICE_MIB %d", got * 64);
    throw std::runtime_error(buf);
}
