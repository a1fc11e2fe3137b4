// Peak-heap tracking: a materialized buffer shows up (a std::vector or a
// Buffer), a freed one stops counting, and a window starts at the live size.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "harness/memtrack.hpp"
#include "harness/timing.hpp"
#include "harness/registry.hpp"

namespace {

TEST(MemTrack, PeakSeesATemporaryBuffer) {
    const std::size_t base = mw::memtrack::reset_peak();
    {
        std::vector<float> scores(4 << 20);  // 16 MiB
        scores[123] = 1.0f;
        EXPECT_GE(mw::memtrack::live_bytes(), base + (16u << 20));
    }
    EXPECT_GE(mw::memtrack::peak_bytes() - base, 16u << 20);
    EXPECT_LT(mw::memtrack::live_bytes(), base + (1u << 20));  // freed again
}

TEST(MemTrack, NewWindowForgetsEarlierPeak) {
    { auto big = std::make_unique<double[]>(1 << 20); big[0] = 1; }
    const std::size_t base = mw::memtrack::reset_peak();
    { auto small = std::make_unique<double[]>(1024); small[0] = 1; }
    EXPECT_LT(mw::memtrack::peak_bytes() - base, 64u << 10);
}

TEST(MemTrack, AlignedAllocationsCount) {
    const std::size_t base = mw::memtrack::reset_peak();
    struct alignas(128) Tile { float v[32]; };
    { std::vector<Tile> tiles(1000); tiles[5].v[0] = 1; }
    EXPECT_GE(mw::memtrack::peak_bytes() - base, 1000u * sizeof(Tile));
}

// Problem buffers and the packed copies variants make are Buffers: a peak
// that missed them would miss most of a variant's memory.
TEST(MemTrack, BuffersAreTracked) {
    const std::size_t base = mw::memtrack::reset_peak();
    {
        mw::Buffer b = mw::Buffer::make("big", mw::DType::f32, 4u << 20);  // 16 MiB
        b.as<float>()[7] = 1;
        EXPECT_GE(mw::memtrack::live_bytes(), base + (16u << 20));
    }
    EXPECT_GE(mw::memtrack::peak_bytes() - base, 16u << 20);
    EXPECT_LT(mw::memtrack::live_bytes(), base + (1u << 20));  // released through the tracker
}

// Large buffers sit on their own 2 MiB-aligned mappings (a huge page can
// only back an aligned 2 MiB range) and count exactly their whole 4 KiB
// pages: no allocator slack inflates a peak.
TEST(MemTrack, LargeBuffersAreHugePageAlignedAndCountedExactly) {
    for (std::size_t bytes : {std::size_t(2) << 20, (std::size_t(33) << 20) + 5, std::size_t(129) << 20}) {
        const std::size_t live = mw::memtrack::live_bytes();
        const std::size_t pages = (bytes + 4095) / 4096 * 4096;
        void* p = mw::memtrack::allocate_pages(bytes);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % (std::size_t(2) << 20), 0u) << bytes;
        EXPECT_EQ(mw::memtrack::live_bytes() - live, pages) << bytes;
        auto* c = static_cast<unsigned char*>(p);
        c[0] = 1, c[bytes - 1] = 2;  // both ends are mapped and writable
        EXPECT_EQ(c[0] + c[bytes - 1], 3);
        mw::memtrack::release_pages(p, bytes);
        EXPECT_EQ(mw::memtrack::live_bytes(), live) << bytes;
    }
    // Buffer::make takes that path from 2 MiB, and the heap's below it.
    mw::Buffer big = mw::Buffer::make("w", mw::DType::u8, std::size_t(3) << 20);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big.data.get()) % (std::size_t(2) << 20), 0u);
    big.data.get()[(std::size_t(3) << 20) - 1] = std::byte{7};
    const std::string mode = mw::memtrack::transparent_hugepages();
    EXPECT_TRUE(mode == "always" || mode == "madvise" || mode == "never" || mode == "unknown") << mode;
}

// The --cold eviction flushes every live page mapping line by line, so the
// list must hold exactly the live ones: a released mapping still listed
// would be flushed after munmap (a crash), a live one missing would stay
// cached between "cold" calls.
TEST(MemTrack, PageMappingsListExactlyTheLiveOnes) {
    auto listed = [](const void* p) {
        for (const auto& [at, bytes] : mw::memtrack::page_mappings())
            if (at == p) return bytes;
        return std::size_t(0);
    };
    const std::size_t bytes = (std::size_t(5) << 20) + 3;
    void* p = mw::memtrack::allocate_pages(bytes);
    EXPECT_EQ(listed(p), (bytes + 4095) / 4096 * 4096);
    mw::evict_cpu_caches();  // flushes it while mapped
    static_cast<unsigned char*>(p)[bytes - 1] = 9;  // still the process's memory
    mw::memtrack::release_pages(p, bytes);
    EXPECT_EQ(listed(p), 0u);
    {
        mw::Buffer w = mw::Buffer::make("w", mw::DType::u8, std::size_t(4) << 20);
        EXPECT_GE(listed(w.data.get()), std::size_t(4) << 20);  // its pages, padding included
        w.data.get()[0] = std::byte{3};
        mw::evict_cpu_caches();
        EXPECT_EQ(w.data.get()[0], std::byte{3});  // flushed lines are written back, not dropped
    }
    mw::evict_cpu_caches();  // nothing released is touched
}


// Kept mappings (the grader's): a released mapping of the same size comes
// back, counted live again and listed again, as its last user left it;
// another size is mapped anew; the live count never includes what is kept;
// past the cap the longest kept is unmapped to make room; a cap of 0 unmaps
// what was kept (its pages no longer resident).
TEST(MemTrack, KeptMappingsComeBackForTheSameSizeOnly) {
    constexpr std::size_t kMiB = std::size_t(1) << 20, kA = 6 * kMiB, kB = 10 * kMiB, kC = 4 * kMiB;
    struct Off {
        ~Off() { mw::memtrack::keep_released_pages(0); }
    } off;
    mw::memtrack::keep_released_pages(kA + kB);
    const std::size_t live = mw::memtrack::live_bytes();
    void* a = mw::memtrack::allocate_pages(kA);
    std::memset(a, 0x5A, kA);
    mw::memtrack::release_pages(a, kA);
    EXPECT_EQ(mw::memtrack::live_bytes(), live) << "a kept mapping is not live";
    void* b = mw::memtrack::allocate_pages(kB);  // another size: a new mapping
    EXPECT_NE(b, a);
    std::memset(b, 0x5B, kB);
    void* a2 = mw::memtrack::allocate_pages(kA);
    EXPECT_EQ(a2, a) << "the kept mapping of that size";
    EXPECT_EQ(mw::memtrack::live_bytes(), live + kA + kB);
    bool listed = false;
    for (auto& [p, n] : mw::memtrack::page_mappings()) listed = listed || (p == a2 && n == kA);
    EXPECT_TRUE(listed) << "handed out again, it is a live mapping (the --cold eviction flushes it)";
    EXPECT_EQ(static_cast<unsigned char*>(a2)[kA - 1], 0x5A) << "kept as it was";
    mw::memtrack::release_pages(a2, kA);
    mw::memtrack::release_pages(b, kB);  // both kept: exactly the cap
    void* c = mw::memtrack::allocate_pages(kC);
    std::memset(c, 0x5C, kC);
    mw::memtrack::release_pages(c, kC);  // kept, and the longest kept (kA) unmapped for it
    void* b2 = mw::memtrack::allocate_pages(kB);
    EXPECT_EQ(static_cast<unsigned char*>(b2)[0], 0x5B) << "kB was kept";
    void* a3 = mw::memtrack::allocate_pages(kA);
    EXPECT_EQ(static_cast<unsigned char*>(a3)[0], 0) << "kA, the longest kept, was unmapped: a fresh mapping reads 0";
    // A second release of a kept mapping (a caller's bug) neither keeps it
    // twice nor unmaps it under the kept list.
    mw::memtrack::release_pages(a3, kA);
    mw::memtrack::release_pages(a3, kA);
    const std::size_t before = mw::memtrack::live_bytes();
    a3 = mw::memtrack::allocate_pages(kA);
    void* other = mw::memtrack::allocate_pages(kA);
    EXPECT_NE(other, a3) << "the same pages handed out twice";
    static_cast<unsigned char*>(a3)[0] = 1;  // still mapped
    mw::memtrack::release_pages(other, kA);
    EXPECT_EQ(mw::memtrack::live_bytes(), before + kA);
    mw::memtrack::release_pages(a3, kA);
    mw::memtrack::release_pages(b2, kB);  // kept are a3 (never written) and b2, kC unmapped for them
    const long long start = mw::memtrack::rss_window_start();
    if (start < 0) return;
    mw::memtrack::keep_released_pages(0);  // the kept ones unmapped
    EXPECT_LE(mw::memtrack::rss_window_start(), start - static_cast<long long>(kB) * 9 / 10)
        << "the kept mappings' pages are still resident";
}

// The resident-set cross-check sees memory the tracker cannot (malloc'd and
// touched: 64 MiB), and a new window forgets it once it is given back.
TEST(MemTrack, ResidentSetGrowthSeesUntrackedMemory) {
    const long long start = mw::memtrack::rss_window_start();
    if (start < 0) GTEST_SKIP() << "/proc/self/clear_refs or /proc/self/status not available";
    constexpr std::size_t kBytes = std::size_t(64) << 20;
    const std::size_t heap = mw::memtrack::reset_peak();
    auto* p = static_cast<unsigned char*>(std::malloc(kBytes));  // not through operator new: untracked
    ASSERT_NE(p, nullptr);
    std::memset(p, 1, kBytes);
    const long long grown = mw::memtrack::rss_growth(start);
    EXPECT_LT(mw::memtrack::peak_bytes() - heap, std::size_t(1) << 20) << "malloc is not the tracker's";
    EXPECT_GE(grown, static_cast<long long>(kBytes) * 9 / 10);
    EXPECT_LE(grown, static_cast<long long>(kBytes) * 3 / 2);
    std::free(p);  // 64 MiB: glibc maps it, and unmaps it here
    const long long again = mw::memtrack::rss_window_start();
    EXPECT_LT(mw::memtrack::rss_growth(again), static_cast<long long>(kBytes) / 4);
}

}  // namespace
