// What `memwall grade` and its worker share: the layout of the shared memory
// that carries a call's inputs and outputs, and the messages on the two pipes.
//
// The worker is a separate program (the submission linked with an exercise
// adapter and grade_worker.hpp), started in a fresh process image with
// resource limits. It sees only this mapping: inputs the grader wrote, output
// space the grader poisoned. The oracle and every comparison stay in the
// grader's own address space, computed after the worker has answered.
//
// Plain C++17 and POSIX only: the worker may be compiled by nvcc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mw::grade {

constexpr int kMaxBuffers = 8;  // inputs + outputs of one call
constexpr int kMaxAxes = 8;
constexpr std::size_t kHeaderBytes = 4096;  // buffers start on the next page

// At offset 0 of the mapping; rewritten by the grader before every call, so
// a worker that scribbles on it only confuses itself.
struct SharedHeader {
    std::uint32_t n_inputs = 0, n_outputs = 0, n_axes = 0;
    std::uint64_t offset[kMaxBuffers] = {};  // inputs first, then outputs
    std::uint64_t bytes[kMaxBuffers] = {};
    std::int64_t axes[kMaxAxes] = {};
    char axis_names[kMaxAxes][16] = {};
};

// Grader -> worker, one byte on the command pipe.
enum Command : char { kRun = 'R', kPing = 'P', kQuit = 'Q' };

// Worker -> grader, one fixed-size record on the reply pipe.
struct Reply {
    std::int32_t status = 0;      // 0 = returned normally, 1 = threw (message says what)
    double device_seconds = -1;   // GPU adapters: the call's time from CUDA events
    char message[480] = {};
};

// File descriptors the worker inherits.
constexpr int kShmFd = 3, kCommandFd = 4, kReplyFd = 5;

}  // namespace mw::grade
