// `memwall grade 05` (checkpointing, exercise checkpointed-step-cpu): graded
// bit for bit against the store_all rung run by the grader on the same
// inputs (grading oracle "reference"), under a memory limit that storing
// every block's activations exceeds at the speed shape, and timed against
// store_all. The negative controls lose their points for the right reason,
// the store-everything stub is right but over the limit, and the reference
// solution (the project's every_k rung) gets full marks.
#include <gtest/gtest.h>

#include "grade_run.hpp"

namespace {

using namespace grade_test;

const std::string kExercise = kSource + "/levels/05-checkpointing/exercise";

GradeRun grade05(const std::string& args) { return grade_level("05", args, "json"); }

class CheckpointingGradeRejects : public testing::TestWithParam<Control> {};

TEST_P(CheckpointingGradeRejects, LosesItsPointsForTheRightReason) {
    const Control& c = GetParam();
    const GradeRun r = grade05(control(c.file) + " --seed 11 " + c.extra);
    expect_rejected(r, c, "checkpointed-step-cpu");
}

// 60 correctness points over 6 shapes.
constexpr double kShape = 60.0 / 6 + 1e-9;

INSTANTIATE_TEST_SUITE_P(
    Controls, CheckpointingGradeRejects,
    testing::Values(  // the shapes of one sequence (tokens = seq: 3 of the 6) sum in store_all's order
        Control{"checkpoint_microbatch_order.cpp", "not bit for bit", 3 * kShape},
        Control{"checkpoint_skips_a_block.cpp", "not bit for bit", 0},
        // A stack of one block has no inner checkpoint to go stale.
        Control{"checkpoint_stale_activation.cpp", "call 2 of 2", kShape},
        // store_all in System V segments (now refused) and the outputs; one
        // block needs no segment.
        Control{"checkpoint_store_all_sysv_shm.cpp", "shmget", kShape}),
    [](const testing::TestParamInfo<Control>& i) { return std::filesystem::path(i.param.file).stem().string(); });

// The stub keeps every block's activations: bit for bit right on every
// correctness shape, and over the memory limit at the speed shape, where
// store_all's L (X + R) is about 3.5x every_k's.
TEST(CheckpointingGrade, StoringEverythingIsRightButOverTheMemoryLimit) {
    const GradeRun r = grade05("--submission " + kExercise + "/checkpointed_step_cpu.cpp --seed 5");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NEAR(points(r.doc, "correctness"), 60, 1e-6) << failures(r.doc);
    const json* speed = find_test(r.doc, "speed");
    ASSERT_NE(speed, nullptr) << r.output;
    EXPECT_EQ((*speed)["score"].get<double>(), 0) << (*speed)["output"];
    EXPECT_FALSE(speed->value("grader_error", false)) << (*speed)["output"];
    EXPECT_TRUE(mentions_any((*speed)["output"].get<std::string>(), "memory limit"))
        << (*speed)["output"];
}

TEST(CheckpointingGrade, ReferenceSolutionGetsFullMarks) {
    expect_full_marks("05", kExercise + "/solutions/checkpointed_step_cpu_reference.cpp");
}

}  // namespace
