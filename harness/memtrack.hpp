// Heap tracking for "peak memory" figures: the harness replaces the global
// operator new/delete (every std::vector, std::make_unique, ... goes through
// them) and keeps the bytes live and the peak since the last reset. A variant
// that materializes an S x S score matrix shows it here; one that streams
// tiles does not. Memory from malloc() directly, mmap or a library's own
// allocator (OpenBLAS) is not seen.
#pragma once

#include <cstddef>

namespace mw::memtrack {

std::size_t live_bytes();
// Start a new peak window at the current live size; returns that size.
std::size_t reset_peak();
// Highest live size since the last reset_peak().
std::size_t peak_bytes();

}  // namespace mw::memtrack
