#include "harness/memtrack.hpp"

#include <malloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace mw::memtrack {

namespace {
std::atomic<std::size_t> g_live{0};
std::atomic<std::size_t> g_peak{0};

void on_alloc(void* p) {
    const std::size_t n = malloc_usable_size(p);
    const std::size_t now = g_live.fetch_add(n, std::memory_order_relaxed) + n;
    std::size_t peak = g_peak.load(std::memory_order_relaxed);
    while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
}
void on_free(void* p) {
    if (p) g_live.fetch_sub(malloc_usable_size(p), std::memory_order_relaxed);
}
void count_alloc(std::size_t n) {
    const std::size_t now = g_live.fetch_add(n, std::memory_order_relaxed) + n;
    std::size_t peak = g_peak.load(std::memory_order_relaxed);
    while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
}

// The live page mappings (allocate_pages), for page_mappings(). The map's
// nodes come from malloc, not the tracked operator new: the bookkeeping
// must not show in the bytes it counts.
template <class T>
struct UntrackedAlloc {
    using value_type = T;
    UntrackedAlloc() = default;
    template <class U>
    UntrackedAlloc(const UntrackedAlloc<U>&) {}
    T* allocate(std::size_t n) {
        if (void* p = std::malloc(n * sizeof(T))) return static_cast<T*>(p);
        throw std::bad_alloc();
    }
    void deallocate(T* p, std::size_t) noexcept { std::free(p); }
    template <class U>
    bool operator==(const UntrackedAlloc<U>&) const { return true; }
};
std::mutex g_maps_mu;
std::map<void*, std::size_t, std::less<>, UntrackedAlloc<std::pair<void* const, std::size_t>>> g_maps;

constexpr std::size_t kPage = 4096, kHuge = std::size_t(2) << 20;
std::size_t whole_pages(std::size_t n) { return ((n ? n : 1) + kPage - 1) / kPage * kPage; }

// Released mappings kept for reuse (keep_released_pages), under g_maps_mu,
// the longest kept first: a fixed array, so that release_pages allocates
// nothing; the bytes it holds and the most it may.
struct Kept {
    void* p;
    std::size_t bytes;
};
std::array<Kept, 32> g_kept;
std::size_t g_n_kept = 0, g_kept_bytes = 0, g_keep_max = 0;

}  // namespace

void* allocate(std::size_t n, std::size_t align) {
    void* p = align <= alignof(std::max_align_t) ? std::malloc(n ? n : 1)
                                                 : std::aligned_alloc(align, ((n ? n : 1) + align - 1) / align * align);
    if (!p) throw std::bad_alloc();
    on_alloc(p);
    return p;
}
void release(void* p) noexcept {
    on_free(p);
    std::free(p);
}

void* allocate_pages(std::size_t bytes) {
    const std::size_t n = whole_pages(bytes);
    void* kept = nullptr;
    {
        const std::lock_guard<std::mutex> lock(g_maps_mu);
        for (std::size_t i = g_n_kept; i-- > 0 && !kept;)  // the latest kept first
            if (g_kept[i].bytes == n) {
                g_maps[g_kept[i].p] = n;  // first: if it throws, the mapping is still kept
                kept = g_kept[i].p;
                std::copy(g_kept.begin() + i + 1, g_kept.begin() + g_n_kept, g_kept.begin() + i);
                --g_n_kept;
                g_kept_bytes -= n;
            }
    }
    if (kept) {  // not cleared: Buffer::make promises no zeros (its small buffers come from malloc)
        count_alloc(n);
        return kept;
    }
    // Map 2 MiB more than asked, then unmap the ragged ends so the start
    // sits on a 2 MiB boundary (mmap alone only promises 4 KiB).
    const std::size_t span = n + kHuge;
    void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    const auto base = reinterpret_cast<std::uintptr_t>(m);
    const std::uintptr_t start = (base + kHuge - 1) / kHuge * kHuge;
    if (start > base) munmap(m, start - base);
    if (base + span > start + n) munmap(reinterpret_cast<void*>(start + n), base + span - (start + n));
    void* p = reinterpret_cast<void*>(start);
    if (huge_pages_advised()) madvise(p, n, MADV_HUGEPAGE);  // advice only: THP "never" refuses it, harmlessly
    count_alloc(n);
    {
        const std::lock_guard<std::mutex> lock(g_maps_mu);
        g_maps[p] = n;
    }
    return p;
}
void release_pages(void* p, std::size_t bytes) noexcept {
    if (!p) return;
    const std::size_t n = whole_pages(bytes);
    g_live.fetch_sub(n, std::memory_order_relaxed);
    {
        const std::lock_guard<std::mutex> lock(g_maps_mu);
        const auto it = g_maps.find(p);
        // Only a live mapping of that size is kept (a second release of the
        // same one, or a wrong size, would hand the same pages out twice).
        const bool live = it != g_maps.end() && it->second == n;
        if (it != g_maps.end()) g_maps.erase(it);
        if (!live && std::any_of(g_kept.begin(), g_kept.begin() + g_n_kept, [p](const Kept& k) { return k.p == p; }))
            return;  // released before, and kept: unmapping it would leave the kept list a hole
        if (live && n <= g_keep_max) {  // kept, the longest kept unmapped to make room
            std::size_t drop = 0;
            while (drop < g_n_kept && (g_n_kept - drop == g_kept.size() || g_kept_bytes + n > g_keep_max)) {
                g_kept_bytes -= g_kept[drop].bytes;
                munmap(g_kept[drop].p, g_kept[drop].bytes);
                ++drop;
            }
            std::copy(g_kept.begin() + drop, g_kept.begin() + g_n_kept, g_kept.begin());
            g_n_kept -= drop;
            g_kept[g_n_kept++] = {p, n};
            g_kept_bytes += n;
            return;
        }
    }
    munmap(p, n);
}

void keep_released_pages(std::size_t max_bytes) {
    const std::lock_guard<std::mutex> lock(g_maps_mu);
    g_keep_max = max_bytes;
    std::size_t drop = 0;
    for (; drop < g_n_kept && g_kept_bytes > g_keep_max; ++drop) {  // the longest kept first
        g_kept_bytes -= g_kept[drop].bytes;
        munmap(g_kept[drop].p, g_kept[drop].bytes);
    }
    std::copy(g_kept.begin() + drop, g_kept.begin() + g_n_kept, g_kept.begin());
    g_n_kept -= drop;
}

std::vector<std::pair<const void*, std::size_t>> page_mappings() {
    const std::lock_guard<std::mutex> lock(g_maps_mu);
    return {g_maps.begin(), g_maps.end()};
}

bool huge_pages_advised() {
    static const bool advised = [] {
        const char* v = std::getenv("MEMWALL_HUGEPAGES");
        return !(v && std::string(v) == "0");
    }();
    return advised;
}

const char* transparent_hugepages() {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    if (!std::getline(f, line)) return "unknown";
    // "always [madvise] never": the bracketed word is the mode in force.
    for (const char* mode : {"always", "madvise", "never"})
        if (line.find(std::string("[") + mode + "]") != std::string::npos) return mode;
    return "unknown";
}

std::size_t live_bytes() { return g_live.load(); }
std::size_t reset_peak() {
    const std::size_t now = g_live.load();
    g_peak.store(now);
    return now;
}
std::size_t peak_bytes() { return g_peak.load(); }

namespace {
// A "VmRSS:"/"VmHWM:" line of /proc/self/status in bytes, or -1.
long long status_kib(const char* key) {
    std::ifstream in("/proc/self/status");
    const std::string k = key;
    for (std::string line; std::getline(in, line);)
        if (line.compare(0, k.size(), k) == 0) return std::strtoll(line.c_str() + k.size(), nullptr, 10) * 1024;
    return -1;
}
}  // namespace

long long rss_window_start() {
    std::ofstream clear("/proc/self/clear_refs");
    if (!(clear << "5" << std::flush)) return -1;
    return status_kib("VmRSS:");
}

long long rss_growth(long long start) {
    const long long hwm = status_kib("VmHWM:");
    return start < 0 || hwm < 0 ? -1 : std::max(0LL, hwm - start);
}

}  // namespace mw::memtrack

using mw::memtrack::allocate;
using mw::memtrack::release;

void* operator new(std::size_t n) { return allocate(n, 0); }
void* operator new[](std::size_t n) { return allocate(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    try { return allocate(n, 0); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    try { return allocate(n, 0); } catch (...) { return nullptr; }
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    try { return allocate(n, static_cast<std::size_t>(a)); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    try { return allocate(n, static_cast<std::size_t>(a)); } catch (...) { return nullptr; }
}
// Every replaceable form is replaced: a form left to the C++ runtime (or to
// AddressSanitizer's) would pair its allocation with our release().
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
