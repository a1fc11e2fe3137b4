// Attack on cuda-emu's grading of a CUDA exercise, the class of
// lock_channel_gemm.cu (a batch of hostile submissions: 60/60 with kernels
// that computed nothing): a kernel tells host code running beside it what
// it reads, through anything both can see while both run (file locks then;
// the machine's load, its process counts, a shared core's speed). The
// channels the seccomp filter knows are closed (attack_syscalls.cpp tries
// them); this control checks the rest are too: nothing of the host runs
// while a kernel does. Its first call starts a host thread that notes the
// longest pause in its own progress, launches a kernel that spins for
// 0.4 s, and fails with that pause ("GAP_MS"): about 0.4 s when the host is
// held frozen for the launch, a few ms when it ran beside the kernel.
// cuda-emu only (the kernel reads the host's clock).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "harness/cuda/launch.hpp"

namespace {

using Clock = std::chrono::steady_clock;

__global__ void spin(double seconds) {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
    }
}

}  // namespace

void student_gemm_cuda(const float*, const float*, float*, int, int, int, cudaStream_t stream) {
    std::atomic<bool> stop{false}, started{false};
    std::atomic<double> gap{0};
    std::thread watcher([&] {
        auto last = Clock::now();
        started = true;
        while (!stop) {
            const auto now = Clock::now();
            const double d = std::chrono::duration<double>(now - last).count();
            if (d > gap) gap = d;
            last = now;
        }
    });
    while (!started) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    mw::launch(spin, dim3(1), dim3(1), 0, stream, 0.4);
    cudaStreamSynchronize(stream);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stop = true;
    watcher.join();
    char buf[64];
    std::snprintf(buf, sizeof buf, "GAP_MS %.0f", gap.load() * 1e3);
    throw std::runtime_error(buf);
}
