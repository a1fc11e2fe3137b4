// Attack on cuda-emu's grading of a CUDA exercise: a kernel signalling host
// code through the page cache of a file both can read (the kernel reads
// chosen pages of it, the host times its own reads of them afterwards: a
// cached page answers in microseconds). Holding the host frozen while the
// kernel runs does not close this one, since the cache outlives the
// launch; the kernel executor sees no file the host sees instead: private
// copies of its executable and libraries, no /usr. This control's kernel
// reports what it sees (is /usr/include there; the device and inode of its
// executable) in its second call, its host code the same of its own in the
// first, and the grade fails with both: "HOST_FILES usr=seen exe=D:I" and
// "KERNEL_FILES usr=... exe=D:I".
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "harness/cuda/launch.hpp"

namespace {

std::string exe_id() {
    struct stat st{};
    if (stat("/proc/self/exe", &st) != 0) return std::strerror(errno);
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

__global__ void look() {
    const std::string usr = access("/usr/include", F_OK) == 0 ? std::string("seen") : std::strerror(errno);
    throw std::runtime_error("KERNEL_FILES usr=" + usr + " exe=" + exe_id());
}

}  // namespace

void student_gemm_cuda(const float*, const float*, float*, int, int, int, cudaStream_t stream) {
    static int calls = 0;
    if (calls++ == 0)
        throw std::runtime_error("HOST_FILES usr=" +
                                 (access("/usr/include", F_OK) == 0 ? std::string("seen") : std::strerror(errno)) +
                                 " exe=" + exe_id());
    mw::launch(look, dim3(1), dim3(1), 0, stream);
    cudaStreamSynchronize(stream);
}
