// Attack class 5, weak containment: kernel interfaces an exercise never
// needs, each a way out of (or around) the sandbox: a nested user namespace
// (where a mount or a raw socket becomes possible), a mount, raw packet,
// IPv4 and vsock sockets, io_uring, perf events, bpf, the key ring, ptrace;
// and the covert channels between two sandboxed processes (under cuda-emu,
// a kernel telling host code what it read): file locks, inotify, the page
// cache's residency (mincore, cachestat) and eviction (fadvise), a session
// of its own (a scheduler group of its own); timers the kernel fires while
// the sandbox is frozen (a storm of them on the graded CPU slowed the
// reference it is timed against to a third: red-team batch 12); epoll, whose
// watches kernel threads tear down after a freeze (batch 13), and more
// than 1024 descriptors (reported as nofile=N).
// A correct naive GEMM whose fifth call tries each and fails with the list
// of what worked ("ok") and what was refused.
#include <fcntl.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
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

// "name=ok", or "name=E<errno>": short, so that the whole list fits in the
// report's bounded message.
static std::string verdict(const char* what, long rc) {
    return std::string(" ") + what + "=" + (rc >= 0 ? "ok" : "E" + std::to_string(errno));
}

static std::string try_all() {
    std::string s = "SYSCALLS";
    const pid_t child = fork();  // unshare in a child: the worker itself stays as it is
    if (child == 0) _exit(unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : 1);
    int status = 0;
    waitpid(child, &status, 0);
    s += std::string(" unshare=") + (WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "ok" : "no");
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
    const int fd = open("/proc/self/exe", O_RDONLY);
    struct flock lk{};
    lk.l_type = F_RDLCK, lk.l_whence = SEEK_SET, lk.l_start = 4096, lk.l_len = 1;
    s += verdict("fcntl_lock", fcntl(fd, F_SETLK, &lk));
    s += verdict("fcntl_getlk", fcntl(fd, F_GETLK, &lk));
    s += verdict("ofd_lock", fcntl(fd, F_OFD_GETLK, &lk));
    // The same commands with bit 32 set: the kernel reads an int (red-team
    // batch 9 passed a filter that compared all 64 bits so).
    constexpr long kHigh = 1L << 32;
    s += verdict("ofd_lock_high", syscall(SYS_fcntl, fd, kHigh | F_OFD_GETLK, &lk));
    s += verdict("fcntl_lock_high", syscall(SYS_fcntl, fd, kHigh | F_SETLK, &lk));
    s += verdict("flock", flock(fd, LOCK_SH | LOCK_NB));
    s += verdict("inotify", inotify_init1(0));
    s += verdict("fadvise", syscall(SYS_fadvise64, fd, 0, 4096, POSIX_FADV_DONTNEED));
    void* page = mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    unsigned char resident = 0;
    s += verdict("mincore", page == MAP_FAILED ? -1 : mincore(page, 4096, &resident));
    s += verdict("pageout_high", page == MAP_FAILED ? -1 : syscall(SYS_madvise, page, 4096, kHigh | MADV_PAGEOUT));
    struct { unsigned long long off, len; } range{0, 4096};
    unsigned long long stat[8] = {};
    s += verdict("cachestat", syscall(451, fd, &range, stat, 0));
    s += verdict("setsid", setsid());
    s += verdict("timerfd", timerfd_create(CLOCK_MONOTONIC, 0));
    timer_t timer;
    sigevent ev{};
    ev.sigev_notify = SIGEV_NONE;
    s += verdict("timer_create", syscall(SYS_timer_create, CLOCK_MONOTONIC, &ev, &timer));
    itimerval every{{0, 1}, {0, 1}}, off{};
    s += verdict("setitimer", syscall(SYS_setitimer, ITIMER_PROF, &every, nullptr));
    syscall(SYS_setitimer, ITIMER_PROF, &off, nullptr);
    s += verdict("epoll", syscall(SYS_epoll_create1, 0));
    rlimit nofile{};
    getrlimit(RLIMIT_NOFILE, &nofile);
    s += " nofile=" + std::to_string(nofile.rlim_cur) + " END";
    return s;
}

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    static int calls = 0;
    if (calls++ == 4) throw std::runtime_error(try_all());
    naive_gemm(A, B, C, M, N, K);
}
