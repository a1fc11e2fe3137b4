// `memwall grade 07` (speculative, exercise spec-round-cpu): one round's
// decision of speculative decoding and the target cache's rollback, judged
// by the accept op on seeded Markov chains — the law of the first two
// sampled tokens by the distribution check (chi-square at alpha 1e-6, both
// tails, every sample counted), the greedy tokens exactly against the
// target alone, each seeded round's decision exactly against the rule — and
// timed against the rejection rung. The negative controls — the three wrong
// rules (always accept; resample from p; the product of the ratios without
// the min), a cache not rolled back, an off-by-one in the accepted prefix, a
// rule that ends the sampling loop early, one that never tests a draft and
// samples the target's own law — lose their points for the right reason;
// the stub (it accepts every draft) is rejected like the first control; the
// reference solution (the project's rule) gets full marks.
#include <gtest/gtest.h>

#include "grade_run.hpp"

namespace {

using namespace grade_test;

const std::string kExercise = kSource + "/levels/07-speculative/exercise";

class SpeculativeGradeRejects : public testing::TestWithParam<Control> {};

TEST_P(SpeculativeGradeRejects, LosesItsPointsForTheRightReason) {
    const Control& c = GetParam();
    const GradeRun r = grade_level("07", control(c.file) + " --seed 11 " + c.extra);
    expect_rejected(r, c, "spec-round-cpu");
}

// 60 correctness points over 6 shapes. Where a control may keep a shape's
// points, the comment says which and why.
constexpr double kShape = 60.0 / 6 + 1e-9;
const std::string kLaw = "do not follow the oracle's distribution|probability 0";
const std::string kTokens = "elements differ";
// A sampled round whose count or *keep is not the rule's ends the loop,
// and a loop that did not finish is an error of the call.
const std::string kShort = "the shape asks for|no samples|broke the sampling loop";

INSTANTIATE_TEST_SUITE_P(
    Controls, SpeculativeGradeRejects,
    testing::Values(Control{"spec_always_accept.cpp", kShort + "|" + kLaw + "|" + kTokens, 0},
                    Control{"spec_resample_from_p.cpp", kLaw, 0},
                    // With k = 1 the product of one ratio is the ratio: u < p/q is the
                    // correct test (shapes 1 and 2).
                    Control{"spec_product_no_min.cpp", kShort + "|" + kLaw, 2 * kShape},
                    // steps = 1 has no round with drafts to roll back (shape 1).
                    Control{"spec_no_rollback.cpp", kShort + "|" + kTokens + "|" + kLaw, 1 * kShape},
                    Control{"spec_off_by_one.cpp", kShort + "|" + kTokens + "|" + kLaw, 1 * kShape},
                    // Ends the sampling loop early: its counts hold fewer than
                    // `samples` pairs.
                    Control{"spec_stops_early.cpp", kShort, 0},
                    // Writes target-law counts into the shared output buffer
                    // itself, then breaks the loop so that they stand.
                    Control{"spec_hijack_counts.cpp", "broke the sampling loop", 0},
                    // A wrong rule that rewrites the worker's tally through its
                    // own operator new, or its own memmove: the grader tallies
                    // from the record of the rule's answers, with its own loops.
                    Control{"spec_tally_via_new.cpp", kLaw, 0},
                    Control{"spec_memmove_interpose.cpp", kLaw, 0},
                    // The target's law without testing a draft: the rounds'
                    // decisions tell, and so does each sampled round.
                    Control{"spec_never_accepts.cpp", "decisions: |" + kShort, 0},
                    // Right only in the rounds it can tell are compared one
                    // by one; every sampled round is held to the rule too.
                    Control{"spec_honest_when_watched.cpp", kShort, 0}),
    [](const testing::TestParamInfo<Control>& i) { return std::filesystem::path(i.param.file).stem().string(); });

// The stub accepts every draft: the first control, as handed out.
TEST(SpeculativeGrade, StubIsRejected) {
    expect_rejected(grade_level("07", "--submission " + kExercise + "/spec_round_cpu.cpp --seed 5"),
                    Control{"spec_round_cpu.cpp", kShort + "|" + kLaw + "|" + kTokens, 0}, "spec-round-cpu");
}

TEST(SpeculativeGrade, ReferenceSolutionGetsFullMarks) {
    expect_full_marks("07", kExercise + "/solutions/spec_round_cpu_reference.cpp");
}

}  // namespace
