// `memwall grade 06` (kv-cache, exercise paged-attn-cpu): decode attention
// through a block table, judged against the paged_attn op's fp64 oracle
// (grading oracle "exact": the int8 codes and scales are inputs, so
// attention over code x scale is the op itself, not a lossy contract) and
// timed against the blocks rung. The negative controls — the block table
// read off by one position, stale rows past a sequence's length, a cache
// kept across calls, one int8 scale for the whole pool — lose their points
// for the right reason, the naive stub is right but slow, and the reference
// solution (the project's blocks rung) gets full marks.
#include <gtest/gtest.h>

#include "grade_run.hpp"

namespace {

using namespace grade_test;

const std::string kExercise = kSource + "/levels/06-kv-cache/exercise";

class KvCacheGradeRejects : public testing::TestWithParam<Control> {};

TEST_P(KvCacheGradeRejects, LosesItsPointsForTheRightReason) {
    const Control& c = GetParam();
    const GradeRun r = grade_level("06", control(c.file) + " --seed 11 " + c.extra);
    expect_rejected(r, c, "paged-attn-cpu");
}

// 60 correctness points over 7 shapes, 4 of them fp32.
constexpr double kShape = 60.0 / 7 + 1e-9;

INSTANTIATE_TEST_SUITE_P(
    Controls, KvCacheGradeRejects,
    testing::Values(Control{"paged_off_by_one.cpp", "elements outside", 0},
                    Control{"paged_stale_row.cpp", "elements outside", 0},
                    Control{"paged_cached.cpp", "call 2 of 2", 0},
                    // Only the int8 pools have scales to get wrong.
                    Control{"paged_int8_per_tensor.cpp", "elements outside", 4 * kShape}),
    [](const testing::TestParamInfo<Control>& i) { return std::filesystem::path(i.param.file).stem().string(); });

// The stub: one thread, and every query head of a group reads the group's
// rows itself.
TEST(KvCacheGrade, NaiveStubIsCorrectButSlow) {
    expect_correct_but_slow(grade_level("06", "--submission " + kExercise + "/paged_attn_cpu.cpp --seed 5"));
}

TEST(KvCacheGrade, ReferenceSolutionGetsFullMarks) {
    expect_full_marks("06", kExercise + "/solutions/paged_attn_cpu_reference.cpp");
}

}  // namespace
