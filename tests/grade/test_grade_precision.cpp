// `memwall grade 04` (precision, exercise int4-gemv-cpu): a lossy exercise,
// judged against the reference rung's contract oracle (y = dequant(Q(W)) x in
// fp64) and timed per call (the grader quantizes W for every call, and the
// submission gets the INT4 form alone: W is withheld). Decode bugs lose their
// points for the right reason, expanding W to fp32 is correct but slow, the
// naive stub is correct but slow, and the reference solution (the project's
// int4_g64_sym rung) gets full marks.
#include <gtest/gtest.h>

#include <tuple>

#include "grade_run.hpp"

namespace {

using namespace grade_test;

const std::string kExercise = kSource + "/levels/04-precision/exercise";

GradeRun grade04(const std::string& args, const std::string& env = "") {
    return grade_level("04", args, "json", env);
}

class PrecisionGradeRejects : public testing::TestWithParam<Control> {};

TEST_P(PrecisionGradeRejects, LosesItsPointsForTheRightReason) {
    const Control& c = GetParam();
    const GradeRun r = grade04(control(c.file) + " --seed 11 " + c.extra);
    expect_rejected(r, c, "int4-gemv-cpu");
}

// 60 correctness points over 7 shapes.
constexpr double kShape = 60.0 / 7 + 1e-9;

INSTANTIATE_TEST_SUITE_P(
    Controls, PrecisionGradeRejects,
    testing::Values(  // n_in = 1: the one weight sits where both packings put it
        Control{"precision_nibble_order.cpp", "elements outside", kShape},
        // Rows of one group (n_in = 1, 7, 33) have one scale anyway.
        Control{"precision_scale_per_row.cpp", "elements outside", 3 * kShape},
        Control{"precision_zero_point.cpp", "elements outside", 0},
        Control{"precision_mutates_scales.cpp", "wrote into its input scales", 0}),
    [](const testing::TestParamInfo<Control>& i) { return std::filesystem::path(i.param.file).stem().string(); });

// A speed control, not a correctness one: building an fp32 copy of W every
// call is right, and slow.
TEST(PrecisionGrade, ExpandingWToFp32IsCorrectButSlow) {
    const GradeRun r = grade04(control("precision_expand_fp32.cpp") + " --seed 3");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NEAR(points(r.doc, "correctness"), 60, 1e-6) << failures(r.doc);
    const json* speed = find_test(r.doc, "speed");
    ASSERT_NE(speed, nullptr);
    print_margin("ratio", (*speed)["speed"]["ratio"].get<double>(), 0.5, true);
    print_margin("speed_points", (*speed)["score"].get<double>(), 20, true);
    EXPECT_LT((*speed)["speed"]["ratio"].get<double>(), 0.5) << (*speed)["output"];
    EXPECT_LT((*speed)["score"].get<double>(), 20) << (*speed)["output"];
}

TEST(PrecisionGrade, NaiveStubIsCorrectButSlow) {
    expect_correct_but_slow(
        grade_level("04", "--submission " + kExercise + "/dequant_gemv_int4_g64_cpu.cpp --seed 5"));
}

TEST(PrecisionGrade, ReferenceSolutionGetsFullMarks) {
    expect_full_marks("04", kExercise + "/solutions/dequant_gemv_int4_g64_cpu_reference.cpp");
}

// W is withheld: the submission's calls get it empty (0 bytes), and x, the
// INT4 payload and its scales whole (an adapter that checks the sizes, in a
// copy of the level without its speed test); without "withheld_inputs" the
// same adapter sees W whole and fails every call.
TEST(PrecisionGrade, TheSubmissionGetsWEmptyAndItsInt4FormWhole) {
    const fs::path dir = fs::temp_directory_path() / ("memwall-levels-w-" + std::to_string(getpid()));
    fs::create_directories(dir / "04-precision");
    std::ifstream in(kSource + "/levels/04-precision/level.json");
    json level = json::parse(in);
    // The level's folder as it is; the adapter from the source tree (the sandboxed compiler sees no /tmp).
    fs::copy(kExercise, dir / "04-precision" / "exercise", fs::copy_options::recursive);
    json& x = level["exercises"][0];
    x["adapter"] = kControls + "/adapter_precision_sizes.cpp";
    x["grading"]["correctness_shapes"] = {"n_out=7,n_in=7,b=1", "n_out=33,n_in=129,b=3"};
    x["grading"].erase("speed_shape");
    for (const bool withheld : {true, false}) {
        if (!withheld) x["grading"].erase("withheld_inputs");
        std::ofstream(dir / "04-precision" / "level.json") << level.dump(2);
        const GradeRun r = grade04("--submission " + kExercise + "/dequant_gemv_int4_g64_cpu.cpp --seed 2",
                                   "MEMWALL_LEVELS_DIR=" + dir.string());
        ASSERT_EQ(r.status, 0) << r.output;
        if (withheld) {
            EXPECT_NEAR(points(r.doc, "correctness"), 60, 1e-6) << failures(r.doc);
        } else {
            EXPECT_EQ(points(r.doc, "correctness"), 0) << failures(r.doc);
            EXPECT_NE(failures(r.doc).find("W arrived with 196 bytes, not 0"), std::string::npos) << failures(r.doc);
        }
    }
    fs::remove_all(dir);
}

// A manifest that asks for an oracle or a timing the grader does not know is
// a usage error naming the valid choices, before anything is compiled.
TEST(PrecisionGrade, ManifestErrorsNameTheValidChoices) {
    const fs::path dir = fs::temp_directory_path() / ("memwall-levels-" + std::to_string(getpid()));
    fs::create_directories(dir / "04-precision");
    std::ifstream in(kSource + "/levels/04-precision/level.json");
    json level = json::parse(in);
    for (auto [key, bad, valid] : {std::tuple{"oracle", "approximate", "exact, contract"},
                                   std::tuple{"timing", "wallclock", "round_trip, call"}}) {
        json l = level;
        l["exercises"][0]["grading"][key] = bad;
        std::ofstream(dir / "04-precision" / "level.json") << l.dump(2);
        const GradeRun r = grade04("--submission " + kExercise + "/dequant_gemv_int4_g64_cpu.cpp --seed 1",
                                   "MEMWALL_LEVELS_DIR=" + dir.string());
        EXPECT_EQ(r.status, 2) << r.output;
        EXPECT_NE(r.output.find(bad), std::string::npos) << r.output;
        EXPECT_NE(r.output.find(valid), std::string::npos) << r.output;
    }
    // An input to withhold that the op does not have (gemv_q's are W and x).
    json l = level;
    l["exercises"][0]["grading"]["withheld_inputs"] = {"W_fp32"};
    std::ofstream(dir / "04-precision" / "level.json") << l.dump(2);
    const GradeRun r = grade04("--submission " + kExercise + "/dequant_gemv_int4_g64_cpu.cpp --seed 1",
                               "MEMWALL_LEVELS_DIR=" + dir.string());
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("withholds input 'W_fp32'"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("valid: W, x"), std::string::npos) << r.output;
    fs::remove_all(dir);
}

}  // namespace
