// moe_ffn's expert_parallel_overlap rung (optimized/moe/moe_ffn_expert_parallel_overlap.cpp)
// under mpirun (tests/moe/CMakeLists.txt runs this binary with 2 and with 3
// ranks; started alone it skips, never passes):
//
//   MoeOverlapMpi.EqualsOneProcess   at odd token counts (1, 7, 33, 129, 4099: expert
//       blocks long enough to be cut into parts between MPI_Test calls) and
//       chunks 1, 3 and more chunks than a rank has tokens, every rank's y
//       equals, bit for bit, the single-process sorted_grouped layer this
//       rank computes on its own (kernels/moe/dispatch.hpp), and the
//       measuring modes leave the exchange plan as the pipelined call made it.
//   MoeOverlapMpi.BadChunksRefused   chunks = 0 is refused with the value named.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "harness/registry.hpp"
#include "kernels/moe/expert_parallel.hpp"
#include "reference/moe/moe.hpp"

#ifdef MEMWALL_HAVE_MPI
namespace {

using mw::Shape;

Shape ffn_shape(long T, long d, long f, long E, long k, long skew = 0) {
    return {{{"tokens", T}, {"d_model", d}, {"d_ff", f}, {"experts", E}, {"top_k", k}, {"capacity_pct", 0},
             {"skew", skew}}};
}

// The first index where two float arrays differ bit for bit, or -1.
long first_difference(const float* a, const float* b, long n) {
    for (long i = 0; i < n; ++i)
        if (std::memcmp(a + i, b + i, sizeof(float)) != 0) return i;
    return -1;
}

TEST(MoeOverlapMpi, EqualsOneProcess) {
    if (mw::launch_size() < 2) GTEST_SKIP() << "needs `mpirun -n P` with P >= 2";
    const int P = mw::moe::ep::world().size;
    const mw::Op* op = mw::find_op("moe_ffn");
    ASSERT_NE(op, nullptr);
    const std::vector<Shape> shapes = {ffn_shape(1, 7, 9, 3, 2), ffn_shape(7, 33, 65, 5, 2),
                                       ffn_shape(33, 17, 40, 8, 1, 8), ffn_shape(129, 33, 65, 5, 2),
                                       ffn_shape(129, 16, 24, 4, 3, 4),
                                       // over kPollRows rows per expert and chunk: blocks cut into parts
                                       ffn_shape(4099, 8, 16, 2, 2)};
    for (const Shape& s : shapes) {
        if (s["experts"] < P) continue;  // refused by the rung: at most experts ranks
        mw::Problem p = op->make_problem(s, mw::DType::f32, 7);
        const mw::moe::FfnArgs a = mw::moe::ffn_args(p);
        std::vector<float> want(std::size_t(a.T * a.d));
        mw::moe::GroupedBuffers buf;
        mw::moe::sorted_grouped_ffn(a.x, a.experts, a.weights, a.w, a.T, a.k, a.E, -1, want.data(), buf);
        const long per_rank = (a.T + P - 1) / P;
        for (int chunks : {1, 3, int(per_rank) + 2}) {
            mw::moe::ep::OverlapState st;
            for (int call = 0; call < 2; ++call) {  // a second call reuses the buffers
                std::memset(a.y, 0xff, sizeof(float) * std::size_t(a.T * a.d));
                mw::moe::ep::expert_parallel_overlap_ffn(a, chunks, st);
                const long at = first_difference(a.y, want.data(), a.T * a.d);
                EXPECT_EQ(at, -1) << s.str() << " chunks=" << chunks << " call " << call << " rank "
                                  << mw::moe::ep::world().rank << ": y[" << (at < 0 ? 0 : at / a.d) << "]["
                                  << (at < 0 ? 0 : at % a.d) << "] differs";
            }
            // The measuring modes run and leave the plan usable.
            mw::moe::ep::expert_parallel_overlap_ffn(a, chunks, st, mw::moe::ep::OverlapMode::comm_only);
            mw::moe::ep::expert_parallel_overlap_ffn(a, chunks, st, mw::moe::ep::OverlapMode::compute_only);
            mw::moe::ep::expert_parallel_overlap_ffn(a, chunks, st);
            EXPECT_EQ(first_difference(a.y, want.data(), a.T * a.d), -1) << s.str() << " chunks=" << chunks << " after the measuring modes";
        }
    }
}

TEST(MoeOverlapMpi, BadChunksRefused) {
    if (mw::launch_size() < 2) GTEST_SKIP() << "needs `mpirun -n P` with P >= 2";
    mw::Problem p = mw::find_op("moe_ffn")->make_problem(ffn_shape(7, 7, 9, 3, 2), mw::DType::f32, 7);
    mw::moe::ep::OverlapState st;
    try {
        mw::moe::ep::expert_parallel_overlap_ffn(mw::moe::ffn_args(p), 0, st);
        FAIL() << "chunks = 0 was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("chunks = 0"), std::string::npos) << e.what();
    }
}

}  // namespace
#else
TEST(MoeOverlapMpi, NeedsMpi) { GTEST_SKIP() << "built without MPI"; }
#endif
