// cuda-emu internals shared by the scheduler and the symbol reader.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

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
};

// Reads the ELF symbol table of the module holding `kernel` (once per kernel).
const KernelInfo& kernel_info(const void* kernel);

// This OS thread's copy of module `tls_module`'s thread-local block (nullptr
// when not allocated yet).
char* tls_block(std::size_t tls_module);

}  // namespace mw::emu::detail
