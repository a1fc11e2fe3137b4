// cuda-emu internals shared by the scheduler and the symbol reader.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "harness/emu/cuda_emu.hpp"

namespace mw::emu::detail {

// One block-scope `__shared__` array of a kernel: a thread_local static,
// located in the TLS block of module `tls_module` at `offset`.
struct SharedArray {
    std::size_t tls_module = 0;
    std::size_t offset = 0;
    std::size_t size = 0;
    std::string name;
};

struct KernelInfo {
    std::string name;                 // demangled, or "kernel at 0x..." without symbols
    std::vector<SharedArray> shared;  // its static __shared__ arrays
    bool symbols = false;             // false: the binary has no symbol table for it
    std::string ambiguous;            // non-empty: which static has copies no file symbol tells apart
};

// Reads the ELF symbol table of the module holding `kernel` (once per kernel).
const KernelInfo& kernel_info(const void* kernel);

// This OS thread's copy of module `tls_module`'s thread-local block (nullptr
// when not allocated yet).
char* tls_block(std::size_t tls_module);

// Device memory held by another process (remote_device.hpp; remote.cpp):
// on when MEMWALL_EMU_DEVICE_FD names the socket to it.
bool remote_device();
cudaError_t remote_malloc(void** ptr, std::size_t bytes);
cudaError_t remote_free(void* ptr);
cudaError_t remote_copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t remote_set(void* dst, int value, std::size_t bytes);
// Sends the launch to the kernel executor (remote_device.hpp) through the
// device memory's process and waits for it; throws LaunchError.
void remote_launch(const LaunchSpec& spec);
// Runs a launch's blocks in this process (the scheduler).
void run_launch_here(const LaunchSpec& spec);

}  // namespace mw::emu::detail
