// harness/isa.hpp: pick_kernel returns the AVX-512 or the AVX2 build of a
// kernel as pick() chooses (MEMWALL_ISA=avx2 forces the AVX2 one).
#include <gtest/gtest.h>

#include <cstdlib>

#include "harness/isa.hpp"

namespace {

template <int Lanes> MW_SIMD_INLINE int lanes_times(int x) { return Lanes * x; }

TEST(Isa, PickKernelFollowsTheIsaChoice) {
    if (!mw::isa::has_avx2()) GTEST_SKIP() << "no AVX2+FMA+F16C";
    constexpr auto k = mw::isa::pick_kernel<lanes_times<16>, lanes_times<8>>;
    ::setenv("MEMWALL_ISA", "avx2", 1);
    EXPECT_EQ(k(), mw::isa::on_avx2<lanes_times<8>>);
    EXPECT_EQ(k()(2), 16);
    ::unsetenv("MEMWALL_ISA");
    if (mw::isa::has_avx512()) {
        EXPECT_EQ(k(), mw::isa::on_avx512<lanes_times<16>>);
        EXPECT_EQ(k()(2), 32);
    } else {
        EXPECT_EQ(k(), mw::isa::on_avx2<lanes_times<8>>);
    }
}

}  // namespace
