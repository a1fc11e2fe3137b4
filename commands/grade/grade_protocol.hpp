// What `memwall grade` and its workers share: the layout of the shared memory
// that carries a call's buffers, and the messages on the two pipes.
//
// A worker is a separate program: the submission linked with an exercise
// adapter and grade_worker.hpp (run inside the sandbox), or memwall's own
// `grade-worker` (the reference side, outside it). It sees only this mapping:
// inputs the grader wrote, output space the grader poisoned. The oracle, every
// comparison and every clock stay in the grader's own process.
//
// The mapping, in pages of 4 KiB:
//
//   [header] [guard] [gap | buffer 0 | slack] [guard] [gap | buffer 1 | slack] [guard] ...
//
// Each buffer starts on a 64-byte boundary and ends, after at most 63 bytes
// of slack, exactly where a guard page begins, so that the first byte past
// the end of every buffer (inputs, outputs, extras) is within 64 bytes of
// memory a worker cannot touch. The grader fills gaps, slack and guard pages
// with a canary and checks them after every call (a worker that re-opens a
// guard page and writes there is caught too); workers make the guard pages
// inaccessible before each call (protect_guards below), so a read or write
// past the slack is a SIGSEGV.
//
// Plain C++17 and POSIX only: the worker may be compiled by nvcc.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace mw::grade {

constexpr int kMaxBuffers = 8;  // inputs + outputs + extras of one call
constexpr int kMaxAxes = 8;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kHeaderBytes = kPage;  // the first guard page follows
constexpr std::size_t kAlign = 64;
constexpr unsigned char kCanary = 0xA5;

// At offset 0 of the mapping; rewritten by the grader before every call, so
// a worker that scribbles on it only confuses itself.
struct SharedHeader {
    // Buffers in this order: the op's inputs, its outputs, then extras (inputs
    // the grader prepared for this exercise, e.g. packed quantized weights).
    std::uint32_t n_inputs = 0, n_outputs = 0, n_extras = 0, n_axes = 0;
    std::uint64_t offset[kMaxBuffers] = {};
    std::uint64_t bytes[kMaxBuffers] = {};
    std::uint64_t mapped_bytes = 0;  // the part of the mapping this call's layout uses
    std::int64_t axes[kMaxAxes] = {};
    char axis_names[kMaxAxes][16] = {};
    // Under cuda-emu: where the grader staged each buffer in the emulated
    // device memory it holds (commands/grade/device_server.hpp), so the
    // adapter copies nothing and the grader reads the outputs from there; 0
    // on a real GPU, where the adapter uploads and downloads.
    std::uint64_t device[kMaxBuffers] = {};
};

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// Where a buffer of `bytes` bytes whose area (gap + buffer + slack) begins at
// `area` starts, and where its area ends (the next guard page).
constexpr std::size_t area_bytes(std::size_t bytes) { return round_up(round_up(bytes, kAlign), kPage); }
constexpr std::size_t buffer_start(std::size_t area, std::size_t bytes) {
    return area + area_bytes(bytes) - round_up(bytes, kAlign);
}

// Makes this call's guard pages inaccessible and everything else read-write.
// Returns false if mprotect failed.
inline bool protect_guards(unsigned char* base, const SharedHeader& h) {
    const std::uint32_t n = h.n_inputs + h.n_outputs + h.n_extras;
    if (n > kMaxBuffers || h.mapped_bytes < kHeaderBytes) return false;
    if (mprotect(base + kHeaderBytes, h.mapped_bytes - kHeaderBytes, PROT_READ | PROT_WRITE) != 0) return false;
    if (mprotect(base + kHeaderBytes, kPage, PROT_NONE) != 0) return false;
    for (std::uint32_t i = 0; i < n; ++i) {
        const std::size_t end = h.offset[i] + round_up(h.bytes[i], kAlign);  // a page boundary
        if (end + kPage > h.mapped_bytes || mprotect(base + end, kPage, PROT_NONE) != 0) return false;
    }
    return true;
}

// Grader -> worker, one byte on the command pipe.
enum Command : char { kRun = 'R', kPing = 'P', kQuit = 'Q' };

// Worker -> grader, one fixed-size record on the reply pipe. Nothing in it is
// trusted for grading but the status and the message shown to the student.
struct Reply {
    std::int32_t status = 0;      // 0 = returned normally, 1 = threw (message says what)
    double device_seconds = -1;   // the reference worker's own run() time ("timing": "call"); ignored from submissions
    double waited_seconds = 0;    // and how long its threads waited for a CPU in it (run_queue.hpp); ditto
    char message[480] = {};
};

// File descriptors a worker inherits (kDeviceFd: under cuda-emu only, the
// socket to the emulated device memory; MEMWALL_EMU_DEVICE_FD names it).
constexpr int kShmFd = 3, kCommandFd = 4, kReplyFd = 5, kDeviceFd = 6;

}  // namespace mw::grade
