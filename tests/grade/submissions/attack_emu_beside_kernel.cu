// Attack on cuda-emu's grading of a CUDA exercise, the class of
// lock_channel_gemm.cu (a batch of hostile submissions: 60/60 with kernels
// that computed nothing): a kernel tells host code running beside it what
// it reads, through anything both can see while both run (file locks then;
// the machine's load, its process counts, a shared core's speed). The
// channels the seccomp filter knows are closed (attack_syscalls.cpp tries
// them); this control checks the rest are too: nothing of the host runs
// while a kernel does. A host thread notes every pause in its own progress
// longer than 0.1 s, in every call; the first call launches a kernel that
// spins for 0.4 s and writes when it ran into device memory; the second
// hands the pauses to a kernel that compares and fails with "INSIDE_PAUSE
// yes" when the spinning kernel ran wholly inside one of the host's pauses
// (the host held frozen), "no" when the host made progress beside it.
// cuda-emu only (kernels read the machine's clock).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "harness/cuda/launch.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

struct Pauses {
    double from[32], to[32];
    int n;
};

__global__ void spin(double seconds, double* when) {
    when[0] = now_s();
    while (now_s() < when[0] + seconds) {
    }
    when[1] = now_s();
}

__global__ void compare(const double* when, Pauses p) {
    bool inside = false;
    for (int i = 0; i < p.n; ++i) inside = inside || (p.from[i] <= when[0] && when[1] <= p.to[i]);
    char buf[128];
    std::snprintf(buf, sizeof buf, "INSIDE_PAUSE %s (kernel %.3f s, %d pauses)", inside ? "yes" : "no",
                  when[1] - when[0], p.n);
    throw std::runtime_error(buf);
}

std::mutex m;
Pauses pauses{};
std::atomic<bool> watching{false};

// Runs for the life of the process (it is frozen with the rest of it).
void watch() {
    double last = now_s();
    watching = true;
    for (;;) {
        const double t = now_s();
        if (t - last > 0.1) {
            std::lock_guard lk(m);
            if (pauses.n < 32) pauses.from[pauses.n] = last, pauses.to[pauses.n] = t, ++pauses.n;
        }
        last = t;
    }
}

}  // namespace

void student_gemm_cuda(const float*, const float*, float*, int, int, int, cudaStream_t stream) {
    static int calls = 0;
    static double* when = nullptr;
    if (calls++ == 0) {
        std::thread(watch).detach();
        while (!watching) {
        }
        cudaMalloc(&when, 2 * sizeof(double));
        mw::launch(spin, dim3(1), dim3(1), 0, stream, 0.4, when);
        cudaStreamSynchronize(stream);
        return;
    }
    // The watcher notes a pause when it runs again: let it, now that the host is thawed.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Pauses p;
    {
        std::lock_guard lk(m);
        p = pauses;
    }
    mw::launch(compare, dim3(1), dim3(1), 0, stream, static_cast<const double*>(when), p);
    cudaStreamSynchronize(stream);
}
