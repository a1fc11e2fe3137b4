// Heap tracking for "peak memory" figures: the harness replaces the global
// operator new/delete (every std::vector, std::make_unique, ... goes through
// them), and Buffer::make allocates through allocate()/release() below, so
// both are counted in the bytes live and the peak since the last reset. A
// variant that materializes an S x S score matrix shows it here; one that
// streams tiles does not. Memory from malloc()/aligned_alloc() directly, mmap,
// a library's own allocator (OpenBLAS) or a real GPU is not seen: a variant
// declares it in Instance::workspace_bytes.
#pragma once

#include <cstddef>

namespace mw::memtrack {

std::size_t live_bytes();
// Start a new peak window at the current live size; returns that size.
std::size_t reset_peak();
// Highest live size since the last reset_peak().
std::size_t peak_bytes();

// Tracked allocation with the given alignment (0: the default); throws
// std::bad_alloc. Free with release(), never with std::free.
void* allocate(std::size_t bytes, std::size_t align);
void release(void* p) noexcept;

}  // namespace mw::memtrack
