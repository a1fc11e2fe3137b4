// Attack on cuda-emu's grading of a CUDA exercise, after
// attack_aio_gemm.cu (a batch of hostile submissions: 60/60 with kernels
// that computed nothing on the small shapes): a kernel's process forks a
// holder that keeps io_setup(v) contexts, and the host reads v from the
// machine-wide /proc/sys/fs/aio-nr; or a kernel forks v times and the host
// reads the machine's fork count in /proc/stat. Now the host's sandbox
// shows none of the machine's counters (its /proc masks them; no sysinfo,
// no AIO), the executor makes no pipe, socket, memory file or AIO context,
// and whatever a kernel's process started is killed when its launch ends.
//
// This control reports what it can reach. Its first call, on the host:
// "HOST aio-nr=... stat=... loadavg=... meminfo=... uptime=... sysinfo=...
// io_setup=... pidfd=... peerpidfd=... passpidfd=..." (each "ok" when it
// worked; a pidfd's inode number
// counts every process and thread the machine ever started:
// attack_pidfs_gemm.cu read a kernel's thread count from it). Its second: kernel A tries a
// pipe, a socket, a memory file and io_setup and forks a sleeping holder;
// kernel B, launched next, looks for the holder's heartbeat in device
// memory and fails with "KERNEL
// pipe=... socket=... memfd=... io_setup=... holder=alive|gone".
#include <linux/aio_abi.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <stdexcept>
#include <string>

#include "harness/cuda/launch.hpp"

namespace {

std::string readable(const char* path) {
    std::ifstream in(path);
    std::string s;
    return in && std::getline(in, s) && !s.empty() ? "ok" : "refused";
}

const char* verdict(long rc) { return rc >= 0 ? "ok" : "refused"; }

// The pidfd a local socket hands out: its peer's (SO_PEERPIDFD, Linux 6.5),
// or the sender's with each message once SO_PASSPIDFD is set
// (attack_peerpidfd_gemm.cu, red-team batch 9, read pidfs numbers so).
const char* peer_pidfd() {
    int sv[2], fd = -1;
    socklen_t len = sizeof fd;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return "no-socket";
    if (getsockopt(sv[0], SOL_SOCKET, 77 /* SO_PEERPIDFD */, &fd, &len) == 0) return "ok";
    // The option with bit 32 set: the kernel reads an int.
    return verdict(syscall(SYS_getsockopt, sv[0], SOL_SOCKET, (1L << 32) | 77, &fd, &len) == 0 ? fd : -1);
}
const char* pass_pidfd() {
    int sv[2], one = 1;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return "no-socket";
    return verdict(setsockopt(sv[0], SOL_SOCKET, 76 /* SO_PASSPIDFD */, &one, sizeof one));
}

// out[0..3]: pipe, socket, memfd, io_setup (1: worked); out[4]: the holder's pid.
__global__ void probe_and_fork(int* out) {
    int p[2];
    out[0] = pipe(p) == 0;
    out[1] = socket(AF_UNIX, SOCK_STREAM, 0) >= 0;
    out[2] = memfd_create("x", 0) >= 0;
    aio_context_t ctx = 0;
    out[3] = syscall(SYS_io_setup, 8, &ctx) == 0;
    // The holder beats in device memory (out[5]) for as long as it lives.
    const pid_t holder = fork();
    if (holder == 0) {
        for (;;) {
            __atomic_add_fetch(&out[5], 1, __ATOMIC_RELAXED);
            usleep(1000);
        }
    }
    out[4] = int(holder);
}

__global__ void report(int* out) {
    const int before = __atomic_load_n(&out[5], __ATOMIC_RELAXED);
    usleep(100000);
    const bool beating = __atomic_load_n(&out[5], __ATOMIC_RELAXED) != before;
    const std::string holder = out[4] > 0 && beating ? "alive" : "gone";
    throw std::runtime_error(std::string("KERNEL pipe=") + (out[0] ? "ok" : "refused") +
                             " socket=" + (out[1] ? "ok" : "refused") + " memfd=" + (out[2] ? "ok" : "refused") +
                             " io_setup=" + (out[3] ? "ok" : "refused") + " holder=" + holder);
}

}  // namespace

void student_gemm_cuda(const float*, const float*, float*, int, int, int, cudaStream_t stream) {
    static int calls = 0;
    if (calls++ == 0) {
        struct sysinfo si{};
        aio_context_t ctx = 0;
        throw std::runtime_error(std::string("HOST aio-nr=") + readable("/proc/sys/fs/aio-nr") +
                                 " stat=" + readable("/proc/stat") + " loadavg=" + readable("/proc/loadavg") +
                                 " meminfo=" + readable("/proc/meminfo") + " uptime=" + readable("/proc/uptime") +
                                 " sysinfo=" + verdict(sysinfo(&si)) +
                                 " io_setup=" + verdict(syscall(SYS_io_setup, 8, &ctx)) +
                                 " pidfd=" + verdict(syscall(SYS_pidfd_open, getpid(), 0)) +
                                 " peerpidfd=" + peer_pidfd() + " passpidfd=" + pass_pidfd());
    }
    int* out = nullptr;
    cudaMalloc(&out, 8 * sizeof(int));
    cudaMemset(out, 0, 8 * sizeof(int));
    mw::launch(probe_and_fork, dim3(1), dim3(1), 0, stream, out);
    cudaStreamSynchronize(stream);
    mw::launch(report, dim3(1), dim3(1), 0, stream, out);
    cudaStreamSynchronize(stream);
}
