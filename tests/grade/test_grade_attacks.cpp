// `memwall grade` cannot be fooled or escaped: one hostile submission per
// class of attack (submissions/attack_*), each written as a student who has
// read the grader's source would, each rejected or contained for the right
// reason. The classes:
//   1. files of the grader's user read or written;
//   2. speed credit without speed (forged round trips, forged clocks, the
//      reference read or slowed);
//   3. outliving the grade (a setsid() grandchild that rewrites the report);
//   4. no grade at all (signals everywhere, folders where logs once were);
//   5. weak containment (forks, memory summed over processes, threads);
//   6. smaller: writes past an output, a forbidden BLAS, a "CUDA" program
//      that computes on the host, exactness only where it is checked.
// Limits that need a writable cgroup are checked where the grader reports
// one (`sandbox.cgroups`), and skipped, never passed, where it does not.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "grade_run.hpp"

namespace {

using namespace grade_test;

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Processes on this machine whose command line contains `pattern`.
int processes_matching(const std::string& pattern) {
    int n = 0;
    std::error_code ec;
    for (auto& e : fs::directory_iterator("/proc", ec)) {
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::string cmd = slurp(e.path() / "cmdline");
        for (auto& ch : cmd)
            if (ch == '\0') ch = ' ';
        n += cmd.find(pattern) != std::string::npos;
    }
    return n;
}

bool cgroups(const GradeRun& r) { return r.doc.contains("sandbox") && r.doc["sandbox"].value("cgroups", false); }

// --- 1. files -------------------------------------------------------------------------

TEST(GradeAttack, FilesOutsideTheSandboxAreNeitherReadNorWritten) {
    // Named relative to the grader's working folder (this test's): where a
    // worker that shared the grader's folder would find them.
    const fs::path secret = "memwall-grade-attack-secret", written = "memwall-grade-attack-written";
    const std::string text = "secret-" + std::to_string(getpid()) + "-do-not-print";
    fs::remove(written);
    fs::remove(secret);
    std::ofstream(secret) << text << "\n";
    fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write);
    const GradeRun r = grade_level("01", control("attack_files.cpp") + " --seed 4", "json",
                                   "MEMWALL_GRADE_SECRET=" + text);
    const std::string after = slurp(secret);
    fs::remove(secret);
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string report = r.doc.dump();
    EXPECT_NE(failures(r.doc).find("READ memwall-grade-attack-secret: []"), std::string::npos)
        << "the attack ran and read nothing:\n" << failures(r.doc);
    EXPECT_EQ(report.find(text), std::string::npos) << "the secret reached the report";
    EXPECT_EQ(report.find("MEMWALL_GRADE_SECRET="), std::string::npos) << "the grader's environment was read";
    EXPECT_EQ(after, text + "\n") << "the secret file was changed";
    EXPECT_FALSE(fs::exists(written)) << "the submission wrote a file outside its sandbox";
    EXPECT_NE(failures(r.doc).find("SIGABRT"), std::string::npos) << failures(r.doc);
}

// --- 2. speed -------------------------------------------------------------------------

TEST(GradeAttack, DelayedPingsEarnNothing) {
    expect_correct_but_slow(grade_level("01", control("attack_ping_delay.cpp") + " --seed 5"));
}

TEST(GradeAttack, AStoppedClockEarnsNothing) {
    expect_correct_but_slow(grade_level("04", control("attack_clock.cpp") + " --seed 5"));
}

TEST(GradeAttack, NoOtherProcessIsVisible) {
    // It answers wrongly if it sees any process but its sandbox's init and itself.
    const GradeRun r = grade_level("01", control("attack_see_others.cpp") + " --seed 5");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(points(r.doc, "correctness"), 60) << failures(r.doc);
}

TEST(GradeAttack, ABackgroundSpinnerDoesNotSlowTheReference) {
    const GradeRun r = grade_level("01", control("attack_spinner.cpp") + " --seed 5");
    expect_correct_but_slow(r);
    EXPECT_FALSE(r.doc["sandbox"]["left_behind"].get<bool>());
}

// --- 3. outliving the grade -------------------------------------------------------------

TEST(GradeAttack, NothingOutlivesTheGradeOrRewritesItsReport) {
    const fs::path out = "memwall-grade-attack-report.json";  // where the attack writes, relative to the grader
    fs::remove(out);
    const std::string cmd = "MEMWALL_GRADE_SECRET=outlive-secret " + std::string(MEMWALL_BIN) + " grade 01 " +
                            control("attack_outlive.cpp") + " --format json --out " + out.string() + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    std::this_thread::sleep_for(std::chrono::seconds(3));  // the grandchild rewrites every second
    EXPECT_EQ(processes_matching("sleep 3117"), 0) << "a process of the submission outlived the grade";
    const std::string text = slurp(out);
    fs::remove(out);
    const json doc = json::parse(text, nullptr, false);
    ASSERT_TRUE(doc.is_object()) << text;
    EXPECT_EQ(doc.value("schema", ""), "memwall.grade/1") << "the report was rewritten:\n" << text;
    EXPECT_EQ(text.find("stolen"), std::string::npos) << text;
    EXPECT_EQ(points(doc, "correctness"), 60) << failures(doc);
    EXPECT_FALSE(doc["sandbox"]["left_behind"].get<bool>());
}

// --- 4. no grade at all ---------------------------------------------------------------------

TEST(GradeAttack, SignalsAndFoldersCannotStopTheGrade) {
    const GradeRun r = grade_level("01", control("attack_disrupt.cpp") + " --seed 5");
    ASSERT_EQ(r.status, 0) << "a grade is written whatever the submission does\n" << r.output;
    EXPECT_EQ(points(r.doc, "correctness"), 60) << failures(r.doc);
    const json* speed = find_test(r.doc, "speed");
    ASSERT_NE(speed, nullptr);
    EXPECT_FALSE(speed->value("grader_error", false)) << "the reference is out of its reach: " << (*speed)["output"];
    EXPECT_TRUE((*speed)["speed"].contains("ratio")) << (*speed)["output"];
}

// --- 5. containment -----------------------------------------------------------------------------

TEST(GradeAttack, ForksAreCapped) {
    const GradeRun r = grade_level("01", control("attack_forks.cpp") + " --seed 5");
    ASSERT_EQ(r.status, 0) << r.output;
    if (!cgroups(r)) GTEST_SKIP() << "no writable cgroup here: " << r.doc["sandbox"]["description"];
    expect_rejected(r, {"attack_forks.cpp", "cap of 64 processes and threads", 0}, "gemm-cpu");
    const std::string f = failures(r.doc);
    const auto at = f.find("FORKED ");
    ASSERT_NE(at, std::string::npos) << f;
    EXPECT_LT(std::atoi(f.c_str() + at + 7), 64) << f;
}

// A grader without cgroups (any user but root here) still caps processes:
// RLIMIT_NPROC above what the user runs now.
TEST(GradeAttack, ForksAreCappedWithoutCgroupsToo) {
    if (geteuid() != 0 || std::system("command -v setpriv >/dev/null") != 0)
        GTEST_SKIP() << "needs root and setpriv to grade as an unprivileged user";
    const GradeRun r = grade_level("01", control("attack_forks.cpp") + " --seed 5", "json",
                                   "setpriv --reuid=65534 --regid=65534 --clear-groups");
    ASSERT_EQ(r.status, 0) << r.output;
    ASSERT_FALSE(cgroups(r)) << "an unprivileged grader has no cgroup here";
    const std::string f = failures(r.doc);
    const auto at = f.find("FORKED ");
    ASSERT_NE(at, std::string::npos) << f;
    EXPECT_LT(std::atoi(f.c_str() + at + 7), 80) << f;
}

TEST(GradeAttack, MemoryIsLimitedOverAllProcesses) {
    const GradeRun r = grade_level("01", control("attack_memory.cpp") + " --seed 5 --time-limit 30");
    ASSERT_EQ(r.status, 0) << r.output;
    if (!cgroups(r)) GTEST_SKIP() << "no writable cgroup here: " << r.doc["sandbox"]["description"];
    expect_rejected(r, {"attack_memory.cpp", "went over its memory limit (2048 MiB over all of its processes)", 0},
                    "gemm-cpu");
}

TEST(GradeAttack, BackgroundThreadsAreChargedAndStopped) {
    const auto t0 = std::chrono::steady_clock::now();
    const GradeRun r = grade_level("01", control("attack_threads.cpp") + " --seed 5 --time-limit 10");
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_LE(r.doc["time_used_s"].get<double>(), 10.5);
    EXPECT_LT(wall, 90) << "the grade must end near its 10 s limit, compile and reference included";
    EXPECT_FALSE(r.doc["sandbox"]["left_behind"].get<bool>());
    if (cgroups(r)) {
        EXPECT_NE(failures(r.doc).find("cap of 64 processes and threads"), std::string::npos) << failures(r.doc);
    }
}

// --- 6. smaller ------------------------------------------------------------------------------------

TEST(GradeAttack, AWritePastTheOutputIsCaughtOnLevel01) {
    const GradeRun r = grade_level("01", control("attack_write_past_end.cpp") + " --seed 5");
    expect_rejected(r, {"attack_write_past_end.cpp", "wrote past the end of C", 0}, "gemm-cpu");
}

TEST(GradeAttack, BlasIsHidden) {
    const GradeRun r = grade_level("01", control("attack_dlopen_blas.cpp") + " --seed 5");
    expect_rejected(r, {"attack_dlopen_blas.cpp", "cannot load BLAS", 0}, "gemm-cpu");
}

TEST(GradeAttack, HostOnlyCudaFailsUnderTheEmulator) {
    const GradeRun r = grade_level("01", control("attack_host_only.cu") + " --backend cuda-emu --seed 5");
    expect_rejected(r, {"attack_host_only.cu", "SIGSEGV", 0}, "gemm-cuda");
}

TEST(GradeAttack, TimedCallsOfAnExactExerciseAreCheckedExactly) {
    const GradeRun r = grade_level("03", control("attack_transpose_timed.cpp") + " --seed 5");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NEAR(points(r.doc, "correctness"), 60, 1e-6) << failures(r.doc);
    EXPECT_EQ(points(r.doc, "speed"), 0);
    EXPECT_NE(failures(r.doc).find("checked exactly"), std::string::npos) << failures(r.doc);
}

// --- the sandbox itself ----------------------------------------------------------------------------

TEST(GradeSandbox, ReportNamesTheSandbox) {
    const GradeRun r = grade_level("01", control("zeros.cpp") + " --seed 1");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(r.doc["sandbox"]["enabled"].get<bool>());
    EXPECT_NE(r.doc["sandbox"]["description"].get<std::string>().find("bubblewrap"), std::string::npos);
}

TEST(GradeSandbox, UnsafeModeSaysSoOnItsFirstLine) {
    const GradeRun r = grade_level("01", control("zeros.cpp") + " --seed 1 --unsafe-no-sandbox", "text");
    ASSERT_EQ(r.status, 0) << r.output;
    const auto report = r.output.find("NOT SANDBOXED");
    ASSERT_NE(report, std::string::npos) << r.output;
    EXPECT_TRUE(report == 0 || r.output[report - 1] == '\n') << r.output;
}

}  // namespace
