// The seccomp filter every sandboxed child of `memwall grade` runs under
// (the compiler, the worker and cuda-emu's kernel executor): bubblewrap loads it (`--seccomp FD`) just
// before it executes the child, so it holds for everything the child and
// its descendants do. Default allow; refused with an error:
//   - new namespaces (unshare, setns, clone with a CLONE_NEW* flag; clone3,
//     whose flags a filter cannot read, answers ENOSYS so that the C
//     library falls back to clone), mounts of any kind, pivot_root, chroot;
//   - sched_setaffinity (a child stays on the CPUs it is graded on);
//   - sockets of any family but AF_UNIX (no raw packet, netlink, vsock...);
//   - io_uring, perf_event_open, bpf, userfaultfd, keyctl and the key
//     syscalls, ptrace and process_vm_{readv,writev}, kernel modules and
//     kexec, and the rest of what administers the machine (reboot, swap,
//     acct, clock and quota changes, handles to files by number).
// Calls from another ABI (32-bit, x32) kill the process.
//
// By role, on top of that (base: nothing more; the compiler's, and a
// worker's on a real GPU, whose driver is not to be second-guessed and
// whose host code may read device memory anyway):
//   - the worker (the submission's host code): no Linux AIO (io_setup's
//     contexts are counted machine-wide), no sysinfo (machine-wide process
//     counts, loads and free memory) and no pidfd, opened or handed out by a
//     socket (pidfs numbers count every
//     process and thread the machine started): what the host could read of
//     a kernel's doing.
// The kernel executor (cuda-emu) is the other way round: default deny
// (ENOSYS), and an allowlist of what loading the program, serving launches
// and running blocks need (seccomp.cpp lists it). Nothing on it makes a new
// inode, whose number a counter of the machine's hands out per CPU: no
// shared anonymous memory (device memory is a memory file of the grader's),
// no file created (opens are read-only), no pipe, socket or event
// descriptor; its sandbox has no /proc, /dev or /tmp.
#pragma once

namespace mw::grade {

enum class SeccompRole { base, worker, executor };

// A new memory file holding the filter as a compiled BPF program, read from
// its start (what bwrap's --seccomp wants). Throws on failure. The caller
// closes it.
int seccomp_program_fd(SeccompRole role = SeccompRole::worker);

}  // namespace mw::grade
