// Helpers shared by the `memwall grade` tests: run the grader as a student
// or an instructor would and read back its JSON report.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <ostream>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/spinners.hpp"

namespace grade_test {

using mw::test::SpinnerOnEveryCore;

namespace fs = std::filesystem;
using nlohmann::json;

inline const std::string kSource = MEMWALL_TEST_SOURCE_DIR;
inline const std::string kControls = MEMWALL_GRADE_SUBMISSIONS;
// For a grade of level 01 (two threads by default) whose test asserts
// nothing about speed: a two-thread call beside another test's process
// waits for its core, and the speed phase then runs to its time cap.
inline const std::string kOneThread = " --threads 1";

struct GradeRun {
    int status = -1;
    std::string output;  // stdout + stderr
    json doc;            // the report, when one was written
    double lock_wait_s = 0;  // how long it waited for other grades (the host's grading lock: compiling and timing)
};

// memwall grade <level> <args> --format <format> --out <tmp>; the report is parsed.
inline GradeRun grade_level(const std::string& level, const std::string& args, const std::string& format = "json",
                            const std::string& env = "") {
    static int counter = 0;
    const fs::path out = fs::temp_directory_path() /
                         ("memwall-grade-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".json");
    const std::string cmd = env + " " + MEMWALL_BIN + " grade " + level + " " + args + " --format " + format +
                            " --out " + out.string() + " 2>&1";
    GradeRun r;
    std::array<char, 512> buf{};
    FILE* p = popen(cmd.c_str(), "r");
    while (fgets(buf.data(), buf.size(), p)) r.output += buf.data();
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (fs::exists(out)) {
        std::ifstream in(out);
        if (format == "text") r.output += std::string(std::istreambuf_iterator<char>(in), {});
        else r.doc = json::parse(in);
        if (r.doc.contains("timing_lock")) r.lock_wait_s = r.doc["timing_lock"]["waited_s"].get<double>();
        if (r.doc.contains("build") && r.doc["build"].contains("lock"))  // the compile keeps off others' timing
            r.lock_wait_s += r.doc["build"]["lock"]["waited_s"].get<double>();
        fs::remove(out);
    }
    return r;
}

inline std::string control(const std::string& name) { return "--submission " + kControls + "/" + name; }

inline const json* find_test(const json& doc, const std::string& prefix) {
    for (auto& t : doc["tests"])
        if (t["name"].get<std::string>().rfind(prefix, 0) == 0) return &t;
    return nullptr;
}

inline double points(const json& doc, const std::string& kind) {
    double s = 0;
    for (auto& t : doc["tests"])
        if (t["kind"] == kind) s += t["score"].get<double>();
    return s;
}

// Every failure message, for "rejected for the right reason" checks.
inline std::string failures(const json& doc) {
    std::string s;
    for (auto& t : doc["tests"])
        if (!t["passed"].get<bool>()) s += t["output"].get<std::string>() + "\n";
    return s;
}

// A negative control: the file, a phrase its failure must mention ('|'
// separates phrases any one of which will do), and the
// most it may score (a control that is right on a degenerate shape, such as
// 1 x 1, keeps that shape's points).
struct Control {
    std::string file;
    std::string reason;
    double max_points;
    std::string extra = "";
};

inline void PrintTo(const Control& c, std::ostream* os) { *os << c.file; }

// True if `text` mentions one of the '|'-separated phrases of `reasons`.
inline bool mentions_any(const std::string& text, const std::string& reasons) {
    std::size_t from = 0;
    for (;;) {
        const std::size_t bar = reasons.find('|', from);
        if (text.find(reasons.substr(from, bar - from)) != std::string::npos) return true;
        if (bar == std::string::npos) return false;
        from = bar + 1;
    }
}

// How far a measured figure sits from the threshold its test holds it to,
// printed on a line of its own so that a repeated run's log (ctest
// --output-junit keeps every test's output) shows each test's headroom:
// `headroom` is the distance to the limit as a fraction of the limit,
// positive while the test passes. `below`: the figure must stay under the
// limit (a naive ratio, a time); otherwise it must reach it (a reference's
// ratio against full credit).
inline void print_margin(const std::string& what, double value, double limit, bool below) {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    const double headroom = limit != 0 ? (below ? limit - value : value - limit) / limit : 0;
    std::printf("MARGIN %s.%s %s value=%.4g limit=%.4g headroom=%.3f\n", info ? info->test_suite_name() : "?",
                info ? info->name() : "?", what.c_str(), value, limit, headroom);
    std::fflush(stdout);
}

// How far a grade's time used went past its limit (a call that ran past the
// limit is charged until the grader saw it), against the `allowed`
// overshoot. `never_returns`: the submission's call never returned, so its
// whole limit is used.
inline void expect_stopped_at_limit(const json& doc, double limit_s, double allowed_s, bool never_returns) {
    const double over = doc["time_used_s"].get<double>() - limit_s;
    print_margin("time_past_limit_s", over, allowed_s, true);
    EXPECT_LE(over, allowed_s) << "the grade must stop its calls at the " << limit_s << " s limit";
    if (never_returns) {
        EXPECT_GE(over, -0.05) << "a call that never returns is charged the whole limit";
    }
    EXPECT_NEAR(doc["time_limit_s"].get<double>(), limit_s, 1e-9);
}

// A negative control was graded (exit 0, a report), lost its points, got no
// speed credit, and a failure says why.
inline void expect_rejected(const GradeRun& r, const Control& c, const std::string& exercise) {
    ASSERT_EQ(r.status, 0) << r.output;  // graded, however badly
    ASSERT_TRUE(r.doc.is_object()) << r.output;
    if (!exercise.empty()) {
        EXPECT_EQ(r.doc["exercise"], exercise);
    }
    EXPECT_LE(r.doc["score"].get<double>(), c.max_points) << r.doc.dump(2);
    EXPECT_EQ(points(r.doc, "speed"), 0) << "no speed credit without full correctness";
    EXPECT_TRUE(mentions_any(failures(r.doc), c.reason))
        << "expected a failure mentioning '" << c.reason << "', got:\n" << failures(r.doc);
}

// A correct submission without speed (a naive stub, or an attack that only
// matches one): every correctness point, a ratio far below full credit, and
// no grader error on the way. `max_speed_points`: what such a submission may
// still earn (a naive transpose is only 2-8x slower than a blocked one);
// `max_of_full_credit`: the most its ratio may be as a fraction of the
// level's full-credit ratio — a quarter, so that a level's speed scale
// separates naive from optimized with room for a noisy machine.
inline void expect_correct_but_slow(const GradeRun& r, double max_speed_points = 20, double max_of_full_credit = 0.25) {
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NEAR(points(r.doc, "correctness"), 60, 1e-6) << failures(r.doc);
    const json* speed = find_test(r.doc, "speed");
    ASSERT_NE(speed, nullptr) << r.output;
    EXPECT_FALSE(speed->value("grader_error", false)) << (*speed)["output"];
    ASSERT_TRUE(speed->contains("speed") && (*speed)["speed"].contains("ratio")) << (*speed)["output"];
    ASSERT_TRUE((*speed)["speed"].contains("full_credit_ratio")) << (*speed)["output"];
    const double ratio_limit = max_of_full_credit * (*speed)["speed"]["full_credit_ratio"].get<double>();
    print_margin("naive_ratio", (*speed)["speed"]["ratio"].get<double>(), ratio_limit, true);
    print_margin("naive_speed_points", (*speed)["score"].get<double>(), max_speed_points, true);
    EXPECT_LE((*speed)["speed"]["ratio"].get<double>(), ratio_limit)
        << "the naive stub is not clearly apart from full credit: " << (*speed)["output"];
    EXPECT_LT((*speed)["score"].get<double>(), max_speed_points) << (*speed)["output"];
}

// A reference solution (the project's own rung compiled into a submission)
// has a ratio of ~1 against the variant it is, and full credit starts at
// 0.70 (0.75 at level 03, 0.5-0.6 at the levels whose rung has more to
// win): full marks. A busy machine can spoil one measurement: up to three
// tries, each with its own seed.
inline void expect_full_marks(const std::string& level, const std::string& submission) {
    GradeRun r;
    std::string attempts;  // every attempt's speed verdict, for the failure message
    for (int attempt = 0; attempt < 3; ++attempt) {
        r = grade_level(level, "--submission " + submission + " --seed " + std::to_string(attempt) +
                               " --reference-solution");
        ASSERT_EQ(r.status, 0) << r.output;
        ASSERT_NEAR(points(r.doc, "correctness"), 60, 1e-6) << failures(r.doc);
        const json* speed = find_test(r.doc, "speed");
        attempts += "\n  attempt " + std::to_string(attempt) + ": " + (speed ? (*speed)["output"].dump() : r.output);
        if (speed && speed->contains("speed") && (*speed)["speed"].contains("ratio"))
            print_margin("reference_ratio_attempt" + std::to_string(attempt),
                         (*speed)["speed"]["ratio"].get<double>(),
                         (*speed)["speed"]["full_credit_ratio"].get<double>(), false);
        if (r.doc["score"].get<double>() >= r.doc["max_score"].get<double>() - 1e-6) break;
    }
    EXPECT_NEAR(r.doc["score"].get<double>(), 100, 1e-6) << attempts;
}

}  // namespace grade_test
