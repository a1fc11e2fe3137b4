// `memwall grade 03` (layout, exercise transpose-cpu): each negative control
// loses its points for the right reason, the naive stub (rung 0 of the
// lesson) is correct but slow, and the reference solution (the project's
// blocked rung) gets full marks. The CUDA exercise is graded for correctness
// under cuda-emu. The controls are in tests/grade/submissions/.
#include <gtest/gtest.h>

#include <chrono>

#include "grade_run.hpp"

namespace {

using namespace grade_test;

const std::string kExercise = kSource + "/levels/03-layout/exercise";

GradeRun grade03(const std::string& args) { return grade_level("03", args); }

// 60 correctness points over 8 shapes. Shapes with one row (1 x 1, 1 x 1000)
// are degenerate: their transpose is a copy.
constexpr double kShape = 60.0 / 8;
constexpr double kSlack = 1e-9;

class LayoutGradeRejects : public testing::TestWithParam<Control> {};

TEST_P(LayoutGradeRejects, LosesItsPointsForTheRightReason) {
    const Control& c = GetParam();
    const GradeRun r = grade03(control(c.file) + " --seed 11 " + c.extra);
    expect_rejected(r, c, "transpose-cpu");
}

INSTANTIATE_TEST_SUITE_P(
    Controls, LayoutGradeRejects,
    testing::Values(
        // A copy is a transpose only when there is one row.
        Control{"transpose_untransposed.cpp", "elements differ", 2 * kShape + kSlack},
        // Every correctness shape has a partial tile; their elements stay NaN.
        Control{"transpose_full_tiles_only.cpp", "elements differ", kSlack},
        // Writes past the end of `out` on every shape: a crash (the guard page)
        // or a changed canary (the up to 63 bytes of slack before it), not a pass.
        Control{"transpose_unclipped_edges.cpp", "SIGSEGV|wrote past the end of out", kSlack},
        // Right values, stray writes past the end: only the guard page sees them.
        Control{"transpose_pads_output.cpp", "SIGSEGV|wrote past the end of out", kSlack},
        Control{"transpose_mutates_input.cpp", "wrote into its input in", kSlack}),
    [](const testing::TestParamInfo<Control>& i) { return std::filesystem::path(i.param.file).stem().string(); });

// The stray writes of the padding control are its only fault: on every shape
// the guard page or the canaries catch them, none is merely wrong.
TEST(LayoutGrade, WritesPastTheEndAreCrashesOnEveryShape) {
    const GradeRun r = grade03(control("transpose_pads_output.cpp") + " --seed 3");
    ASSERT_EQ(r.status, 0) << r.output;
    int crashed = 0, shapes = 0;
    for (auto& t : r.doc["tests"]) {
        if (t["kind"] != "correctness") continue;
        ++shapes;
        const std::string out = t["output"].get<std::string>();
        EXPECT_FALSE(t["passed"].get<bool>()) << t["name"];
        EXPECT_EQ(out.find("elements differ"), std::string::npos) << t["name"] << ": " << out;
        crashed += mentions_any(out, "SIGSEGV|wrote past the end of out");
    }
    EXPECT_EQ(shapes, 8);
    EXPECT_EQ(crashed, shapes) << failures(r.doc);
}

TEST(LayoutGrade, NaiveStubIsCorrectButSlow) {
    // The naive transpose's ratio to the blocked rung was 0.23-0.36 on the
    // 2-core EPYC Zen 4 guest, 0.13-0.15 on the Cascade Lake guest, 0.16 on
    // the Xeon with a 300 MiB L3, and 0.49-0.52 on the 2-core Zen 3 EPYC
    // (whose DRAM serves the rung's 128-byte pieces slowly: 62 against 126
    // ms at 4096^2): far from full credit but not a quarter of it, as every
    // other level's naive stub is: a transpose does no arithmetic. So speed
    // points start at 0.60 (level.json zero_credit_ratio), 15% above the worst
    // seen, and reach all 40 at 0.75. The naive stub earns under half a point
    // (its ratio under ~0.602), the bound that binds; the ratio's own bound,
    // 0.81 of full credit (0.608), is a little looser.
    expect_correct_but_slow(grade_level("03", "--submission " + kExercise + "/transpose_cpu.cpp --seed 5"), 0.5, 0.81);
}

TEST(LayoutGrade, ReferenceSolutionGetsFullMarks) {
    expect_full_marks("03", kExercise + "/solutions/transpose_cpu_reference.cpp");
}

// --- the CUDA exercise, correctness only, under cuda-emu --------------------------

TEST(LayoutGradeCudaEmu, ReferenceSolutionIsCorrectSpeedNotGraded) {
    const GradeRun r =
        grade03("--submission " + kExercise +
                "/solutions/transpose_cuda_reference.cu --backend cuda-emu --seed 3 --reference-solution");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc["exercise"], "transpose-cuda");
    EXPECT_EQ(r.doc["score"].get<double>(), 60) << failures(r.doc);
    EXPECT_EQ(r.doc["max_score"].get<double>(), 60) << "speed points need a real GPU";
}

TEST(LayoutGradeCudaEmu, MissingSyncthreadsFails) {
    const GradeRun r = grade03(control("transpose_cuda_missing_sync.cu") + " --backend cuda-emu --seed 3");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc["exercise"], "transpose-cuda");
    EXPECT_LE(r.doc["score"].get<double>(), 60.0 / 6 + kSlack) << r.doc.dump(2);  // 1 x 1 may pass
    EXPECT_NE(failures(r.doc).find("elements differ"), std::string::npos) << failures(r.doc);
}

TEST(LayoutGradeCudaEmu, NaiveStubIsCorrect) {
    const GradeRun r = grade03("--submission " + kExercise + "/transpose_cuda.cu --backend cuda-emu --seed 4");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc["exercise"], "transpose-cuda");
    EXPECT_EQ(r.doc["score"].get<double>(), 60) << failures(r.doc);
}

// Red-team batch 10's transpose-cuda attacks on the emulated device.
GradeRun grade03_emu(const std::string& file) { return grade03(control(file) + " --backend cuda-emu --seed 6"); }

TEST(LayoutGradeCudaEmu, TheServersCopiesDoNoExercisesWork) {
    // A kernel that does nothing, one device-to-device copy per element:
    // 60/60 before; now only the 1 x 1 shape's single copy is within the cap.
    const GradeRun r = grade03_emu("attack_emu_d2d_transpose.cu");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_LE(r.doc["score"].get<double>(), 60.0 / 6 + kSlack) << failures(r.doc);
    EXPECT_NE(failures(r.doc).find("device-to-device copies in the call"), std::string::npos) << failures(r.doc);
}

TEST(LayoutGradeCudaEmu, AFloodOfQueuedRequestsIsRefused) {
    // 300000 empty sets behind each launch: refused before the last, or the
    // control zeroes its output. Its kernel is honest: full marks.
    const GradeRun r = grade03_emu("attack_emu_set_flood.cu");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc["score"].get<double>(), 60) << failures(r.doc);
}

TEST(LayoutGradeCudaEmu, QueuedWorkStopsAtTheTimeLimit) {
    // Red-team batch 12: 4800 queued 768 MiB memsets behind one launch ran
    // in the grader's own thread until all were done, however long: 195 s
    // under a 10 s limit. Now the time limit's watchdog stops the queue.
    const auto t0 = std::chrono::steady_clock::now();
    const GradeRun r = grade03(control("attack_emu_set_burn.cu") + " --backend cuda-emu --seed 6 --time-limit 5");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - r.lock_wait_s;
    ASSERT_EQ(r.status, 0) << r.output;
    print_margin("wall_s", s, 60, true);
    EXPECT_LT(s, 60) << "the grade took " << s << " s under a 5 s time limit";
    EXPECT_NE(failures(r.doc).find("time limit"), std::string::npos) << failures(r.doc);
}

TEST(LayoutGradeCudaEmu, EntriesPastTheLoadersEndCopyNothing) {
    // Red-team batch 11: a DT_NEEDED entry after DT_NULL made the grade the
    // grader's error (and, naming a path, had the grader copy a file of its
    // choosing into the kernels' sandbox). Read as the loader reads it, it
    // names nothing: a normal grade, full marks for the honest kernel.
    const GradeRun r = grade03_emu("attack_emu_dynamic_after_null.cu");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_FALSE(r.doc["grader_error"].get<bool>()) << failures(r.doc);
    EXPECT_EQ(r.doc["score"].get<double>(), 60) << failures(r.doc);
}

TEST(LayoutGradeCudaEmu, ReadsBetweenCallsAreCharged) {
    // A read of device memory as each call returns, answered before the next
    // call returns, counts towards that call or the next: each shape's two
    // calls cannot both be clean.
    const GradeRun r = grade03_emu("attack_emu_read_between_calls.cu");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc["score"].get<double>(), 0) << failures(r.doc);
    EXPECT_NE(failures(r.doc).find("bytes of device memory during the call"), std::string::npos) << failures(r.doc);
}

}  // namespace
