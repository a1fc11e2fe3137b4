// The emulated GPU's memory of a submission graded under cuda-emu, held in
// the grader's own process (harness/emu/remote_device.hpp is the wire): the
// submission reaches it only through cudaMemcpy/cudaMemset and its kernels,
// never through a pointer, whatever it does to its own memory. Its kernels
// run in the kernel executor, a second process of the submission's
// executable that the grader starts and that never runs host code: the
// server relays each launch to it with every allocation and takes every
// allocation back. The host learns nothing of a launch: it is answered at
// once and run when the call has returned (the host frozen meanwhile), so
// that neither its outcome nor how long it took reaches host code.
// The grader stages each call's buffers here itself and reads the outputs
// from here, not from anything the submission's process can write.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "harness/emu/remote_device.hpp"

namespace mw::grade {

class DeviceServer {
public:
    explicit DeviceServer(std::size_t limit_bytes);  // at most this much allocated at once
    ~DeviceServer();
    DeviceServer(const DeviceServer&) = delete;
    DeviceServer& operator=(const DeviceServer&) = delete;

    // A fresh device for a (re)started worker: every allocation dropped, a
    // new socket whose client end the worker inherits, and a new one whose
    // other end the kernel executor inherits (executor_end); the old ones
    // are closed.
    int reconnect();
    int executor_end() const { return executor_client_fd_; }
    // The grader's copies of the client ends, closed once the worker and the
    // executor have their own.
    void close_client();
    // Called with true before a launch goes to the executor (false: do not
    // run it) and with false once it is back: the grader freezes the host's
    // processes and thaws the executor's for the kernel, and the reverse
    // after (sandbox.hpp's launch_gate), so that neither runs beside the
    // other to signal it. Dropped by reconnect().
    void set_launch_gate(std::function<bool(bool entering)> gate);

    // Runs what the host queued (launches, and the copies, sets and frees
    // it asked for after one), in order, with at most `seconds` for all of
    // it: false when that ran out (the executor is then cut off, and every
    // later launch fails). The grader calls it when a call has returned.
    bool finish(double seconds);
    // The grader's own access, between calls (each runs the queue first). alloc: 0 when over the limit;
    // the others: false unless [addr, addr + bytes) lies in one allocation
    // (the submission may have freed it).
    std::uint64_t alloc(std::size_t bytes);
    void free(std::uint64_t addr);
    bool write(std::uint64_t addr, const void* data, std::size_t bytes);
    bool read(std::uint64_t addr, void* out, std::size_t bytes);
    bool fill(std::uint64_t addr, unsigned char value, std::size_t bytes);

    // What the submission's process asked of the device since the last take
    // (then reset): kernel launches, and the bytes its host code read back
    // from device memory (cudaMemcpy device to host). A CUDA exercise's work
    // belongs in kernels: a call that launches nothing, or whose host code
    // reads device memory, computed on the host. `launch_errors`: why
    // launches failed (the executor's messages, for the report; the host
    // only learns that one failed).
    // `device_copies`: cudaMemcpy device to device. A copy moves data and
    // computes nothing, but a host that makes one per element transposes
    // with the server's memmove while its kernel does nothing (red-team
    // batch 10): a call may make a few, as honest code does (a scratch copy).
    // Every request counts towards the call it was answered in or, between
    // calls, the next one (a request a call leaves behind is not lost).
    struct Traffic {
        std::uint64_t launches = 0, host_reads = 0, host_read_bytes = 0, device_copies = 0;
        std::string launch_errors;
    };
    static constexpr std::uint64_t kMaxCopiesPerCall = 16;
    Traffic take_traffic();

private:
    // One allocation: zeroed pages (calloc: untouched until written), and
    // the slot of the arena it sits in, reused by the next of the same size.
    struct Block {
        unsigned char* data = nullptr;
        std::size_t bytes = 0;
        std::uint64_t slot = 0;
        std::size_t slot_bytes = 0;
    };
    void serve(int fd);
    bool handle(int fd);
    bool receive_write(int fd, const emu::remote::Request& q, std::int32_t& status);
    // What the host asked for and was answered at once, to run in order
    // when the call returns (or when the host reads device memory back).
    // Launches are never run while the host waits: a host that timed its
    // launches read what its kernels chose to take long over (red-team batch
    // 9: 2 bits a launch, the small shapes' inputs in a call's time).
    struct Pending {
        std::uint32_t op = 0, value = 0;
        std::uint64_t addr = 0, from = 0, bytes = 0;
        std::vector<unsigned char> payload;  // a launch's message, a write's bytes
    };
    void run_pending();  // with flush_m_ held (finish() takes it)
    std::int32_t apply(const Pending& p, bool check_only = false);
    bool enqueue_if_pending(int fd, const emu::remote::Request& q, emu::remote::Response& resp, bool& wire_ok);
    // A launch: relayed to the executor with every allocation; the status
    // (a failure is sticky until the next reconnect).
    std::int32_t launch(const std::vector<unsigned char>& message);
    std::int32_t relay(const std::vector<unsigned char>& message);  // launch() without the gate
    std::int32_t fail_launch(const std::string& why);
    unsigned char* span(std::uint64_t addr, std::size_t bytes);  // nullptr unless inside one allocation
    void drop(std::map<std::uint64_t, Block>::iterator it);
    void stop_serving();

    static constexpr std::size_t kMaxAllocations = 1 << 16;
    static constexpr std::size_t kChunk = 1 << 20;  // payloads move through the grader in pieces of this
    // The most bytes of writes waiting behind a launch (beyond: the write is
    // refused, cudaErrorMemoryAllocation; running the queue early would let
    // the host time its kernels).
    static constexpr std::size_t kMaxPendingBytes = std::size_t(64) << 20;
    // What each queued request counts against that budget at least: a flood
    // of empty sets behind a launch grew the grader by 1.7 GB in 200 s
    // (red-team batch 10); so, at most 2^18 entries.
    static constexpr std::size_t kPendingEntryBytes = 256;
    // The most launches in one call: an exercise's host code makes a few, and
    // every channel a kernel has found to the host so far needed hundreds of
    // launches a call (a few bits each); the cap bounds what any channel not
    // yet found could carry.
    static constexpr std::uint64_t kMaxLaunchesPerCall = 64;
    std::deque<Pending> pending_;
    std::size_t pending_bytes_ = 0;
    // Set by finish's watchdog when the call's time is up: run_pending drops
    // the rest of the queue (any thread's), and finish clears it on return.
    std::atomic<bool> cut_{false};
    std::timed_mutex flush_m_;  // held while the queue runs, and by every request that must keep its order
    static constexpr double kDrainSeconds = 5;  // the queue's time when the grader's own access runs it
    std::size_t limit_, used_ = 0;
    std::uint64_t next_;
    Traffic traffic_;
    bool launch_failed_ = false;  // sticky, as a GPU context's error after a faulting kernel
    std::map<std::uint64_t, Block> mem_;                // by address
    std::multimap<std::size_t, std::uint64_t> free_slots_;  // slot bytes -> slot address
    mutable std::mutex m_;
    int server_fd_ = -1, client_fd_ = -1;
    int executor_fd_ = -1, executor_client_fd_ = -1;
    std::thread thread_;
    std::mutex gate_m_;
    std::function<bool(bool)> gate_;
};

}  // namespace mw::grade
