// Tests of the cuda-emu backend (harness/emu): kernels written as CUDA
// sources (tests/emu/*.cu) run on the CPU and match fp64 references; kernels
// that break CUDA's rules either fail a numeric check deterministically or
// throw mw::emu::LaunchError naming kernel, block and thread.
#include <gtest/gtest.h>

#include <cstring>

#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "harness/emu/cuda_emu.hpp"
#include "tests/emu/emu_kernels.hpp"
#include "tests/emu/tensor_core_cases.hpp"

namespace {

std::vector<float> random_vector(std::size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(gen);
    return v;
}

std::vector<double> matmul_ref(const std::vector<float>& A, const std::vector<float>& B, int M, int N, int K) {
    std::vector<double> C(static_cast<std::size_t>(M) * N, 0.0);
    for (int i = 0; i < M; ++i)
        for (int k = 0; k < K; ++k)
            for (int j = 0; j < N; ++j) C[i * N + j] += static_cast<double>(A[i * K + k]) * B[k * N + j];
    return C;
}

// Max |got - ref| over all elements; NaN anywhere counts as infinitely wrong.
double max_abs_error(const std::vector<float>& got, const std::vector<double>& ref) {
    double worst = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        double e = std::abs(static_cast<double>(got[i]) - ref[i]);
        if (std::isnan(e)) return INFINITY;
        worst = std::max(worst, e);
    }
    return worst;
}

// The message names what went wrong, the kernel, the block and the thread.
void expect_launch_error(void (*fn)(), const std::string& kernel, const std::string& what) {
    try {
        fn();
        ADD_FAILURE() << "expected mw::emu::LaunchError mentioning " << what;
    } catch (const mw::emu::LaunchError& e) {
        const std::string msg = e.what();
        std::printf("  [message] %s\n", msg.c_str());
        EXPECT_NE(msg.find(kernel), std::string::npos) << msg;
        EXPECT_NE(msg.find("block ("), std::string::npos) << msg;
        EXPECT_NE(msg.find("thread ("), std::string::npos) << msg;
        EXPECT_NE(msg.find(what), std::string::npos) << msg;
    }
}

const int kOddSizes[] = {1, 7, 33, 127, 129};

TEST(EmuReduce, WarpShuffleRowSumsMatchFp64) {
    for (int cols : {1, 7, 33, 127, 129, 1000}) {
        for (int threads : {32, 96, 256}) {
            const int rows = 5;
            auto x = random_vector(static_cast<std::size_t>(rows) * cols, 1u + cols);
            auto got = emu_test::row_sums(x, rows, cols, threads);
            for (int r = 0; r < rows; ++r) {
                double ref = 0.0;
                for (int c = 0; c < cols; ++c) ref += x[r * cols + c];
                EXPECT_NEAR(got[r], ref, 1e-5 * cols) << "cols=" << cols << " threads=" << threads << " row=" << r;
            }
        }
    }
}

TEST(EmuMatmul, TiledMatchesFp64OnOddShapes) {
    for (int tile : {16, 32}) {
        for (int m : kOddSizes) {
            for (int n : {1, 33, 129}) {
                const int k = m == 1 ? 7 : m;  // K odd too, never a multiple of the tile
                auto A = random_vector(static_cast<std::size_t>(m) * k, 11u + m);
                auto B = random_vector(static_cast<std::size_t>(k) * n, 13u + n);
                auto got = emu_test::tiled_matmul(A, B, m, n, k, tile);
                EXPECT_LE(max_abs_error(got, matmul_ref(A, B, m, n, k)), 1e-5 * k)
                    << "tile=" << tile << " M=" << m << " N=" << n << " K=" << k;
            }
        }
    }
}

TEST(EmuMatmul, TiledMatchesFp64At256) {
    const int n = 256;
    auto A = random_vector(n * n, 3), B = random_vector(n * n, 4);
    auto got = emu_test::tiled_matmul(A, B, n, n, n, 32);
    EXPECT_LE(max_abs_error(got, matmul_ref(A, B, n, n, n)), 1e-4);
}

// The scheduler runs each thread up to its next barrier in thread order, so a
// missing barrier shows on every run: thread 0 reads tile entries that are
// still poison (NaN), or that faster threads have already overwritten.
// A tiled matmul with barrier `missing` (1: after the tile load, 2: before
// the reload) left out is wrong by more than `least_error` on every run.
void expect_missing_barrier_caught(int missing, double least_error, unsigned seed) {
    const int n = 64;
    auto A = random_vector(n * n, seed), B = random_vector(n * n, seed + 1);
    const auto ref = matmul_ref(A, B, n, n, n);
    for (int run = 0; run < 3; ++run) {
        auto got = emu_test::tiled_matmul(A, B, n, n, n, 32, missing);
        EXPECT_GT(max_abs_error(got, ref), least_error) << "barrier " << missing << ", run " << run;
    }
}

TEST(EmuMatmul, MissingBarrierAfterLoadIsCaught) { expect_missing_barrier_caught(1, 1.0, 5); }

TEST(EmuMatmul, MissingBarrierBeforeReloadIsCaught) { expect_missing_barrier_caught(2, 1e-2, 7); }

TEST(EmuMatmul, StaticSharedIsPoisonedBeforeEveryBlock) {
    // Without poisoning, blocks 1 and 2 would see block 0's 1.0f values and
    // sum to 64 -- a missing barrier hidden by stale shared memory.
    std::vector<float> out;
    emu_test::reads_uninitialised_static_shared(out);
    for (int b = 0; b < 3; ++b) EXPECT_TRUE(std::isnan(out[b * 64])) << "block " << b << " thread 0: " << out[b * 64];
}

TEST(EmuSoftmax, OnlineSoftmaxMatchesFp64) {
    for (int cols : {1, 7, 33, 127, 129, 2048}) {
        for (int threads : {32, 128, 1024}) {
            const int rows = 3;
            auto x = random_vector(static_cast<std::size_t>(rows) * cols, 17u + cols, -8.0f, 8.0f);
            auto got = emu_test::online_softmax(x, rows, cols, threads);
            for (int r = 0; r < rows; ++r) {
                double m = -INFINITY, s = 0.0;
                for (int c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(x[r * cols + c]));
                for (int c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
                for (int c = 0; c < cols; ++c) {
                    const double ref = std::exp(x[r * cols + c] - m) / s;
                    ASSERT_NEAR(got[r * cols + c], ref, 1e-6 + 1e-5 * ref)
                        << "cols=" << cols << " threads=" << threads << " row=" << r << " col=" << c;
                }
            }
        }
    }
}

TEST(EmuSharedMemory, DynamicSharedMemoryWorks) {
    for (int n : {1, 7, 33, 127, 129, 1000}) {
        for (int threads : {32, 128}) {
            auto x = random_vector(n, 19u + n);
            auto y = emu_test::reverse_in_blocks(x, threads);
            for (int i = 0; i < n; ++i) {
                const int b0 = i / threads * threads, bn = std::min(threads, n - b0);
                ASSERT_EQ(y[i], x[b0 + bn - 1 - (i - b0)]) << "n=" << n << " i=" << i;
            }
        }
    }
}

TEST(EmuAtomics, ExactCountAcrossBlocksAndWorkers) {
    mw::emu::set_workers(2);
    for (unsigned blocks : {1u, 7u, 129u, 600u}) {
        for (unsigned threads : {1u, 33u, 256u}) {
            auto t = emu_test::count_atomically(blocks, threads);
            const long long n = 1ll * blocks * threads;
            EXPECT_EQ(t.count, n);
            EXPECT_EQ(t.fsum, 0.5 * n);  // exact: halves summed in float stay exact below 2^24
            EXPECT_EQ(t.dsum, 0.5 * n);
            EXPECT_EQ(t.max_seen, static_cast<unsigned>(n - 1));
        }
    }
    mw::emu::set_workers(0);
}

TEST(EmuIndexing, ThreeDimensionalGridsAndBlocks) {
    struct Case { unsigned gx, gy, gz, bx, by, bz; };
    for (Case c : {Case{1, 1, 1, 1, 1, 1}, Case{3, 1, 1, 7, 1, 1}, Case{2, 3, 5, 4, 3, 2}, Case{1, 7, 3, 33, 1, 3},
                   Case{5, 2, 2, 8, 8, 16}}) {
        auto out = emu_test::index_3d(c.gx, c.gy, c.gz, c.bx, c.by, c.bz);
        for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<std::int64_t>(i));
    }
}

TEST(EmuWarp, PrimitivesFollowCudaSemantics) {
    for (int threads : {32, 64, 96}) {
        auto out = emu_test::warp_primitives(threads);
        for (int t = 0; t < threads; ++t) {
            const int lane = t % 32, warp_base = t - lane;
            unsigned ballot = 0;
            for (int l = 0; l < 32; ++l)
                if (l % 3 == 0) ballot |= 1u << l;
            const std::int64_t* o = &out[5 * t];
            EXPECT_EQ(o[0], ballot) << t;
            EXPECT_EQ(o[1], warp_base + (lane & ~7) + ((lane + 3) & 7)) << t;
            EXPECT_EQ(o[2], lane >= 3 ? t - 3 : t) << t;
            const int x = lane ^ 5;  // stays inside its group of 16
            EXPECT_EQ(o[3], warp_base + x) << t;
            EXPECT_EQ(o[4], (threads + 1) / 2) << t;
        }
    }
}

// A kernel that breaks a CUDA rule, the kernel the error names, and what it says.
struct Fault {
    const char* name;
    void (*fn)();
    const char* kernel;
    const char* what;
};

class EmuFaults : public testing::TestWithParam<Fault> {};

TEST_P(EmuFaults, AreThrownNamingTheKernel) {
    expect_launch_error(GetParam().fn, GetParam().kernel, GetParam().what);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, EmuFaults,
    testing::Values(
        Fault{"DivergentBarrier", emu_test::divergent_barrier, "early_return_kernel", "divergent __syncthreads"},
        Fault{"BarriersInDifferentBranches", emu_test::barrier_in_branches, "barrier_in_branches_kernel",
              "divergent __syncthreads"},
        Fault{"ShuffleMaskWithoutCaller", emu_test::shuffle_mask_excludes_caller, "xor_half_mask_kernel",
              "does not include the calling lane"},
        Fault{"ShuffleFromLaneOutsideMask", emu_test::shuffle_reads_outside_mask, "half_mask_kernel",
              "which is not in its mask"},
        Fault{"ShuffleMasksThatDisagree", emu_test::shuffle_masks_differ, "different_masks_kernel",
              "does not match lane"},
        Fault{"ShuffleWaitingForExitedLanes", emu_test::shuffle_after_exit, "shuffle_after_exit_kernel", "exited"}),
    [](const testing::TestParamInfo<Fault>& i) { return std::string(i.param.name); });

TEST(EmuAbortedLaunch, EmulatorStillWorksAfterIt) {
    EXPECT_THROW(emu_test::divergent_barrier(), mw::emu::LaunchError);
    auto x = random_vector(100, 23);
    auto got = emu_test::row_sums(x, 1, 100, 64);
    double ref = 0.0;
    for (float v : x) ref += v;
    EXPECT_NEAR(got[0], ref, 1e-4);
}

// Capture records instead of running; a replay reruns the recorded work with
// the launch arguments of the capture and the host memory of the replay.
TEST(EmuGraph, CapturedWorkRunsOnlyWhenReplayed) {
    const int n = 129;
    const auto r = emu_test::graph_replay(n);
    EXPECT_TRUE(r.capturing_during);
    EXPECT_FALSE(r.capturing_after);
    for (int i = 0; i < n; ++i) {
        ASSERT_EQ(r.after_capture[i], 0.0f) << "element " << i << " changed while the work was being captured";
        ASSERT_EQ(r.after_first[i], 2.0f) << "element " << i << ": (0 + 1) x 2";
        ASSERT_EQ(r.after_second[i], 9.0f) << "element " << i << ": (2 + 1) x 3, the argument captured, not 100";
    }
    EXPECT_EQ(r.legacy_begin, cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(r.sync_copy_in_capture, cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(r.end_after_sync_copy, cudaErrorStreamCaptureInvalidated);
    EXPECT_TRUE(r.broken_graph_null);
    EXPECT_TRUE(r.legacy_launch_threw);
    EXPECT_EQ(r.end_after_legacy_launch, cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(r.copy_after_destroyed_capture, cudaSuccess);
}

#if defined(__SANITIZE_ADDRESS__)
// Device buffers and dynamic shared memory are exact-size heap allocations,
// and fiber switches are announced to ASan, so an overflow is reported where
// it happens, inside the kernel.
TEST(EmuFaultsDeathTest, GlobalOutOfBoundsCaughtByAsan) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(emu_test::global_out_of_bounds(), "heap-buffer-overflow.*global_overflow_kernel");
}
TEST(EmuFaultsDeathTest, DynamicSharedOutOfBoundsCaughtByAsan) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(emu_test::dynamic_shared_out_of_bounds(), "heap-buffer-overflow.*dynamic_shared_overflow_kernel");
}
#endif

TEST(EmuHalf, ConversionsRoundToNearestEven) {
    EXPECT_EQ(__half_as_ushort(__float2half(1.0f)), 0x3c00);
    EXPECT_EQ(__half_as_ushort(__float2half(65504.0f)), 0x7bff);
    EXPECT_EQ(__half_as_ushort(__float2half(65520.0f)), 0x7c00);  // the tie rounds up to inf
    EXPECT_EQ(__half_as_ushort(__float2half(1.0f + 1.0f / 2048)), 0x3c00);  // tie -> even
    EXPECT_EQ(__half_as_ushort(__float2half(1.0f + 3.0f / 2048)), 0x3c02);  // tie -> even (up)
    EXPECT_EQ(__half_as_ushort(__float2half(5.9604645e-08f)), 0x0001);      // smallest subnormal
    EXPECT_EQ(__half2float(__ushort_as_half(0x0001)), 5.9604645e-08f);
    EXPECT_TRUE(std::isnan(__half2float(__float2half(NAN))));
    EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16(1.0f)), 0x3f80);
    EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16(1.00390625f)), 0x3f80);  // tie -> even
    EXPECT_EQ(__bfloat16_as_ushort(__float2bfloat16(1.01171875f)), 0x3f82);  // tie -> even (up)
    EXPECT_EQ(__bfloat162float(__float2bfloat16(-2.5f)), -2.5f);
    EXPECT_TRUE(std::isnan(__bfloat162float(__float2bfloat16(NAN))));
    // Every half round-trips through float.
    for (unsigned u = 0; u < 0x10000; ++u) {
        const __half h = __ushort_as_half(static_cast<unsigned short>(u));
        if (std::isnan(__half2float(h))) continue;
        ASSERT_EQ(__half_as_ushort(__float2half(__half2float(h))), u);
    }
}

// --- tensor cores (kernels/cuda/tensor_core.cuh) ---------------------------------------------
// The checks live in tensor_core_cases.hpp: TensorCoreCuda.* (tests/tensor_core) runs the
// same ones on a GPU, with the same kernels (tensor_core.cu) compiled by nvcc.

TEST(EmuTensorCore, MmaFollowsThePtxFragmentLayouts) { mw::test::tensor_core::check_mma_follows_the_ptx_layouts(); }

TEST(EmuTensorCore, LdmatrixFollowsThePtxLayouts) { mw::test::tensor_core::check_ldmatrix_follows_the_ptx_layouts(); }

TEST(EmuTensorCore, MmaFromLdmatrixFragmentsIsTheProduct) {
    mw::test::tensor_core::check_mma_from_ldmatrix_fragments_is_the_product();
}

TEST(EmuTensorCore, CpAsyncGroupsLandInOrder) { mw::test::tensor_core::check_cp_async_groups_land_in_order(); }

TEST(EmuTensorCore, WmmaIsTheProduct) { mw::test::tensor_core::check_wmma_is_the_product(); }

// Emulator only: the warp matrix API's requirements are checked (a GPU
// gives undefined results): a pointer 2 bytes past 256-bit alignment fails
// the launch, naming the call.
TEST(EmuTensorCore, WmmaRefusesAMisalignedPointer) {
    const std::vector<std::uint16_t> A(256, 0x3f80), B(256, 0x3f80);  // bf16 ones
    try {
        emu_test::wmma_tile(A, B, std::vector<float>(256, 0.0f), 1);
        ADD_FAILURE() << "a misaligned load_matrix_sync ran";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("256-bit aligned"), std::string::npos) << e.what();
    }
}

// Emulator only: a stage read before the wait that completes it is poison
// (0xff bytes, a NaN), not the data a GPU might or might not have delivered.
TEST(EmuTensorCore, CpAsyncReadBeforeItsWaitIsPoison) {
    std::vector<float> in(256, 1.0f);
    const auto out = emu_test::cp_async_stages(in, 16);
    for (int i = 128; i < 256; ++i) {
        std::uint32_t bits;
        std::memcpy(&bits, &out[std::size_t(i)], 4);
        EXPECT_EQ(bits, 0xffffffffu) << "stage 1 read after wait_group 1 only, float " << i - 128;
    }
}

// A benchmark figure, not a pass/fail timing: the 256^3 tiled GEMM (32x32
// tiles, 64 blocks of 1024 fibers, 16 barriers each) under emulation.
TEST(EmuBenchmark, TiledGemm256Seconds) {
    const int n = 256;
    auto A = random_vector(n * n, 29), B = random_vector(n * n, 31);
    emu_test::tiled_matmul(A, B, n, n, n, 32);  // warm: stacks and worker threads exist
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        emu_test::tiled_matmul(A, B, n, n, n, 32);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("cuda-emu: 256x256x256 tiled GEMM (32x32 tiles), %d workers: best of 3 = %.3f s\n",
                mw::emu::workers(), best);
    RecordProperty("tiled_gemm_256_seconds", std::to_string(best));
}

}  // namespace
