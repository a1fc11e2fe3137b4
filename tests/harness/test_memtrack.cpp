// Peak-heap tracking: a materialized buffer shows up (a std::vector or a
// Buffer), a freed one stops counting, and a window starts at the live size.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "harness/memtrack.hpp"
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

}  // namespace
