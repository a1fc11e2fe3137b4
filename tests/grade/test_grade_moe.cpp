// `memwall grade 08` (moe, exercise moe-layer-cpu): a whole MoE layer —
// routing with the stated tie rule (experts 0 and 1 tie on every token),
// dispatch, experts, weighted combine — judged against the moe_layer op's
// fp64 oracle and timed against its sorted_grouped rung. The negative
// controls — weights not renormalized, tokens dropped silently at a capacity,
// the scatter without weights, ties broken toward the higher index — lose
// their points for the right reason; the stub is right but slow; the
// reference solution gets full marks.
#include <gtest/gtest.h>

#include "grade_run.hpp"

namespace {

using namespace grade_test;

const std::string kExercise = kSource + "/levels/08-moe/exercise";

class MoeGradeRejects : public testing::TestWithParam<Control> {};

TEST_P(MoeGradeRejects, LosesItsPointsForTheRightReason) {
    const Control& c = GetParam();
    const GradeRun r = grade_level("08", control(c.file) + " --seed 11 " + c.extra);
    expect_rejected(r, c, "moe-layer-cpu");
}

// 60 correctness points over 7 shapes.
constexpr double kShape = 60.0 / 7 + 1e-9;

INSTANTIATE_TEST_SUITE_P(
    Controls, MoeGradeRejects,
    // With one expert (shape 1) every control is right: renormalizing one
    // weight gives 1 and nothing ties; with k = 1 (shape 3) every weight is 1. A capacity of 1.25 T k / E drops
    // nothing on one expert or where no expert gets past it.
    testing::Values(Control{"moe_weights_not_renormalized.cpp", "elements outside", kShape},
                    Control{"moe_scatter_unweighted.cpp", "elements outside", 2 * kShape},
                    Control{"moe_ties_inconsistent.cpp", "elements outside", 2 * kShape},
                    Control{"moe_dropped_silently.cpp", "elements outside", 5 * kShape}),
    [](const testing::TestParamInfo<Control>& i) { return std::filesystem::path(i.param.file).stem().string(); });

TEST(MoeGrade, NaiveStubIsCorrectButSlow) {
    expect_correct_but_slow(grade_level("08", "--submission " + kExercise + "/moe_layer_cpu.cpp --seed 5"));
}

TEST(MoeGrade, ReferenceSolutionGetsFullMarks) {
    expect_full_marks("08", kExercise + "/solutions/moe_layer_cpu_reference.cpp");
}

}  // namespace
