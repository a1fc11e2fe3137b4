// The worker program of `memwall grade`: included by exactly one file, an
// exercise's adapter (levels/*/exercise/grade_adapter_*.cpp|cu), which defines
// mw_grade_call() to call the student's function. The grader compiles
// adapter + submission into one executable and runs it as a child process:
//
//   loop: read a command byte on fd 4
//         'R': call mw_grade_call() on the buffers in the shared mapping (fd 3)
//         'P': do nothing (the grader measures the round trip's overhead)
//         'Q' or end of file: exit
//         write one Reply on fd 5
//
// The worker never learns the seed, the oracle or the thresholds; the
// grader checks outputs and inputs in its own process after every reply.
#pragma once

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

#include "harness/grade/grade_protocol.hpp"

namespace mw::grade {

// One call's view of the shared buffers.
struct Call {
    const SharedHeader* header = nullptr;
    unsigned char* base = nullptr;
    // GPU adapters set this from CUDA events; CPU adapters of exercises timed
    // per call (grading "timing": "call") from a clock around the student's call.
    double device_seconds = -1;

    template <class T> const T* in(int i) const { return reinterpret_cast<const T*>(base + header->offset[i]); }
    // Adapters that keep inputs elsewhere (device memory) copy them back here,
    // so the grader's unchanged-input check sees what the submission left.
    template <class T> T* in_mutable(int i) const { return reinterpret_cast<T*>(base + header->offset[i]); }
    template <class T> T* out(int i) const {
        return reinterpret_cast<T*>(base + header->offset[header->n_inputs + i]);
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

inline bool read_full(int fd, void* p, std::size_t n) {
    auto* c = static_cast<char*>(p);
    while (n > 0) {
        const ssize_t r = ::read(fd, c, n);
        if (r <= 0) return false;
        c += r, n -= static_cast<std::size_t>(r);
    }
    return true;
}

inline bool write_full(int fd, const void* p, std::size_t n) {
    auto* c = static_cast<const char*>(p);
    while (n > 0) {
        const ssize_t r = ::write(fd, c, n);
        if (r <= 0) return false;
        c += r, n -= static_cast<std::size_t>(r);
    }
    return true;
}

}  // namespace mw::grade::detail

int main() {
    using namespace mw::grade;
    struct stat st {};
    if (fstat(kShmFd, &st) != 0) {
        std::fprintf(stderr, "memwall grade worker: no shared mapping on fd %d (run me through memwall grade)\n",
                     kShmFd);
        return 3;
    }
    void* base = mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, kShmFd, 0);
    if (base == MAP_FAILED) return 3;
    for (;;) {
        char cmd = 0;
        if (!detail::read_full(kCommandFd, &cmd, 1) || cmd == kQuit) return 0;
        Reply reply;
        if (cmd == kRun) {
            Call call{static_cast<const SharedHeader*>(base), static_cast<unsigned char*>(base)};
            try {
                mw_grade_call(call);
            } catch (const std::exception& e) {
                reply.status = 1;
                std::snprintf(reply.message, sizeof reply.message, "%s", e.what());
            } catch (...) {
                reply.status = 1;
                std::snprintf(reply.message, sizeof reply.message, "an exception that is not a std::exception");
            }
            reply.device_seconds = call.device_seconds;
        }
        std::fflush(stdout);
        if (!detail::write_full(kReplyFd, &reply, sizeof reply)) return 0;
    }
}
