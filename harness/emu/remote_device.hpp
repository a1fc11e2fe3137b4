// cuda-emu's device memory in another process: the wire between the emulated
// runtime (the client, in the program that runs CUDA host code) and whoever
// holds the device memory (the server: `memwall grade`, for a submission).
//
// Why: in one process, device memory that host code must not touch can only
// be guarded by that process's own page protections, which the process can
// lift again. With MEMWALL_EMU_DEVICE_FD=<fd> in the environment the client
// keeps none of it: device addresses lie in an arena where the client maps
// nothing (a host dereference faults, as on a GPU), cudaMemcpy and cudaMemset are
// requests on the socket (the PCIe bus), and a kernel launch is a request too:
// the kernel (an offset into the executable), its argument bytes and the
// bytes of every __constant__ symbol the host has set. The server hands it,
// with every allocation, to the kernel executor: the same executable started
// by the server with MEMWALL_EMU_EXECUTOR_FD=<fd> (serve_launches), which
// never runs host code and shares nothing with the host's process but what
// the server relays. It runs each launch in a forked child that maps every
// allocation at its address, and sends every allocation back. Whatever the
// host process does to its own memory, the device's contents are only what
// copies and kernels put there. The grader's server answers a launch at
// once and runs it when the call has returned, so that the host learns
// nothing of a kernel, not even how long it took (a failure surfaces as a
// later call's failure, sticky as a GPU context's is).
//
// The arena is at a fixed address, so that the server hands out addresses
// the client can map and the grader can pass device pointers in a call.
//
// Plain C++17 and POSIX only.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace mw::emu::remote {

constexpr std::uintptr_t kArenaBase = 0x200000000000ull;  // 32 TiB: above heaps, below the mmap area
constexpr std::size_t kArenaBytes = std::size_t(1) << 36;  // 64 GiB of device addresses
constexpr std::size_t kPage = 4096;
constexpr const char* kFdVariable = "MEMWALL_EMU_DEVICE_FD";

enum Op : std::uint32_t {
    kAlloc = 1,  // bytes -> addr
    kFree,       // addr
    kWrite,      // addr, bytes, then `bytes` bytes of payload
    kRead,       // addr, bytes -> then `bytes` bytes of payload
    kSet,        // addr, bytes, value
    kCopy,       // addr (to), from, bytes
    kList,       // retired (launches went through the host); answered kInvalidValue
    kLaunch,     // bytes: then `bytes` of launch (LaunchHeader, arguments, symbol writes)
};

constexpr const char* kExecutorVariable = "MEMWALL_EMU_EXECUTOR_FD";
// The executor's device memory: a memory file the server made, which the
// executor maps (shared with each launch's process) at offset
// address - kArenaBase, and whose pages from kArenaBytes on hold a failed
// launch's message. Under grading the executor may not make shared memory of
// its own: a new shared mapping takes an inode number from a counter the
// machine shares, which host code could read.
constexpr const char* kExecutorMemoryVariable = "MEMWALL_EMU_EXECUTOR_MEMORY_FD";
constexpr std::size_t kMessagePages = 2;
constexpr std::size_t kMemoryFileBytes = kArenaBytes + kMessagePages * kPage;
// A launch message's most bytes: arguments (4 KiB on a GPU, 32 KiB since
// Volta) and __constant__ symbols (64 KiB on every GPU), with room.
constexpr std::size_t kMaxLaunchBytes = std::size_t(1) << 20;
constexpr std::size_t kMaxMessageBytes = 4096;  // a failed launch's message
constexpr std::int32_t kLaunchFailure = 719;      // cudaErrorLaunchFailure

// A launch, as the host sends it. Code addresses are offsets from the
// executable's base (the host and the executor run the same executable, each
// at its own address).
struct LaunchHeader {
    std::uint64_t thunk = 0, kernel = 0;
    std::uint64_t data_bytes = 0;  // argument bytes after the header
    std::uint64_t smem_bytes = 0;
    std::uint32_t grid[3] = {}, block[3] = {};
    std::uint32_t n_symbols = 0, pad = 0;  // then n_symbols of (SymbolWrite, its bytes)
};
struct SymbolWrite {
    std::uint64_t offset = 0, bytes = 0;
};

// Server to executor: u64 launch bytes, the launch as the host sent it, u64
// count, count Extents, then each allocation's bytes in that order.
// Executor to server: a LaunchReply, message_bytes of message, then (status
// 0) each allocation's bytes in the same order.
struct LaunchReply {
    std::int32_t status = 0;
    std::uint32_t message_bytes = 0;
};

struct Request {
    std::uint32_t op = 0;
    std::uint32_t value = 0;
    std::uint64_t addr = 0;
    std::uint64_t from = 0;
    std::uint64_t bytes = 0;
};

// status: a cudaError_t value (0 = success).
struct Response {
    std::int32_t status = 0;
    std::uint32_t pad = 0;
    std::uint64_t addr = 0;
    std::uint64_t bytes = 0;
};

struct Extent {
    std::uint64_t addr = 0;
    std::uint64_t bytes = 0;
};

// Where an allocation of `bytes` lands in its slot: the slot's pages hold it
// with its end 0-255 bytes before the next page, which stays unmapped (an
// access one element past the end faults in the kernel's process).
constexpr std::size_t used_bytes(std::size_t bytes) { return ((bytes ? bytes : 1) + 255) / 256 * 256; }
constexpr std::size_t slot_pages_bytes(std::size_t bytes) { return (used_bytes(bytes) + kPage - 1) / kPage * kPage; }

inline bool in_arena(std::uint64_t addr, std::uint64_t bytes) {
    return addr >= kArenaBase && bytes <= kArenaBytes && addr - kArenaBase <= kArenaBytes - bytes;
}

inline bool send_all(int fd, const void* data, std::size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k, n -= static_cast<std::size_t>(k);
    }
    return true;
}

inline bool recv_all(int fd, void* data, std::size_t n) {
    char* p = static_cast<char*>(data);
    while (n > 0) {
        const ssize_t k = ::recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k, n -= static_cast<std::size_t>(k);
    }
    return true;
}

}  // namespace mw::emu::remote

namespace mw::emu {
// The kernel executor's loop (remote.cpp): serves launches on `fd` until the
// server closes it, then exits the process; device memory is `memory_fd`
// (kMemoryFileBytes long). Called by the grade worker's main() when
// MEMWALL_EMU_EXECUTOR_FD is set, before any host code of its own.
[[noreturn]] void serve_launches(int fd, int memory_fd);
}  // namespace mw::emu
