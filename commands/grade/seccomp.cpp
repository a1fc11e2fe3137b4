#include "commands/grade/seccomp.hpp"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace mw::grade {

namespace {

// Argument `arg` equal to `value` in its low 32 bits: what the kernel reads
// of an int argument (a command, an option, advice). Compared on all 64
// bits, a caller that set bit 32 slipped past every "refuse this value"
// rule while the kernel saw the refused value (red-team batch 9:
// SO_PEERPIDFD, F_OFD_SETLK, MADV_PAGEOUT so); and libseccomp's own 32-bit
// comparison (SCMP_A*_32) still wants the high half zero. Masks (clone's
// flags, mmap's, open's) read only the bits they name already.
scmp_arg_cmp int_eq(unsigned arg, scmp_datum_t value) {
    return scmp_arg_cmp{arg, SCMP_CMP_MASKED_EQ, 0xffffffffULL, value};
}

struct Filter {
    scmp_filter_ctx ctx;
    explicit Filter(scmp_filter_ctx c) : ctx(c) {}
    ~Filter() { seccomp_release(ctx); }
    void deny(int syscall, int err = EPERM) { check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), syscall, 0), syscall); }
    void allow(int syscall) { check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, syscall, 0), syscall); }
    void allow_if(int syscall, scmp_arg_cmp cmp) { check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, syscall, 1, cmp), syscall); }
    void deny_if(int syscall, int err, scmp_arg_cmp cmp) {
        check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), syscall, 1, cmp), syscall);
    }
    static void check(int rc, int syscall) {
        if (rc != 0) {
            char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, syscall);
            const std::string what = name ? name : std::to_string(syscall);
            std::free(name);
            throw std::runtime_error("seccomp rule for " + what + ": " + std::strerror(-rc));
        }
    }
};

// cachestat(2) (Linux 6.5), by number: older libseccomp headers lack its name.
constexpr int kCachestat = 451;
// SO_PASSPIDFD and SO_PEERPIDFD (Linux 6.5), by number: older C library headers lack them.
constexpr scmp_datum_t kSoPassPidfd = 76, kSoPeerPidfd = 77;

constexpr unsigned long kNewNamespaces[] = {CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWPID,   CLONE_NEWNET,
                                            CLONE_NEWUTS, CLONE_NEWIPC,  CLONE_NEWCGROUP};

void add_rules(Filter& f) {
    // Namespaces and mounts: the sandbox's view of the machine is final.
    for (int s : {SCMP_SYS(unshare), SCMP_SYS(setns), SCMP_SYS(mount), SCMP_SYS(umount2), SCMP_SYS(pivot_root),
                  SCMP_SYS(chroot), SCMP_SYS(open_tree), SCMP_SYS(move_mount), SCMP_SYS(fsopen),
                  SCMP_SYS(fsconfig), SCMP_SYS(fsmount), SCMP_SYS(fspick), SCMP_SYS(mount_setattr)})
        f.deny(s);
    for (unsigned long flag : kNewNamespaces) f.deny_if(SCMP_SYS(clone), EPERM, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
    f.deny(SCMP_SYS(clone3), ENOSYS);
    // The CPUs it was confined to stay its CPUs.
    f.deny(SCMP_SYS(sched_setaffinity));
    // Only local sockets.
    f.deny_if(SCMP_SYS(socket), EAFNOSUPPORT, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
    f.deny_if(SCMP_SYS(socketpair), EAFNOSUPPORT, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
    // System V shared memory, queues and semaphores: memory outside the
    // address-space limit (a segment attached only while in use).
    for (int s : {SCMP_SYS(shmget), SCMP_SYS(shmat), SCMP_SYS(shmdt), SCMP_SYS(shmctl), SCMP_SYS(msgget),
                  SCMP_SYS(msgsnd), SCMP_SYS(msgrcv), SCMP_SYS(msgctl), SCMP_SYS(semget), SCMP_SYS(semop),
                  SCMP_SYS(semctl), SCMP_SYS(semtimedop)})
        f.deny(s, ENOSYS);
    // Kernel interfaces an exercise never needs.
    for (int s : {SCMP_SYS(io_uring_setup), SCMP_SYS(io_uring_enter), SCMP_SYS(io_uring_register),
                  SCMP_SYS(perf_event_open), SCMP_SYS(bpf), SCMP_SYS(userfaultfd), SCMP_SYS(keyctl),
                  SCMP_SYS(add_key), SCMP_SYS(request_key), SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv),
                  SCMP_SYS(process_vm_writev), SCMP_SYS(kcmp), SCMP_SYS(init_module), SCMP_SYS(finit_module),
                  SCMP_SYS(delete_module), SCMP_SYS(kexec_load), SCMP_SYS(kexec_file_load), SCMP_SYS(reboot),
                  SCMP_SYS(swapon), SCMP_SYS(swapoff), SCMP_SYS(acct), SCMP_SYS(settimeofday),
                  SCMP_SYS(clock_settime), SCMP_SYS(clock_adjtime), SCMP_SYS(adjtimex), SCMP_SYS(quotactl),
                  SCMP_SYS(open_by_handle_at), SCMP_SYS(name_to_handle_at), SCMP_SYS(lookup_dcookie),
                  SCMP_SYS(syslog), SCMP_SYS(fanotify_init)})
        f.deny(s);
    // Ways for two sandboxed processes to signal each other through what
    // they both see (under cuda-emu, kernels in the executor and host code
    // in the worker): file locks, leases and change notices, and the page
    // cache's state (which pages of a shared file are resident, and
    // dropping them again).
    f.deny(SCMP_SYS(flock), ENOLCK);
    for (int cmd : {F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW})
        f.deny_if(SCMP_SYS(fcntl), ENOLCK, int_eq(1, static_cast<scmp_datum_t>(cmd)));
    for (int cmd : {F_SETLEASE, F_GETLEASE, F_NOTIFY})
        f.deny_if(SCMP_SYS(fcntl), EPERM, int_eq(1, static_cast<scmp_datum_t>(cmd)));
    for (int s : {SCMP_SYS(inotify_init), SCMP_SYS(inotify_init1), SCMP_SYS(inotify_add_watch),
                  SCMP_SYS(fanotify_mark), SCMP_SYS(mincore), SCMP_SYS(fadvise64), SCMP_SYS(readahead)})
        f.deny(s, ENOSYS);
    f.deny(kCachestat, ENOSYS);
    for (int s : {SCMP_SYS(preadv2), SCMP_SYS(pwritev2)}) f.deny(s, ENOSYS);  // RWF_NOWAIT: "is it cached?"
    for (int advice : {MADV_COLD, MADV_PAGEOUT})
        f.deny_if(SCMP_SYS(madvise), EPERM, int_eq(2, static_cast<scmp_datum_t>(advice)));
    // A session (or process group) of its own would be a scheduler group of
    // its own where autogroups are on: more of a shared core than the
    // reference gets. bubblewrap's --new-session has made the one it keeps.
    for (int s : {SCMP_SYS(setsid), SCMP_SYS(setpgid)}) f.deny(s);
}

// What host code could read of a kernel's doing.
void add_worker_rules(Filter& f) {
    for (int s : {SCMP_SYS(io_setup), SCMP_SYS(io_destroy), SCMP_SYS(io_submit), SCMP_SYS(io_cancel),
                  SCMP_SYS(io_getevents), SCMP_SYS(io_pgetevents), SCMP_SYS(sysinfo)})
        f.deny(s, ENOSYS);
    // A pidfd's inode number comes from the machine's count of processes
    // and threads ever started (pidfs): a kernel that starts v threads moved
    // it by v for the host to read (attack_pidfs_gemm.cu).
    for (int s : {SCMP_SYS(pidfd_open), SCMP_SYS(pidfd_getfd), SCMP_SYS(pidfd_send_signal)}) f.deny(s, ENOSYS);
    f.deny_if(SCMP_SYS(clone), EPERM, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_PIDFD, CLONE_PIDFD));
    // ... nor the pidfd a local socket hands out (its peer's, or with each
    // message: attack_peerpidfd_gemm.cu, red-team batch 9).
    f.deny_if(SCMP_SYS(getsockopt), ENOPROTOOPT, int_eq(2, kSoPeerPidfd));
    f.deny_if(SCMP_SYS(setsockopt), ENOPROTOOPT, int_eq(2, kSoPassPidfd));
    // Timers the kernel keeps firing while the sandbox is frozen: a million
    // timerfds armed on the graded CPU made it take interrupts all through
    // the reference's timed burst, which ran a third as fast, and a slow
    // submission scored 100/100 (red-team batch 12). What remains (a sleep
    // or a wait with a timeout) fires once per thread, and 64 at most exist.
    for (int s : {SCMP_SYS(timerfd_create), SCMP_SYS(timer_create), SCMP_SYS(setitimer)}) f.deny(s);
    // Nor kernel work that outlives a freeze: epoll instances with millions
    // of watches, passed in a loop of local sockets that only the kernel's
    // garbage collector frees, are torn down by kernel threads after the
    // reply, wherever the scheduler puts them: some of the reference's
    // bursts ran 3-11x slower so (red-team batch 13; best-of-rounds kept
    // one clean burst each time). Nothing an exercise runs uses epoll, and
    // the worker's descriptors are capped at 1024 (exec_child), which caps
    // the descriptors it can have in flight too.
    for (int s : {SCMP_SYS(epoll_create), SCMP_SYS(epoll_create1)}) f.deny(s, ENOSYS);
}

// The kernel executor's allowlist: what loading the program, serving
// launches and running blocks need, and nothing else (anything else answers
// ENOSYS). A list of what may not be done leaves whatever it forgot; this
// one leaves nothing a kernel could change for host code to see beyond its
// own memory, its CPU time and the machine's counters it cannot avoid
// (pidfs's, which host code may not read). In particular no call here makes
// a new inode: no file is created (opens are read-only, and the sandbox has
// no /proc, /dev or /tmp whose lookups would make one), no shared anonymous
// memory (device memory comes from the grader's memory file), no pipe,
// socket, memory file, event or timer descriptor.
void add_executor_allowlist(Filter& f) {
    for (int s : {// memory
                  SCMP_SYS(brk), SCMP_SYS(mprotect), SCMP_SYS(munmap), SCMP_SYS(mremap),
                  // descriptors it has, files it may read
                  SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(pread64),
                  SCMP_SYS(close), SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(statx), SCMP_SYS(lseek),
                  SCMP_SYS(access), SCMP_SYS(faccessat), SCMP_SYS(faccessat2), SCMP_SYS(readlink),
                  SCMP_SYS(readlinkat), SCMP_SYS(getcwd), SCMP_SYS(recvfrom), SCMP_SYS(sendto),
                  SCMP_SYS(recvmsg), SCMP_SYS(sendmsg),
                  // threads, the launch's process, signals, time
                  SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(get_robust_list), SCMP_SYS(rseq),
                  SCMP_SYS(set_tid_address), SCMP_SYS(arch_prctl), SCMP_SYS(sched_yield),
                  SCMP_SYS(sched_getaffinity), SCMP_SYS(wait4), SCMP_SYS(waitid), SCMP_SYS(exit),
                  SCMP_SYS(exit_group), SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn),
                  SCMP_SYS(sigaltstack), SCMP_SYS(restart_syscall), SCMP_SYS(getpid), SCMP_SYS(gettid),
                  SCMP_SYS(getppid), SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid), SCMP_SYS(getegid),
                  SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday), SCMP_SYS(time),
                  SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep), SCMP_SYS(getrandom), SCMP_SYS(prlimit64),
                  SCMP_SYS(getrlimit), SCMP_SYS(uname), SCMP_SYS(tgkill), SCMP_SYS(execve)})
        f.allow(s);
    // Anonymous memory only if private; shared mappings only of a file.
    f.allow_if(SCMP_SYS(mmap), SCMP_A3(SCMP_CMP_MASKED_EQ, MAP_SHARED_VALIDATE, MAP_PRIVATE));
    f.allow_if(SCMP_SYS(mmap), SCMP_A3(SCMP_CMP_MASKED_EQ, MAP_ANONYMOUS, 0));
    // Device memory's pages given back after a launch, and nothing else of fallocate.
    f.allow_if(SCMP_SYS(fallocate),
               int_eq(1, static_cast<scmp_datum_t>(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)));
    // Files read-only, nothing created.
    constexpr scmp_datum_t kWrites = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | (O_TMPFILE & ~O_DIRECTORY);
    f.allow_if(SCMP_SYS(openat), SCMP_A2(SCMP_CMP_MASKED_EQ, kWrites, 0));
    f.allow_if(SCMP_SYS(open), SCMP_A1(SCMP_CMP_MASKED_EQ, kWrites, 0));
    // Threads and the launch's process; no namespace, no pidfd.
    scmp_datum_t clone_denied = CLONE_PIDFD;
    for (unsigned long flag : kNewNamespaces) clone_denied |= flag;
    f.allow_if(SCMP_SYS(clone), SCMP_A0(SCMP_CMP_MASKED_EQ, clone_denied, 0));
    // (clone3, whose flags are out of a filter's reach, answers ENOSYS: the C library falls back to clone.)
    // What the C library and allocator advise (no page-outs: the page
    // cache's state is a channel).
    for (int advice : {MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL, MADV_WILLNEED, MADV_DONTNEED, MADV_FREE,
                       MADV_HUGEPAGE, MADV_NOHUGEPAGE, MADV_DONTDUMP, MADV_DODUMP})
        f.allow_if(SCMP_SYS(madvise), int_eq(2, static_cast<scmp_datum_t>(advice)));
    for (int cmd : {F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC})
        f.allow_if(SCMP_SYS(fcntl), int_eq(1, static_cast<scmp_datum_t>(cmd)));
    f.allow_if(SCMP_SYS(ioctl), int_eq(1, static_cast<scmp_datum_t>(TCGETS)));  // isatty
    for (int opt : {PR_SET_NAME, PR_GET_NAME})
        f.allow_if(SCMP_SYS(prctl), int_eq(0, static_cast<scmp_datum_t>(opt)));
}

}  // namespace

int seccomp_program_fd(SeccompRole role) {
    const bool allowlist = role == SeccompRole::executor;
    scmp_filter_ctx ctx = seccomp_init(allowlist ? SCMP_ACT_ERRNO(ENOSYS) : SCMP_ACT_ALLOW);
    if (!ctx) throw std::runtime_error("seccomp_init failed");
    Filter f(ctx);
    // Another ABI's syscall numbers mean other calls: kill rather than guess.
    Filter::check(seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS), 0);
    if (allowlist) {
        add_executor_allowlist(f);
    } else {
        add_rules(f);
        if (role == SeccompRole::worker) add_worker_rules(f);
    }
    const int fd = memfd_create("memwall-grade-seccomp", MFD_CLOEXEC);
    if (fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
    const int rc = seccomp_export_bpf(ctx, fd);
    if (rc != 0 || lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        throw std::runtime_error(std::string("seccomp_export_bpf: ") + std::strerror(rc ? -rc : errno));
    }
    return fd;
}

}  // namespace mw::grade
