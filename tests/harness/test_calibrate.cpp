// Calibration (quick mode): every ceiling is measured and plausible, and the
// JSON form round-trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "harness/ceilings.hpp"

namespace {

TEST(Calibrate, QuickCalibrationMeasuresEveryCeiling) {
    auto c = mw::calibrate_cpu(2, true);
    ASSERT_EQ(c.dram_triad_gbps.size(), 2u);
    for (double g : c.dram_triad_gbps) {
        EXPECT_GT(g, 0.5);
        EXPECT_LT(g, 2000.0);
    }
    EXPECT_GT(mw::peak_gflops(c, "fp32"), 1.0);
    EXPECT_GT(mw::peak_gflops(c, "fp64"), 0.5);
    // fp32 SIMD lanes are twice the fp64 ones: the measured peaks must show it.
    EXPECT_GT(mw::peak_gflops(c, "fp32") / mw::peak_gflops(c, "fp64"), 1.4)
        << "fp32 " << mw::peak_gflops(c, "fp32") << " GFLOP/s, fp64 " << mw::peak_gflops(c, "fp64");
    EXPECT_GT(c.l1_gbps, c.dram_triad_gbps.back());
    // The read roof names the access pattern that won and the pages it read.
    ASSERT_EQ(c.dram_read_by_threads_gbps.size(), 2u);
    EXPECT_TRUE(c.dram_read_method == "4 streams per thread" ||
                c.dram_read_method == "1 stream per thread, software prefetch 16 KiB ahead into L2" ||
                c.dram_read_method == "1 stream per thread, hardware prefetch only")
        << c.dram_read_method;
    EXPECT_NE(c.dram_pages.find("transparent huge pages"), std::string::npos) << c.dram_pages;
    EXPECT_FALSE(c.cache_sweep_1t.empty());
    // A core clock from dependent adds: between 0.5 and 7 GHz on anything
    // real, and a one-thread fp32 peak of 8 to 64 FLOPs per cycle (SSE at
    // one FMA port up to AVX-512 at two) — not the 2x error a guessed ISA
    // width makes on cores that split 512-bit work in halves.
    EXPECT_GT(c.clock_ghz, 0.5);
    EXPECT_LT(c.clock_ghz, 7.0);
    double one = 0;
    for (const auto& p : c.peaks)
        if (p.dtype == "fp32" && p.threads == 1) one = std::max(one, p.gflops);
    EXPECT_GE(one / c.clock_ghz, 7.0) << one << " GFLOP/s at " << c.clock_ghz << " GHz";
    EXPECT_LE(one / c.clock_ghz, 70.0) << one << " GFLOP/s at " << c.clock_ghz << " GHz";
}

// MEMWALL_ISA=avx2 measures the AVX2 peak, as the rungs then run: on a CPU
// with two 256-bit FMA pipes (Zen 4, Xeons) that is 32 fp32 FLOP per cycle
// per core, and the datapath line names 256-bit FMAs.
TEST(Calibrate, Avx2DispatchMeasuresTheAvx2Peak) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2+FMA";
    ::setenv("MEMWALL_ISA", "avx2", 1);
    auto c = mw::calibrate_cpu(1, true);
    ::unsetenv("MEMWALL_ISA");
    double one = 0;
    for (const auto& p : c.peaks) {
        EXPECT_EQ(p.isa.find("avx512"), std::string::npos) << p.isa;
        if (p.dtype == "fp32" && p.threads == 1) one = std::max(one, p.gflops);
    }
    const double per_cycle = one / c.clock_ghz;
    EXPECT_GE(per_cycle, 12.0);  // at least one 256-bit FMA a cycle, give or take noise
    EXPECT_LE(per_cycle, 36.0);  // never above two 256-bit FMA pipes
    EXPECT_NE(mw::fma_datapath(c, per_cycle).find("256-bit FMA"), std::string::npos) << mw::fma_datapath(c, per_cycle);
}

TEST(Calibrate, AnUnknownIsaIsRejectedByName) {
    ::setenv("MEMWALL_ISA", "avx9", 1);
    try {
        mw::calibrate_cpu(1, true);
        ADD_FAILURE() << "MEMWALL_ISA=avx9 was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("avx9"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("avx512, avx2"), std::string::npos) << e.what();
    }
    ::unsetenv("MEMWALL_ISA");
}

TEST(Calibrate, JsonRoundTrip) {
    auto c = mw::calibrate_cpu(1, true);
    auto back = mw::ceilings_from_json(mw::to_json(c));
    EXPECT_EQ(mw::to_json(back), mw::to_json(c));
    EXPECT_DOUBLE_EQ(mw::dram_gbps(back), mw::dram_gbps(c));
    EXPECT_EQ(back.dram_read_method, c.dram_read_method);
    EXPECT_EQ(back.dram_pages, c.dram_pages);
}

TEST(GpuSpecs, KnownGpusAreListed) {
    for (const char* name : {"V100", "A100", "H100", "B200"}) {
        const mw::GpuSpec* s = mw::find_gpu_spec(name);
        ASSERT_NE(s, nullptr) << name;
        EXPECT_GT(s->fp16_tflops, s->fp32_tflops) << name;  // tensor cores beat the FP32 pipes
        EXPECT_GT(s->hbm_gbps, 500) << name;
    }
    EXPECT_EQ(mw::find_gpu_spec("NoSuchGPU 9000"), nullptr);
    // What cudaGetDeviceProperties reports must find the right board.
    const mw::GpuSpec* h100 = mw::find_gpu_spec("NVIDIA H100 80GB HBM3");
    ASSERT_NE(h100, nullptr);
    EXPECT_NE(h100->name.find("SXM"), std::string::npos) << h100->name;
    EXPECT_EQ(mw::find_gpu_spec("NVIDIA L40S"), nullptr);
}

}  // namespace
