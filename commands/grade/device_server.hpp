// The emulated GPU's memory of a submission graded under cuda-emu, held in
// the grader's own process (harness/emu/remote_device.hpp is the wire): the
// submission reaches it only through cudaMemcpy/cudaMemset and its kernels'
// processes, never through a pointer, whatever it does to its own memory.
// The grader stages each call's buffers here itself and reads the outputs
// from here, not from anything the submission's process can write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
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
    // new socket whose client end the worker inherits; the old one is closed.
    int reconnect();
    // The grader's copy of the client end, closed once the worker has its own.
    void close_client();

    // The grader's own access, between calls. alloc: 0 when over the limit;
    // the others: false unless [addr, addr + bytes) lies in one allocation
    // (the submission may have freed it).
    std::uint64_t alloc(std::size_t bytes);
    void free(std::uint64_t addr);
    bool write(std::uint64_t addr, const void* data, std::size_t bytes);
    bool read(std::uint64_t addr, void* out, std::size_t bytes) const;
    bool fill(std::uint64_t addr, unsigned char value, std::size_t bytes);

    // What the submission's process asked of the device since the last take
    // (then reset): kernel launches (a launch's process lists the allocations,
    // reads each, runs the kernel and writes each back), and the bytes its
    // host code read back from device memory outside a launch's fetch
    // (cudaMemcpy device to host). A CUDA exercise's work belongs in kernels:
    // a call that launches nothing, or whose host code reads device memory,
    // computed on the host. This sees the runtime's requests; a process that
    // forges the wire's messages itself can pass for a launch (the limit of
    // an emulator whose kernels run in the submission's own processes).
    struct Traffic {
        std::uint64_t launches = 0, host_read_bytes = 0;
    };
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
    void note_read(const emu::remote::Request& q);  // a launch's fetch, or the host's read
    bool receive_write(int fd, const emu::remote::Request& q, std::int32_t& status);
    unsigned char* span(std::uint64_t addr, std::size_t bytes);  // nullptr unless inside one allocation
    void drop(std::map<std::uint64_t, Block>::iterator it);
    void stop_serving();

    static constexpr std::size_t kMaxAllocations = 1 << 16;
    static constexpr std::size_t kChunk = 1 << 20;  // payloads move through the grader in pieces of this
    std::size_t limit_, used_ = 0;
    std::uint64_t next_;
    Traffic traffic_;
    std::vector<emu::remote::Extent> fetching_;  // a launch's reads still to come, last first
    std::map<std::uint64_t, Block> mem_;                // by address
    std::multimap<std::size_t, std::uint64_t> free_slots_;  // slot bytes -> slot address
    mutable std::mutex m_;
    int server_fd_ = -1, client_fd_ = -1;
    std::thread thread_;
};

}  // namespace mw::grade
