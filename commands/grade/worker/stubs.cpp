// The engine hooks the worker library's code calls that a grade worker
// answers itself: the GPU count and whether oneDNN loads (registry.cpp asks
// both; the worker runs on the CPU, with no vendor library) and the
// allocation tracker (Buffer::make allocates through it;
// the worker tracks nothing). Part of every libmemwall_worker_*.a, which
// hold project sources with registration off (CMakeLists.txt, "The
// grader's worker libraries").
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <string>

#include "harness/gpu.hpp"
#include "harness/memtrack.hpp"
#include "harness/onednn.hpp"

namespace mw {
int gpu_count() { return 0; }
std::string gpu_absent_reason() { return "the grader's worker runs on the CPU"; }
}  // namespace mw

namespace mw::onednn {
bool available(std::string* why) {
    if (why) *why = "the grader's worker loads no vendor library";
    return false;
}
std::string version() { return ""; }
}  // namespace mw::onednn

namespace mw::memtrack {
void* allocate(std::size_t n, std::size_t align) {
    align = std::max(align, alignof(std::max_align_t));
    void* p = std::aligned_alloc(align, (std::max<std::size_t>(n, 1) + align - 1) / align * align);
    if (!p) throw std::bad_alloc();
    return p;
}
void release(void* p) noexcept { std::free(p); }
// Large buffers: the heap's too (no huge-page advice); student and reference
// code get the same pages.
void* allocate_pages(std::size_t n) { return allocate(n, 64); }
void release_pages(void* p, std::size_t) noexcept { std::free(p); }
}  // namespace mw::memtrack
