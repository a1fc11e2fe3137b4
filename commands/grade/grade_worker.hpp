// The worker program of `memwall grade`: included by exactly one file, an
// exercise's adapter (levels/*/exercise/grade_adapter_*.cpp|cu), which defines
// mw_grade_call() to call the student's function. The grader compiles
// adapter + submission into one executable and runs it in the sandbox:
//
// Under cuda-emu the same executable is also the kernel executor
// (harness/emu/remote_device.hpp): started with MEMWALL_EMU_EXECUTOR_FD, it
// serves kernel launches and never reaches the loop below.
//
//   loop: read a command byte on fd 4
//         'R': guard the buffers of the shared mapping (fd 3), call
//              mw_grade_call() on them
//         'P': do nothing (the grader's tests that the worker answers)
//         'Q' or end of file: exit
//         write one Reply on fd 5
//
// The worker never learns the seed, the oracle or the thresholds, and nothing
// it reports is trusted: the grader checks outputs, inputs and canaries in its
// own process, and times every call itself. The pipes are read and written
// with raw system calls, so a submission that redefines read() or write()
// changes nothing here.
#pragma once

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

#include "commands/grade/grade_protocol.hpp"
#if defined(MEMWALL_EMU) && MEMWALL_EMU
#include <cstdlib>

#include "harness/emu/remote_device.hpp"
#endif

namespace mw::grade {

// One call's view of the shared buffers.
struct Call {
    const SharedHeader* header = nullptr;
    unsigned char* base = nullptr;

    template <class T> const T* in(int i) const { return reinterpret_cast<const T*>(base + header->offset[i]); }
    // Adapters that keep inputs elsewhere (device memory) copy them back here,
    // so the grader's unchanged-input check sees what the submission left.
    template <class T> T* in_mutable(int i) const { return reinterpret_cast<T*>(base + header->offset[i]); }
    template <class T> T* out(int i) const {
        return reinterpret_cast<T*>(base + header->offset[header->n_inputs + i]);
    }
    // Inputs the grader prepared for this exercise (after the outputs).
    template <class T> const T* extra(int i) const {
        return reinterpret_cast<const T*>(base + header->offset[header->n_inputs + header->n_outputs + i]);
    }
    std::size_t in_bytes(int i) const { return header->bytes[i]; }
    std::size_t out_bytes(int i) const { return header->bytes[header->n_inputs + i]; }
    int axis(const char* name) const {
        for (unsigned a = 0; a < header->n_axes && a < kMaxAxes; ++a)
            if (std::strncmp(header->axis_names[a], name, sizeof header->axis_names[a]) == 0)
                return static_cast<int>(header->axes[a]);
        throw std::runtime_error(std::string("grader sent no shape axis '") + name + "'");
    }
};

}  // namespace mw::grade

// Defined by the exercise adapter.
void mw_grade_call(mw::grade::Call& call);

namespace mw::grade::detail {

// read(2)/write(2) without libc: a submission can define its own read() or
// write(), and even syscall(), but not this.
inline long raw_syscall3(long n, long a, long b, long c) {
#if defined(__x86_64__)
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = n, x0 __asm__("x0") = a, x1 __asm__("x1") = b, x2 __asm__("x2") = c;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
#else
    return ::syscall(n, a, b, c);
#endif
}

// All n bytes at `addr` through read(2) or write(2) (`nr`), retried on EINTR.
inline bool transfer_full(long nr, int fd, long addr, std::size_t n) {
    while (n > 0) {
        const long r = raw_syscall3(nr, fd, addr, static_cast<long>(n));
        if (r == -4) continue;  // EINTR
        if (r <= 0) return false;
        addr += r, n -= static_cast<std::size_t>(r);
    }
    return true;
}
inline bool read_full(int fd, void* p, std::size_t n) { return transfer_full(SYS_read, fd, reinterpret_cast<long>(p), n); }
inline bool write_full(int fd, const void* p, std::size_t n) {
    return transfer_full(SYS_write, fd, reinterpret_cast<long>(p), n);
}

}  // namespace mw::grade::detail

int main() {
    using namespace mw::grade;
#if defined(MEMWALL_EMU) && MEMWALL_EMU
    // Under cuda-emu the grader starts this executable twice: as the worker,
    // and as the kernel executor, which runs launches and nothing else.
    if (const char* fd = std::getenv(mw::emu::remote::kExecutorVariable); fd && *fd) {
        const char* memory = std::getenv(mw::emu::remote::kExecutorMemoryVariable);
        mw::emu::serve_launches(std::atoi(fd), memory && *memory ? std::atoi(memory) : -1);
    }
#endif
    struct stat st {};
    if (fstat(kShmFd, &st) != 0) {
        std::fprintf(stderr, "memwall grade worker: no shared mapping on fd %d (run me through memwall grade)\n",
                     kShmFd);
        return 3;
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, kShmFd, 0);
    if (base == MAP_FAILED) return 3;
    for (;;) {
        char cmd = 0;
        if (!detail::read_full(kCommandFd, &cmd, 1) || cmd == kQuit) return 0;
        Reply reply;
        if (cmd == kRun) {
            auto* b = static_cast<unsigned char*>(base);
            const SharedHeader h = *static_cast<const SharedHeader*>(base);  // a copy the call cannot change
            Call call{static_cast<const SharedHeader*>(base), b};
            try {
                if (h.mapped_bytes > size || !protect_guards(b, h))
                    throw std::runtime_error("the worker could not set up its guard pages");
                mw_grade_call(call);
            } catch (const std::exception& e) {
                reply.status = 1;
                std::snprintf(reply.message, sizeof reply.message, "%s", e.what());
            } catch (...) {
                reply.status = 1;
                std::snprintf(reply.message, sizeof reply.message, "an exception that is not a std::exception");
            }
        }
        std::fflush(stdout);
        if (!detail::write_full(kReplyFd, &reply, sizeof reply)) return 0;
    }
}
