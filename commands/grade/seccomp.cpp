#include "commands/grade/seccomp.hpp"

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace mw::grade {

namespace {

struct Filter {
    scmp_filter_ctx ctx;
    explicit Filter(scmp_filter_ctx c) : ctx(c) {}
    ~Filter() { seccomp_release(ctx); }
    void deny(int syscall, int err = EPERM) { check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), syscall, 0), syscall); }
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
        f.deny_if(SCMP_SYS(fcntl), ENOLCK, SCMP_A1(SCMP_CMP_EQ, static_cast<scmp_datum_t>(cmd)));
    for (int cmd : {F_SETLEASE, F_GETLEASE, F_NOTIFY})
        f.deny_if(SCMP_SYS(fcntl), EPERM, SCMP_A1(SCMP_CMP_EQ, static_cast<scmp_datum_t>(cmd)));
    for (int s : {SCMP_SYS(inotify_init), SCMP_SYS(inotify_init1), SCMP_SYS(inotify_add_watch),
                  SCMP_SYS(fanotify_mark), SCMP_SYS(mincore), SCMP_SYS(fadvise64), SCMP_SYS(readahead)})
        f.deny(s, ENOSYS);
    f.deny(kCachestat, ENOSYS);
    for (int s : {SCMP_SYS(preadv2), SCMP_SYS(pwritev2)}) f.deny(s, ENOSYS);  // RWF_NOWAIT: "is it cached?"
    for (int advice : {MADV_COLD, MADV_PAGEOUT})
        f.deny_if(SCMP_SYS(madvise), EPERM, SCMP_A2(SCMP_CMP_EQ, static_cast<scmp_datum_t>(advice)));
    // A session (or process group) of its own would be a scheduler group of
    // its own where autogroups are on: more of a shared core than the
    // reference gets. bubblewrap's --new-session has made the one it keeps.
    for (int s : {SCMP_SYS(setsid), SCMP_SYS(setpgid)}) f.deny(s);
}

// What host code could read of a kernel's doing, or a kernel leave behind.
void add_role_rules(Filter& f, SeccompRole role) {
    if (role == SeccompRole::base) return;
    for (int s : {SCMP_SYS(io_setup), SCMP_SYS(io_destroy), SCMP_SYS(io_submit), SCMP_SYS(io_cancel),
                  SCMP_SYS(io_getevents), SCMP_SYS(io_pgetevents), SCMP_SYS(sysinfo)})
        f.deny(s, ENOSYS);
    // A pidfd's inode number comes from the machine's count of processes
    // and threads ever started (pidfs): a kernel that starts v threads moved
    // it by v for the host to read (attack_pidfs_gemm.cu).
    for (int s : {SCMP_SYS(pidfd_open), SCMP_SYS(pidfd_getfd), SCMP_SYS(pidfd_send_signal)}) f.deny(s, ENOSYS);
    f.deny_if(SCMP_SYS(clone), EPERM, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_PIDFD, CLONE_PIDFD));
    if (role != SeccompRole::executor) return;
    // A new pipe, socket or memory file takes the next inode number of a
    // counter the machine shares (and a kernel has no use for one).
    for (int s : {SCMP_SYS(pipe), SCMP_SYS(pipe2), SCMP_SYS(socket), SCMP_SYS(socketpair), SCMP_SYS(memfd_create),
                  SCMP_SYS(eventfd), SCMP_SYS(eventfd2), SCMP_SYS(timerfd_create), SCMP_SYS(signalfd),
                  SCMP_SYS(signalfd4), SCMP_SYS(epoll_create), SCMP_SYS(epoll_create1), SCMP_SYS(mq_open)})
        f.deny(s, EMFILE);
}

}  // namespace

int seccomp_program_fd(SeccompRole role) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) throw std::runtime_error("seccomp_init failed");
    Filter f(ctx);
    // Another ABI's syscall numbers mean other calls: kill rather than guess.
    Filter::check(seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS), 0);
    add_rules(f);
    add_role_rules(f, role);
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
