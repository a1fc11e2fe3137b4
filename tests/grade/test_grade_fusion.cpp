// `memwall grade 02` (fusion, exercise bias-gelu-ln-cpu): each negative
// control loses its points for the right reason, the naive stub (rung 0 of
// the lesson) is correct but slow, and the reference solution (the project's
// fused rung) gets full marks.
#include <gtest/gtest.h>

#include "grade_run.hpp"

namespace {

using namespace grade_test;

const std::string kExercise = kSource + "/levels/02-fusion/exercise";

GradeRun grade02(const std::string& args) { return grade_level("02", args); }

class FusionGradeRejects : public testing::TestWithParam<Control> {};

TEST_P(FusionGradeRejects, LosesItsPointsForTheRightReason) {
    const Control& c = GetParam();
    const GradeRun r = grade02(control(c.file) + " --seed 11 " + c.extra);
    expect_rejected(r, c, "bias-gelu-ln-cpu");
}

// 60 correctness points over 7 shapes; rows=1,hidden=1 is degenerate (LayerNorm
// of one element is beta whatever came before), so a control that is wrong
// everywhere else may keep that shape's 60/7 points.
constexpr double kOneShape = 60.0 / 7 + 1e-9;

INSTANTIATE_TEST_SUITE_P(
    Controls, FusionGradeRejects,
    testing::Values(Control{"fusion_wrong_eps.cpp", "elements outside", kOneShape},
                    Control{"fusion_no_bias.cpp", "elements outside", kOneShape},
                    // The op and its oracle use the tanh form of GELU; erf is another function.
                    Control{"fusion_gelu_erf.cpp", "elements outside", kOneShape},
                    Control{"fusion_ln_wrong_axis.cpp", "elements outside", kOneShape},
                    // Rows whose length is a multiple of 16 come out right (hidden = 1024, 768).
                    Control{"fusion_partial.cpp", "NaN/Inf", 2 * kOneShape},
                    Control{"fusion_mutates_input.cpp", "wrote into its input x", 0}),
    [](const testing::TestParamInfo<Control>& i) { return std::filesystem::path(i.param.file).stem().string(); });

TEST(FusionGrade, NaiveStubIsCorrectButSlow) {
    expect_correct_but_slow(
        grade_level("02", "--submission " + kExercise + "/bias_gelu_ln_cpu.cpp --seed 5"));
}

TEST(FusionGrade, ReferenceSolutionGetsFullMarks) {
    expect_full_marks("02", kExercise + "/solutions/bias_gelu_ln_cpu_reference.cpp");
}

}  // namespace
