// Running untrusted code for `memwall grade`: the compiler and the worker
// program, each in its own process with limits.
//
// What a child gets: a fresh process image (exec, so none of the grader's
// memory), a minimal environment (no MEMWALL_GRADE_SECRET), its own process
// group (so a timeout kills its threads and children too), RLIMIT_AS, no
// core files, a capped log file for stdout/stderr, and, when the grader runs
// as root (as on Gradescope), the uid/gid of `nobody`, so it cannot read
// root's files (a secret seed file) or ptrace the grader. The grader itself
// is made non-dumpable, so a same-user child cannot read its memory through
// /proc either.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "harness/grade/grade_protocol.hpp"

namespace mw::grade {

struct Limits {
    double wall_s = 60;           // kill after this long
    std::size_t memory_mb = 0;    // RLIMIT_AS; 0 = none (CUDA reserves huge address ranges)
    std::size_t log_mb = 4;       // RLIMIT_FSIZE: stdout/stderr beyond this are cut off
};

// How a child process ended.
struct Exit {
    bool timed_out = false;
    int exit_code = -1;  // when it exited
    int signal = 0;      // when a signal killed it
    std::string describe(double wall_s) const;  // "crashed: SIGSEGV (segmentation fault)"
};

// Runs argv to completion (the compiler). stdout+stderr go to `log`.
Exit run_to_completion(const std::vector<std::string>& argv, const std::filesystem::path& log,
                       const Limits& limits, const std::vector<std::string>& env);

// The shared mapping that carries one call's buffers (a memfd, so that it
// survives the worker's exec).
struct SharedMemory {
    int fd = -1;
    unsigned char* base = nullptr;
    std::size_t size = 0;
    SharedHeader& header() { return *reinterpret_cast<SharedHeader*>(base); }
};
SharedMemory make_shared_memory(std::size_t bytes);
void release(SharedMemory& shm);

// A running worker.
struct Worker {
    pid_t pid = -1;
    int command_fd = -1, reply_fd = -1;
    std::filesystem::path log;
};

// argv[0] is the program to run.
Worker start_worker(const std::vector<std::string>& argv, const SharedMemory& shm, const std::filesystem::path& log,
                    const Limits& limits, const std::vector<std::string>& env);

// One round trip: send `cmd`, wait up to `timeout_s` for the reply. On
// timeout or death the worker is reaped and `exit` says how it ended.
struct CallResult {
    bool ok = false;        // a reply arrived
    Reply reply;
    double wall_s = 0;      // send to reply, as the grader saw it
    Exit exit;              // when !ok
};
CallResult call_worker(Worker& w, Command cmd, double timeout_s);

// Asks the worker to quit, then kills its process group.
void stop_worker(Worker& w);

// The last `max_bytes` of a log file (a child's stdout/stderr).
std::string log_tail(const std::filesystem::path& log, std::size_t max_bytes);

// Makes this process non-dumpable (no /proc/<pid>/mem for same-user children).
void harden_grader();

// Directory for the build, readable by the unprivileged worker.
std::filesystem::path make_temp_dir();

}  // namespace mw::grade
