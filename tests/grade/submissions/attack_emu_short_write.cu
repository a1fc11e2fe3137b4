// Attack on cuda-emu's grading of a CUDA exercise, after red-team batch 9:
// the host code forges a write on the device socket (a cudaMemcpy host to
// device) and sends its payload one byte short, after a launch, then
// returns. The grader's device server waited for the missing byte holding
// the lock the grader needed to run the call's kernels: the grade hung with
// no report, past any time limit. Now the grader cuts a wire the host left
// half sent and goes on (its later calls fail).
#include <sys/socket.h>

#include <cstdint>
#include <cstdlib>

#include "harness/cuda/launch.hpp"

namespace {

__global__ void nothing() {}

// The wire, as the grader's source has it (harness/emu/remote_device.hpp).
struct Request {
    std::uint32_t op = 0, value = 0;
    std::uint64_t addr = 0, from = 0, bytes = 0;
};

}  // namespace

void student_gemm_cuda(const float*, const float*, float* dC, int, int, int, cudaStream_t stream) {
    mw::launch(nothing, dim3(1), dim3(1), 0, stream);
    const char* e = std::getenv("MEMWALL_EMU_DEVICE_FD");
    const int fd = e ? std::atoi(e) : -1;
    Request q;
    q.op = 3;  // kWrite
    q.addr = reinterpret_cast<std::uintptr_t>(dC), q.bytes = 4;
    const unsigned char three[3] = {};
    if (fd >= 0 && send(fd, &q, sizeof q, 0) == sizeof q) send(fd, three, sizeof three, 0);
}
