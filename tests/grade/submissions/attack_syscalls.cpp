// Attack class 5, weak containment: kernel interfaces an exercise never
// needs, each a way out of (or around) the sandbox: a nested user namespace
// (where a mount or a raw socket becomes possible), a mount, raw packet,
// IPv4 and vsock sockets, io_uring, perf events, bpf, the key ring, ptrace.
// A correct naive GEMM whose fifth call tries each and fails with the list
// of what worked ("ok") and what was refused.
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

static void naive_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}

static std::string verdict(const char* what, long rc) {
    return std::string(" ") + what + "=" + (rc >= 0 ? "ok" : std::strerror(errno));
}

static std::string try_all() {
    std::string s = "SYSCALLS";
    const pid_t child = fork();  // unshare in a child: the worker itself stays as it is
    if (child == 0) _exit(unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : 1);
    int status = 0;
    waitpid(child, &status, 0);
    s += std::string(" unshare=") + (WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "ok" : "refused");
    s += verdict("mount", mount("none", "/tmp", "tmpfs", 0, nullptr));
    s += verdict("packet", socket(AF_PACKET, SOCK_RAW, 0));
    s += verdict("inet", socket(AF_INET, SOCK_STREAM, 0));
    s += verdict("vsock", socket(AF_VSOCK, SOCK_STREAM, 0));
    char params[120] = {};
    s += verdict("io_uring", syscall(SYS_io_uring_setup, 4, params));
    perf_event_attr attr{};
    attr.size = sizeof attr, attr.type = PERF_TYPE_SOFTWARE, attr.config = PERF_COUNT_SW_CPU_CLOCK;
    s += verdict("perf", syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
    s += verdict("bpf", syscall(SYS_bpf, 0, nullptr, 0));
    s += verdict("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
    s += verdict("ptrace", ptrace(PTRACE_ATTACH, 1, nullptr, nullptr));
    return s;
}

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    static int calls = 0;
    if (calls++ == 4) throw std::runtime_error(try_all());
    naive_gemm(A, B, C, M, N, K);
}
