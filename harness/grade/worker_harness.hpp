// The little of the harness a grade worker compiles in when a submission or
// an adapter includes project code written for the harness (a rung's .cpp,
// the model's reference): registration switched off (the worker has no
// registry to join, and a rung registering itself would pull in the whole
// harness), the sources a Problem and seeded inputs need (inputs.cpp,
// registry.cpp), and the two hooks those call that the worker answers
// itself (the GPU count, the allocation tracker). Include it once per
// worker program, before the project sources, from one translation unit:
// it defines functions.
#pragma once

#include <cstdlib>
#include <new>

#include "harness/registry.hpp"
#undef MW_REGISTER_VARIANT
#define MW_REGISTER_VARIANT(id, ...) static_assert(true, "registration is the harness's business")
#undef MW_REGISTER_OP
#define MW_REGISTER_OP(id, ...) static_assert(true, "registration is the harness's business")
#include "harness/inputs.cpp"
#include "harness/registry.cpp"

namespace mw {  // registry.cpp asks these of the GPU backend; the worker has none
int gpu_count() { return 0; }
std::string gpu_absent_reason() { return "the grader's worker runs on the CPU"; }
}  // namespace mw

namespace mw::memtrack {  // Buffer::make allocates through the harness's tracker; the worker has none
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
