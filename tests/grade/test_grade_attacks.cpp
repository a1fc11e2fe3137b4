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
//      that computes on the host (through device pointers, or after opening
//      the emulated device memory from inside), exactness only where it is
//      checked;
//   7. what reaches a child or a report: the grader's standard input, the
//      priority children run at, bytes no report can hold as they are.
// Limits that need a writable cgroup are checked where the grader reports
// one (`sandbox.cgroups`), and skipped, never passed, where it does not.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <iostream>
#include <sstream>
#include <vector>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <thread>

#include "grade_run.hpp"

namespace {

using namespace grade_test;

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Processes on this machine whose command line (its arguments joined by
// NUL bytes, one after the last) passes `pick`.
template <class Pick>
int count_processes(Pick pick) {
    int n = 0;
    std::error_code ec;
    for (auto& e : fs::directory_iterator("/proc", ec)) {
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        n += pick(slurp(e.path() / "cmdline"));
    }
    return n;
}

// Processes whose command line contains `pattern`.
int processes_matching(const std::string& pattern) {
    return count_processes([&](std::string cmd) {
        for (auto& ch : cmd)
            if (ch == '\0') ch = ' ';
        return cmd.find(pattern) != std::string::npos;
    });
}

// Processes whose whole command line is `program` alone: the grade's worker
// (its compile names the same path after -o, and bubblewrap among its binds).
int processes_running(const std::string& program) {
    return count_processes([&](const std::string& cmd) { return cmd == program + '\0'; });
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

// The first call's input bits a control threw, as the report quotes them.
std::string input_bits(const GradeRun& r) {
    const std::string f = failures(r.doc);
    const auto at = f.find("INPUT BITS ");
    return at == std::string::npos ? "" : f.substr(at, f.find_first_of("\n;", at) - at);
}

TEST(GradeAttack, NoGradeSeesTheInputsOfAnother) {
    const std::string secret = "MEMWALL_GRADE_SECRET=one-secret-for-the-whole-course";
    const GradeRun a = grade_level("01", control("attack_seed_replay.cpp"), "json", secret);
    const GradeRun b = grade_level("01", control("attack_seed_replay.cpp"), "json", secret);
    ASSERT_EQ(a.status, 0) << a.output;
    ASSERT_EQ(b.status, 0) << b.output;
    ASSERT_NE(input_bits(a), "") << failures(a.doc);
    EXPECT_NE(input_bits(a), input_bits(b)) << "two grades under the same secret saw the same inputs";
    // A practice seed stays reproducible: the same inputs on every run.
    const GradeRun c = grade_level("01", control("attack_seed_replay.cpp") + " --seed 31");
    const GradeRun d = grade_level("01", control("attack_seed_replay.cpp") + " --seed 31");
    ASSERT_NE(input_bits(c), "") << failures(c.doc);
    EXPECT_EQ(input_bits(c), input_bits(d));
}

TEST(GradeAttack, DelayedPingsEarnNothing) {
    expect_correct_but_slow(grade_level("01", control("attack_ping_delay.cpp") + " --seed 5"));
}

TEST(GradeAttack, AStoppedClockEarnsNothing) {
    expect_correct_but_slow(grade_level("04", control("attack_clock.cpp") + " --seed 5"));
}

TEST(GradeAttack, NoOtherProcessIsVisible) {
    // It answers wrongly if it sees any process but its sandbox's init and itself.
    const GradeRun r = grade_level("01", control("attack_see_others.cpp") + " --seed 5" + kOneThread);
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
                            control("attack_outlive.cpp") + kOneThread + " --format json --out " + out.string() + " 2>&1";
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
    const GradeRun r = grade_level("01", control("attack_disrupt.cpp") + " --seed 5" + kOneThread);
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
    const GradeRun r = grade_level("01", control("attack_threads.cpp") + " --seed 5 --time-limit 5");
    // Less any wait for another grade's timing (tests run side by side).
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - r.lock_wait_s;
    ASSERT_EQ(r.status, 0) << r.output;
    print_margin("wall_s", wall, 90, true);
    expect_stopped_at_limit(r.doc, 5, 0.5, false);
    EXPECT_LT(wall, 90) << "the grade must end near its 5 s limit, compile and reference included";
    EXPECT_FALSE(r.doc["sandbox"]["left_behind"].get<bool>());
    if (cgroups(r)) {
        EXPECT_NE(failures(r.doc).find("cap of 64 processes and threads"), std::string::npos) << failures(r.doc);
    }
}

// --- 6. smaller ------------------------------------------------------------------------------------

// Level 01 controls rejected for one reason each; `extra` picks the backend.
// The cuda-emu ones: host code reaching device memory. Through the device
// pointers it faults as on a GPU; and the emulated device memory is the
// grader's, not the submission's process's, so neither lifting page
// protections (mprotect, mmap) nor unsetting the emulator's environment
// before it reads it gives host code the inputs or a way to the outputs the
// grader reads. Through the runtime's copies it can reach them: a call that
// launches no kernel, or whose host code reads device memory back, computed
// on the host and earns nothing. Kernels run in the kernel executor, which
// shares nothing with the host but device memory: a kernel cannot hand the
// host its inputs through a mapping of the host's, and a host that forges
// the wire's requests itself reads as the host.
struct Small {
    Control control;
    const char* exercise;
};

void PrintTo(const Small& a, std::ostream* os) { *os << a.control.file; }

class SmallAttack : public testing::TestWithParam<Small> {};

TEST_P(SmallAttack, IsRejectedForItsReason) {
    const Small& a = GetParam();
    const GradeRun r = grade_level("01", control(a.control.file) + " " + a.control.extra + " --seed 5");
    expect_rejected(r, a.control, a.exercise);
}

const std::string kEmu = "--backend cuda-emu";

// A control of level 01's CUDA exercise (gemm-cuda) graded under cuda-emu.
GradeRun grade_emu_gemm(const std::string& file, const std::string& extra = "") {
    return grade_level("01", control(file) + " " + kEmu + " --exercise gemm-cuda --seed 5" + extra);
}

INSTANTIATE_TEST_SUITE_P(
    GradeAttack, SmallAttack,
    testing::Values(Small{{"attack_write_past_end.cpp", "wrote past the end of C", 0}, "gemm-cpu"},
                    Small{{"attack_dlopen_blas.cpp", "cannot load BLAS", 0}, "gemm-cpu"},
                    Small{{"attack_include_rung.cpp", "gemm_simd.cpp: No such file", 0}, "gemm-cpu"},
                    Small{{"nan_when_timed.cpp", "disagrees with the reference", 60}, "gemm-cpu"},
                    Small{{"attack_host_only.cu", "SIGSEGV", 0, kEmu}, "gemm-cuda"},
                    Small{{"attack_emu_lift_protection.cu", "launched no kernel", 0, kEmu}, "gemm-cuda"},
                    Small{{"attack_host_copies.cu", "bytes of device memory during the call", 0, kEmu}, "gemm-cuda"},
                    Small{{"attack_emu_unset_environment.cu", "SIGSEGV", 0, kEmu}, "gemm-cuda"},
                    Small{{"attack_emu_shared_mapping.cu", "kernel's process died of Segmentation fault", 0, kEmu},
                          "gemm-cuda"},
                    Small{{"attack_emu_forged_fetch.cu", "bytes of device memory during the call", 0, kEmu},
                          "gemm-cuda"},
                    Small{{"attack_emu_shared_inputs.cu", "elements outside", 0, kEmu}, "gemm-cuda"},
                    Small{{"attack_emu_many_launches.cu", "more than 64 kernel launches", 0, kEmu}, "gemm-cuda"},
                    Small{{"attack_emu_empty_read.cu", "(cudaMemcpy device to host: 1 read)", 0, kEmu}, "gemm-cuda"}),
    [](const testing::TestParamInfo<Small>& i) {
        std::string n = i.param.control.file.substr(0, i.param.control.file.find('.'));
        for (char& c : n)
            if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
        return n;
    });

// Under cuda-emu the host's processes are frozen while a kernel runs (and
// the kernel's between launches): a 0.4 s kernel runs wholly inside a pause
// of a host thread that never stops otherwise.
TEST(GradeAttack, NothingOfTheHostRunsBesideAKernel) {
    const GradeRun r = grade_emu_gemm("attack_emu_beside_kernel.cu");
    ASSERT_EQ(r.status, 0) << r.output;
    if (!cgroups(r)) GTEST_SKIP() << "no writable cgroup here: " << r.doc["sandbox"]["description"];
    const std::string f = failures(r.doc);
    ASSERT_NE(f.find("INSIDE_PAUSE "), std::string::npos) << "the attack did not run:\n" << f;
    EXPECT_NE(f.find("INSIDE_PAUSE yes"), std::string::npos) << "host code ran while the kernel did: " << f;
}

// Under cuda-emu the host cannot time its kernels: a launch is answered at
// once and runs when the call has returned (a kernel that slept two bits of
// its input for the host to time carried a small call's inputs: red-team
// batch 9, 20/60 with kernels that wrote nothing).
TEST(GradeAttack, TheHostCannotTimeItsKernels) {
    const GradeRun r = grade_emu_gemm("attack_emu_launch_timing.cu");
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string f = failures(r.doc);
    const auto at = f.find("LAUNCH_MS short=");
    ASSERT_NE(at, std::string::npos) << "the attack did not run:\n" << f;
    double short_ms = -1, long_ms = -1;
    ASSERT_EQ(std::sscanf(f.c_str() + at, "LAUNCH_MS short=%lf long=%lf", &short_ms, &long_ms), 2) << f;
    // A kernel sleeping 0.3 s adds 300 ms when the host waits for it.
    EXPECT_LT(long_ms - short_ms, 100) << "the host timed its kernel: " << f;
}

// Under cuda-emu the grader holds device memory in its own process: at most
// 1 GiB of it, whatever the level's memory limit (4 GiB of it made the grader
// the process a 6 GiB container killed: red-team batch 9).
TEST(GradeAttack, DeviceMemoryCannotExhaustTheGrader) {
    const GradeRun r = grade_emu_gemm("attack_emu_device_hog.cu");
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string f = failures(r.doc);
    const auto at = f.find("DEVICE_MIB ");
    ASSERT_NE(at, std::string::npos) << "the attack did not run:\n" << f;
    const int mib = std::stoi(f.substr(at + 11));
    EXPECT_LE(mib, 1024) << f;
    EXPECT_GE(mib, 512) << "an honest submission should get most of it: " << f;
}

// Under cuda-emu a request the host leaves half sent cannot hold the grader:
// the grade ends within its time limit, with a report (it hung before).
TEST(GradeAttack, AHalfSentRequestCannotHangTheGrader) {
    const auto t0 = std::chrono::steady_clock::now();
    const GradeRun r = grade_emu_gemm("attack_emu_short_write.cu", " --time-limit 5");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - r.lock_wait_s;
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(points(r.doc, "correctness"), 0) << failures(r.doc);
    print_margin("wall_s", s, 90, true);
    EXPECT_LT(s, 90) << "the grade took " << s << " s under a 5 s limit";
}

// Under cuda-emu a kernel sees no file the host code sees (no page of a
// file is cached for both): not /usr, and its executable is a copy.
TEST(GradeAttack, KernelsSeeNoFileTheHostSees) {
    const GradeRun r = grade_emu_gemm("attack_emu_shared_files.cu");
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string f = failures(r.doc);
    const auto field = [&](const std::string& tag, const std::string& key) {
        const auto at = f.find(tag);
        if (at == std::string::npos) return std::string("(missing)");
        const auto k = f.find(key + "=", at);
        const auto end = f.find_first_of(" \n", k + key.size() + 1);
        return f.substr(k + key.size() + 1, end - k - key.size() - 1);
    };
    ASSERT_EQ(field("HOST_FILES", "usr"), "seen") << f;
    ASSERT_NE(field("KERNEL_FILES", "exe"), "(missing)") << "the kernel did not run:\n" << f;
    EXPECT_NE(field("KERNEL_FILES", "usr").rfind("seen", 0), 0u) << f;
    EXPECT_NE(field("KERNEL_FILES", "exe"), field("HOST_FILES", "exe")) << "one executable file for both: " << f;
}

// Under cuda-emu the host reads none of the machine's counters (AIO
// contexts, forks, loads, free memory, idle time) that a kernel could move,
// a kernel's process makes no pipe, socket, memory file or AIO context, and
// nothing it starts outlives its launch (attack_aio_gemm.cu scored 60/60 so).
TEST(GradeAttack, KernelsMoveNoCounterTheHostCanRead) {
    const GradeRun r = grade_emu_gemm("attack_emu_machine_counters.cu");
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string f = failures(r.doc);
    for (const char* tag : {"HOST ", "KERNEL "}) {
        const auto at = f.find(tag);
        ASSERT_NE(at, std::string::npos) << tag << "did not run:\n" << f;
        const std::string line = f.substr(at, f.find('\n', at) - at);
        EXPECT_EQ(line.find("=ok"), std::string::npos) << line;
    }
    if (cgroups(r)) {
        EXPECT_NE(f.find("holder=gone"), std::string::npos) << f;
    }
}

// Under cuda-emu a kernel makes no inode: a new one's number comes from a
// counter the machine keeps per CPU, which the host reads off its own next
// shared mapping (red-team batch 8). The host still can (the probe works);
// the kernel finds every way refused or absent.
TEST(GradeAttack, KernelsMakeNoInodeTheHostCouldCount) {
    const GradeRun r = grade_emu_gemm("attack_emu_inode_numbers.cu");
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string f = failures(r.doc);
    const auto host = f.find("HOST_INODES shared=");
    ASSERT_NE(host, std::string::npos) << "the host probe did not run:\n" << f;
    EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(f[host + 19]))) << "the probe reads no inode: " << f;
    const auto at = f.find("KERNEL_INODES ");
    ASSERT_NE(at, std::string::npos) << "the kernel did not run:\n" << f;
    const std::string line = f.substr(at, f.find('\n', at) - at);
    for (const char* way : {"shared", "devzero", "memfd", "pipe", "socket", "tmpfile", "created", "mkdir", "proc",
                            "eventfd", "shmget"})
        EXPECT_EQ(line.find(std::string(way) + "=ok"), std::string::npos) << way << ": " << line;
}

TEST(GradeAttack, TimedCallsOfAnExactExerciseAreCheckedExactly) {
    const GradeRun r = grade_level("03", control("attack_transpose_timed.cpp") + " --seed 5");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NEAR(points(r.doc, "correctness"), 60, 1e-6) << failures(r.doc);
    EXPECT_EQ(points(r.doc, "speed"), 0);
    EXPECT_NE(failures(r.doc).find("checked exactly"), std::string::npos) << failures(r.doc);
}

// --- the sandbox itself ----------------------------------------------------------------------------

// --- 7. what reaches a child, and what reaches a report --------------------------------

TEST(GradeAttack, TheGradersStandardInputReachesNoWorker) {
    const std::string text = "stdin-secret-" + std::to_string(getpid());
    const GradeRun r = grade_level("01", control("attack_stdin.cpp") + " --seed 6", "json", "echo " + text + " |");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(failures(r.doc).find("STDIN []"), std::string::npos) << "the attack ran and read nothing:\n"
                                                                   << failures(r.doc);
    EXPECT_EQ(r.doc.dump().find(text), std::string::npos) << "the grader's standard input reached the report";
}

TEST(GradeAttack, TheCompilerCannotIncludeTheGradersStandardInput) {
    const std::string text = "stdin_secret_" + std::to_string(getpid());
    const GradeRun r =
        grade_level("01", control("attack_include_stdin.cpp") + " --seed 6", "json", "echo " + text + " |");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc.dump().find(text), std::string::npos) << "the grader's standard input reached the compiler";
    expect_correct_but_slow(r);  // an empty include leaves the textbook loop
}

// A truncation that worked would kill the grader (SIGBUS: no exit status,
// no report). A grader error (exit 3, a report saying grader_error) is not
// that: under a full parallel test run it came once, so it gets one more
// try with another seed, and its report's words are printed either way.
TEST(GradeAttack, ATruncatedCallMemoryCannotKillTheGrader) {
    GradeRun r;
    std::string errors;
    for (int seed : {7, 17}) {
        r = grade_level("01", control("attack_truncate.cpp") + " --seed " + std::to_string(seed));
        if (r.status == 3 && r.doc.is_object() && r.doc.value("grader_error", false)) {
            errors += "seed " + std::to_string(seed) + ": " + failures(r.doc);
            continue;
        }
        break;
    }
    ASSERT_EQ(r.status, 0) << r.output << (r.doc.is_object() ? failures(r.doc) : "") << errors;
    ASSERT_TRUE(r.doc.is_object()) << "no report:\n" << r.output;
    if (!errors.empty()) std::cout << "[ retried  ] the first grade was the grader's error: " << errors;
    expect_correct_but_slow(r);
}

TEST(GradeAttack, UntrustedCodeRunsAtNormalPriorityOrBelow) {
    const GradeRun r = grade_level("01", control("attack_priority.cpp") + " --seed 8");
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string f = failures(r.doc);
    const auto at = f.find("PRIORITY nice=");
    ASSERT_NE(at, std::string::npos) << f;
    EXPECT_GE(std::stoi(f.substr(at + 14)), 0) << f;
}

TEST(GradeAttack, KernelInterfacesBeyondTheExerciseAreRefused) {
    const GradeRun r = grade_level("01", control("attack_syscalls.cpp") + " --seed 10");
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string f = failures(r.doc);
    const auto at = f.find("SYSCALLS");
    ASSERT_NE(at, std::string::npos) << "the attack did not run:\n" << f;
    const std::string line = f.substr(at, f.find('\n', at) - at);
    ASSERT_NE(line.find(" END"), std::string::npos) << "the list was cut short: " << line;
    for (const char* call : {"unshare", "mount", "packet", "inet", "vsock", "io_uring", "perf", "bpf", "keyctl",
                             "ptrace", "fcntl_lock", "fcntl_getlk", "ofd_lock", "ofd_lock_high", "fcntl_lock_high",
                             "flock", "inotify", "fadvise", "mincore", "pageout_high", "cachestat", "setsid",
                             "timerfd", "timer_create", "setitimer", "epoll"})
    {
        EXPECT_NE(line.find(std::string(" ") + call + "="), std::string::npos) << call << " not tried: " << line;
        EXPECT_EQ(line.find(std::string(" ") + call + "=ok"), std::string::npos) << call << " worked: " << line;
    }
    const auto nofile = line.find(" nofile=");
    ASSERT_NE(nofile, std::string::npos) << line;
    EXPECT_LE(std::stol(line.substr(nofile + 8)), 1024) << line;
}

TEST(GradeAttack, TheSubmissionRunsOnTheCpusItIsGradedOn) {
    const GradeRun r = grade_level("01", control("attack_cpus.cpp") + " --seed 11 --threads 1");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(failures(r.doc).find("CPUS 1"), std::string::npos) << failures(r.doc);
    cpu_set_t own;
    ASSERT_EQ(sched_getaffinity(0, sizeof own, &own), 0);
    const std::string cpus = r.doc.value("cpus", "");
    ASSERT_FALSE(cpus.empty() || cpus.find(',') != std::string::npos) << "one CPU, named: " << r.doc.dump(2);
    EXPECT_TRUE(CPU_ISSET(std::stoi(cpus), &own)) << "one of the grader's own: " << r.doc.dump(2);
    // The report says how: pinned, and kept there by the sandbox's filter.
    const std::string how = r.doc.value("cpu_confinement", "");
    EXPECT_NE(how.find("sched_setaffinity"), std::string::npos) << r.doc.dump(2);
    EXPECT_NE(how.find("seccomp"), std::string::npos) << r.doc.dump(2);
}

// How busy each CPU of this process's was over `seconds`, from /proc/stat
// (busy jiffies over all), by CPU number.
std::map<int, double> cpu_load(double seconds) {
    const auto sample = [] {
        std::map<int, std::pair<double, double>> m;  // busy, total
        std::ifstream in("/proc/stat");
        for (std::string line; std::getline(in, line);) {
            if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || !std::isdigit(static_cast<unsigned char>(line[3])))
                continue;
            std::istringstream f(line.substr(3));
            int cpu = -1;
            double v[8] = {};
            f >> cpu;
            for (double& x : v) f >> x;
            m[cpu] = {v[0] + v[1] + v[2] + v[5] + v[6] + v[7], v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7]};
        }
        return m;
    };
    const auto a = sample();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const auto b = sample();
    cpu_set_t own;
    sched_getaffinity(0, sizeof own, &own);
    std::map<int, double> load;
    for (auto& [cpu, t] : b)
        if (CPU_ISSET(cpu, &own) && a.count(cpu) && t.second > a.at(cpu).second)
            load[cpu] = (t.first - a.at(cpu).first) / (t.second - a.at(cpu).second);
    return load;
}

// A neighbour spinning on one core: a one-thread grade runs both sides on
// another, and the report says how busy each core was. The spinner takes
// the core the grade would take (the least busy now); when every other core
// is busy too (a neighbour of the test's own), there is nothing to choose.
TEST(GradeAttack, AOneThreadGradeAvoidsABusyCore) {
    const std::map<int, double> before = cpu_load(0.3);
    if (before.size() < 2) GTEST_SKIP() << "needs two CPUs to choose between";
    int target = before.begin()->first;
    for (auto& [cpu, load] : before)
        if (load < before.at(target) - 0.05) target = cpu;
    bool other_free = false;
    for (auto& [cpu, load] : before) other_free = other_free || (cpu != target && load < 0.5);
    if (!other_free) GTEST_SKIP() << "every CPU but one is busy with other work: nothing to choose between";
    const pid_t spinner = fork();
    ASSERT_GE(spinner, 0);
    if (spinner == 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(target, &one);
        sched_setaffinity(0, sizeof one, &one);
        for (;;) __asm__ volatile("");
    }
    const GradeRun r = grade_level("01", "--submission " + kSource +
                                             "/levels/01-vectorization/exercise/gemm_cpu.cpp --seed 13 --threads 1");
    kill(spinner, SIGKILL);
    waitpid(spinner, nullptr, 0);
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string cpus = r.doc.value("cpus", "");
    ASSERT_FALSE(cpus.empty()) << r.doc.dump(2);
    EXPECT_NE(std::stoi(cpus), target) << "graded beside the spinner: " << r.doc.dump(2);
    ASSERT_TRUE(r.doc.contains("cpu_busy")) << r.doc.dump(2);
    EXPECT_GT(r.doc["cpu_busy"].value(std::to_string(target), 0.0), 0.8) << r.doc.dump(2);
}

// A neighbour spinning on every core: the submission's five processes,
// sessions of their own or not, get one group's share of the graded core
// together (about half, beside one spinner), not five sixths.
TEST(GradeAttack, ManyProcessesGetOneShareOfABusyCore) {
    SpinnerOnEveryCore spinners;
    ASSERT_GT(spinners.count(), 0u);
    const GradeRun r = grade_level("01", control("attack_cpu_share.cpp") + " --seed 12 --threads 1");
    spinners.stop();
    ASSERT_EQ(r.status, 0) << r.output;
    if (!cgroups(r)) GTEST_SKIP() << "no writable cgroup here: " << r.doc["sandbox"]["description"];
    const std::string f = failures(r.doc);
    const auto at = f.find("SHARE ");
    ASSERT_NE(at, std::string::npos) << "the attack did not run:\n" << f;
    const double share = std::stod(f.substr(at + 6));
    print_margin("share", share, 0.7, true);
    EXPECT_GT(share, 0.2) << "the measurement is broken: " << f;
    EXPECT_LT(share, 0.7) << "five processes took more of the busy core than one would: " << f;
}

TEST(GradeAttack, TheInstructorsSolutionCannotBeIncluded) {
    const GradeRun r = grade_level("01", control("attack_include_solution.cpp") + " --seed 12");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc["score"].get<double>(), 0) << r.doc.dump(2);
    EXPECT_NE(failures(r.doc).find("compile error"), std::string::npos) << failures(r.doc);
}

// The same at every level, however the path is written: relative to the
// project (as the include path once made it work) or absolute (where the
// project's source tree is on this machine, which a student can guess).
TEST(GradeAttack, NoLevelsSolutionCanBeIncluded) {
    const fs::path dir = fs::temp_directory_path() / ("memwall-include-solution-" + std::to_string(getpid()));
    fs::create_directories(dir);
    std::vector<std::string> levels;
    for (auto& level : fs::directory_iterator(kSource + "/levels")) {
        const fs::path solutions = level.path() / "exercise" / "solutions";
        if (!fs::is_directory(solutions)) continue;
        fs::path solution;
        for (auto& f : fs::directory_iterator(solutions))
            if (f.path().extension() == ".cpp" && (solution.empty() || f.path() < solution)) solution = f.path();
        if (solution.empty()) continue;
        const std::string id = level.path().filename().string().substr(0, 2);
        levels.push_back(id);
        for (const std::string& path : {fs::relative(solution, kSource).string(), solution.string()}) {
            SCOPED_TRACE("level " + id + ": #include \"" + path + "\"");
            const fs::path submission = dir / ("include_solution_" + id + ".cpp");
            std::ofstream(submission) << "#include \"" << path << "\"\n";
            const GradeRun r = grade_level(id, "--submission " + submission.string() + " --seed 12");
            ASSERT_EQ(r.status, 0) << r.output;
            EXPECT_EQ(r.doc["score"].get<double>(), 0) << r.doc.dump(2);
            EXPECT_FALSE(r.doc["build"]["ok"].get<bool>()) << r.doc["build"].dump(2);
            EXPECT_NE(r.doc["build"]["log"].get<std::string>().find("No such file or directory"), std::string::npos)
                << "the include itself must be what fails: " << r.doc["build"]["log"];
        }
    }
    fs::remove_all(dir);
    EXPECT_EQ(levels.size(), 8u) << "a level's solutions were not found";
}

// The grade's cgroups (memwall-grade-<pid>-*, under the test's own cgroup of
// each controller) and temp folder (with a grader.pid of `pid`).
std::vector<std::string> grade_leftovers(pid_t grader) {
    std::vector<std::string> found;
    const std::string prefix = "memwall-grade-" + std::to_string(grader) + "-";
    std::ifstream self("/proc/self/cgroup");
    for (std::string line; std::getline(self, line);) {
        const auto a = line.find(':'), b = line.find(':', a + 1);
        std::stringstream list(line.substr(a + 1, b - a - 1));
        for (std::string c; std::getline(list, c, ',');) {
            std::error_code ec;
            for (auto& e : fs::directory_iterator("/sys/fs/cgroup/" + c + line.substr(b + 1), ec))
                if (e.path().filename().string().rfind(prefix, 0) == 0) found.push_back(e.path().string());
        }
    }
    std::error_code ec;
    for (auto& e : fs::directory_iterator(fs::temp_directory_path(), ec))
        if (e.path().filename().string().rfind("memwall-grade-", 0) == 0 &&
            std::atol(slurp(e.path() / "grader.pid").c_str()) == grader)
            found.push_back(e.path().string());
    return found;
}

// Who runs the grader that is killed: root, as a course platform does (the
// grade's cgroups are made where writable), or an unprivileged user (no
// cgroups: the sandbox's namespaces and the guard alone).
enum class Grader { root, unprivileged };

constexpr uid_t kNobody = 65534;

// Drops this (forked) process to nobody; false where it cannot.
bool become_nobody() { return setgroups(0, nullptr) == 0 && setgid(kNobody) == 0 && setuid(kNobody) == 0; }

// Whether an unprivileged user can run memwall from where it was built (a
// build under a private home folder cannot be).
bool nobody_can_run_memwall() {
    const pid_t p = fork();
    if (p == 0) {
        if (geteuid() == 0 && !become_nobody()) _exit(126);
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execl(MEMWALL_BIN, MEMWALL_BIN, "list", (char*)nullptr);
        _exit(127);
    }
    int status = 0;
    waitpid(p, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Who runs it, and on what: a CPU exercise, or a CUDA one under cuda-emu
// (a worker and a kernel executor, both frozen while the host sleeps).
struct Killed {
    Grader who;
    bool emu;
};

void PrintTo(Killed k, std::ostream* os) {
    *os << (k.who == Grader::root ? "root" : "unprivileged") << (k.emu ? ", cuda-emu" : "");
}

class KilledGrader : public testing::TestWithParam<Killed> {};

TEST_P(KilledGrader, LeavesNothingBehind) {
    const bool as_nobody = GetParam().who == Grader::unprivileged && geteuid() == 0;
    if (GetParam().who == Grader::root && geteuid() != 0) GTEST_SKIP() << "needs root";
    if (as_nobody && !nobody_can_run_memwall()) GTEST_SKIP() << "user nobody cannot run " << MEMWALL_BIN;
    // A grading lock of its own: another grade test timing beside this one
    // must not keep it waiting past the moment it is killed.
    const fs::path lock = fs::temp_directory_path() / ("memwall-killed-grader-" + std::to_string(getpid()) + ".lock");
    const pid_t grader = fork();
    ASSERT_GE(grader, 0);
    if (grader == 0) {
        if (as_nobody && !become_nobody()) _exit(126);
        setenv("MEMWALL_GRADE_LOCK", lock.c_str(), 1);
        const std::string sub = kControls + (GetParam().emu ? "/attack_emu_hang.cu" : "/attack_hang.cpp");
        freopen("/dev/null", "w", stdout);
        if (GetParam().emu)
            execl(MEMWALL_BIN, MEMWALL_BIN, "grade", "01", "--submission", sub.c_str(), "--backend", "cuda-emu",
                  "--exercise", "gemm-cuda", "--seed", "13", "--format", "json", (char*)nullptr);
        else
            execl(MEMWALL_BIN, MEMWALL_BIN, "grade", "01", "--submission", sub.c_str(), "--seed", "13", "--format",
                  "json", (char*)nullptr);
        _exit(127);
    }
    // Wait for the grade's temp folder, give it time to compile and reach
    // the call that hangs, then kill the grader outright.
    std::string folder;
    for (int i = 0; i < 1200 && folder.empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        for (auto& l : grade_leftovers(grader))
            if (l.find("/sys/") == std::string::npos) folder = l;
    }
    ASSERT_FALSE(folder.empty()) << "the grade never made its temp folder";
    // Then for its worker (the compiled submission, <folder>/build/worker),
    // and give it a moment to reach its hanging call (its first five are
    // small naive GEMMs).
    for (int i = 0; i < 1200 && processes_running(folder + "/build/worker") == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::seconds(2));
    ASSERT_EQ(waitpid(grader, nullptr, WNOHANG), 0) << "the grader ended by itself";
    const bool cgroups_made = grade_leftovers(grader).size() > 1;
    if (as_nobody) {
        EXPECT_FALSE(cgroups_made) << "an unprivileged grader made cgroups";
    }
    const int workers = processes_matching(folder);
    EXPECT_GT(workers, 0) << "no process of the grade was running when the grader was killed";
    kill(grader, SIGKILL);
    waitpid(grader, nullptr, 0);
    std::vector<std::string> left;
    for (int i = 0; i < 100; ++i) {
        left = grade_leftovers(grader);
        if (left.empty() && processes_matching(folder) == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(processes_matching(folder), 0) << "a process of the grade outlived it (" << workers << " before)";
    for (auto& l : left) ADD_FAILURE() << "left behind: " << l;
    if (!cgroups_made) std::cout << "(no cgroups made: the processes and the temp folder were checked)\n";
    // Nothing of the dead grade holds its grading lock either (a child that
    // kept the descriptor would keep every later grade waiting).
    const int fd = open(lock.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    EXPECT_GE(fd, 0) << "a grade takes the lock (shared to compile) before its worker starts";
    if (fd >= 0) {
        EXPECT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0) << "the killed grade's lock is still held";
        close(fd);
    }
    fs::remove(lock);
}

INSTANTIATE_TEST_SUITE_P(GradeAttack, KilledGrader,
                         testing::Values(Killed{Grader::root, false}, Killed{Grader::unprivileged, false},
                                         Killed{Grader::root, true}),
                         [](const testing::TestParamInfo<Killed>& i) {
                             return std::string(i.param.who == Grader::root ? "AsRoot" : "AsAnUnprivilegedUser") +
                                    (i.param.emu ? "UnderCudaEmu" : "");
                         });

TEST(GradeAttack, CleanupRemovesWhatADeadGraderLeft) {
    // A temp folder as a grader that died with its guard would leave it.
    const fs::path dir = fs::temp_directory_path() / ("memwall-grade-cleanuptest" + std::to_string(getpid()));
    fs::create_directories(dir / "build");
    const pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, nullptr, 0);
    std::ofstream(dir / "grader.pid") << dead << "\n";
    const fs::path live = fs::temp_directory_path() / ("memwall-grade-cleanuplive" + std::to_string(getpid()));
    fs::create_directories(live);
    std::ofstream(live / "grader.pid") << getpid() << "\n";  // a running grader's: kept
    const GradeRun r = grade_level("", "--cleanup", "text");
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_FALSE(fs::exists(dir)) << r.output;
    EXPECT_TRUE(fs::exists(live)) << r.output;
    fs::remove_all(live);
}

TEST(GradeSandbox, AnHonestLargeConstantTableCompiles) {
    const GradeRun r = grade_level("01", control("honest_large_table.cpp") + " --seed 14" + kOneThread);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NEAR(points(r.doc, "correctness"), 60, 1e-6) << failures(r.doc);
}

TEST(GradeAttack, TheRungGradedAgainstCannotBeLinked) {
    const GradeRun r = grade_level("01", control("attack_link_rung.cpp") + " --seed 15");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc["score"].get<double>(), 0) << r.doc.dump(2);
    EXPECT_NE(failures(r.doc).find("gemm_threads"), std::string::npos) << failures(r.doc);
}

// A grade the grader cannot finish (here a level whose op is not
// registered, which only grading itself looks up) still writes a report in
// every format: no points, the grader's error said, exit 3 (as for a grader
// error in the speed test).
TEST(GradeAttack, AGraderThatFailsStillWritesItsReport) {
    const fs::path dir = fs::temp_directory_path() / ("memwall-levels-failing-" + std::to_string(getpid()));
    fs::create_directories(dir / "03-layout");
    json level = json::parse(std::ifstream(kSource + "/levels/03-layout/level.json"));
    level["exercises"][0]["op"] = "no_such_op";
    std::ofstream(dir / "03-layout" / "level.json") << level.dump(2);
    for (const std::string format : {"json", "gradescope", "text"}) {
        const GradeRun r = grade_level("03", "--submission " + kSource + "/levels/03-layout/exercise/transpose_cpu.cpp --seed 3",
                                       format, "MEMWALL_LEVELS_DIR=" + dir.string());
        EXPECT_EQ(r.status, 3) << format << ": " << r.output;
        if (format == "text") {
            EXPECT_NE(r.output.find("score 0.0 / "), std::string::npos) << r.output;
            EXPECT_NE(r.output.find("the grader failed"), std::string::npos) << r.output;
            continue;
        }
        ASSERT_TRUE(r.doc.is_object()) << format << ": " << r.output;
        EXPECT_EQ(r.doc["score"].get<double>(), 0) << r.doc.dump(2);
        EXPECT_NE(r.doc.dump().find("the grader failed"), std::string::npos) << r.doc.dump(2);
        EXPECT_NE(r.doc.dump().find("no_such_op"), std::string::npos) << r.doc.dump(2);
        if (format == "json") {
            EXPECT_TRUE(r.doc["grader_error"].get<bool>()) << r.doc.dump(2);
        }
    }
    fs::remove_all(dir);
}

// A submission that defines the worker library's own loops (the ones that
// call its rule and write the checked outputs) is a second definition, not
// a replacement: a link error naming the function, no points.
TEST(GradeAttack, TheWorkerLibrarysFunctionsCannotBeReplaced) {
    const GradeRun r = grade_level("07", control("attack_replace_loops.cpp") + " --seed 5");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc["score"].get<double>(), 0) << r.doc.dump(2);
    EXPECT_NE(failures(r.doc).find("compile error"), std::string::npos) << failures(r.doc);
    EXPECT_NE(r.doc.dump().find("multiple definition of `mw::speculative::sample_pairs"), std::string::npos) << r.doc.dump(2);
}

// Strictly well-formed UTF-8 (Unicode table 3-7), written here apart from
// the grader's own sanitizer.
bool well_formed_utf8(const std::string& s) {
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        int n = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        const auto c1 = static_cast<unsigned char>(s[i + 1 < s.size() ? i + 1 : i]);
        if (n > 1) {
            const unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
            if (c1 < lo || c1 > hi) return false;
        }
        for (int k = 2; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
        i += n;
    }
    return true;
}

TEST(GradeAttack, WellFormedUtf8CheckerRejectsWhatItShould) {
    EXPECT_TRUE(well_formed_utf8("plain, \xc3\xa9t\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80"));
    for (const char* bad : {"\xff", "\xc3\x28", "\xe2\x82", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"})
        EXPECT_FALSE(well_formed_utf8(bad)) << bad;
}

TEST(GradeAttack, EveryReportIsWrittenAsUtf8WithoutControlBytes) {
    for (const char* format : {"json", "gradescope", "text"}) {
        SCOPED_TRACE(format);
        const GradeRun r = grade_level("01", control("attack_report_bytes.cpp") + " --seed 9", format);
        ASSERT_EQ(r.status, 0) << r.output;
        // C1 controls (C2 80..9F) and bidirectional controls (E2 80 8E/8F,
        // E2 80 AA..AE, E2 81 A6..A9), which a JSON string may carry raw.
        for (std::size_t i = 0; i + 2 < r.output.size(); ++i) {
            const auto b0 = static_cast<unsigned char>(r.output[i]), b1 = static_cast<unsigned char>(r.output[i + 1]),
                       b2 = static_cast<unsigned char>(r.output[i + 2]);
            EXPECT_FALSE(b0 == 0xC2 && b1 >= 0x80 && b1 <= 0x9F) << format << ": a C1 control at byte " << i;
            EXPECT_FALSE(b0 == 0xE2 && ((b1 == 0x80 && (b2 == 0x8E || b2 == 0x8F || (b2 >= 0xAA && b2 <= 0xAE))) ||
                                        (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9)))
                << format << ": a bidirectional control at byte " << i;
        }
        if (std::string(format) != "text") {
            // The parser refuses text that is not UTF-8: parsed means valid.
            ASSERT_TRUE(r.doc.is_object()) << r.output;
            EXPECT_NE(r.doc.dump().find("the call failed"), std::string::npos) << r.doc.dump(2);
            continue;
        }
        EXPECT_TRUE(well_formed_utf8(r.output)) << r.output;
        for (char ch : r.output) {
            const auto c = static_cast<unsigned char>(ch);
            EXPECT_FALSE((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) << "control byte " << int(c);
        }
        EXPECT_EQ(r.output.find("\nPASS  everything"), std::string::npos) << "a forged line stands as the grader's";
        EXPECT_NE(r.output.find("the call failed"), std::string::npos) << r.output;
    }
}

// An honest student's source in Latin-1, with a compiler warning that quotes
// its line: the build log holds bytes that are not UTF-8 (and here an escape
// that would clear a terminal). The report is written in every format all
// the same, the bytes replaced, and the naive code keeps its correctness.
// (The grader compiles with g++, which quotes the line's bytes as they are.)
TEST(GradeAttack, ALatin1SourceWithAWarningGetsItsReport) {
    const fs::path dir = fs::temp_directory_path() / ("memwall-latin1-" + std::to_string(getpid()));
    fs::create_directories(dir);
    const fs::path submission = dir / "gemm_cpu.cpp";
    std::ofstream(submission) << "#warning \"r\xe9sum\xe9: na\xefve loops \x1b[2J\"\n"
                              << slurp(kSource + "/levels/01-vectorization/exercise/gemm_cpu.cpp");
    for (const char* format : {"json", "text"}) {
        SCOPED_TRACE(format);
        const GradeRun r = grade_level("01", "--submission " + submission.string() + " --seed 13" + kOneThread, format);
        ASSERT_EQ(r.status, 0) << r.output;
        if (std::string(format) == "json") {
            ASSERT_TRUE(r.doc.is_object()) << r.output;  // parsed: valid UTF-8
            ASSERT_TRUE(r.doc["build"]["ok"].get<bool>()) << r.doc["build"].dump(2);
            const std::string log = r.doc["build"]["log"].get<std::string>();
            EXPECT_NE(log.find("r\xef\xbf\xbdsum\xef\xbf\xbd"), std::string::npos)
                << "the warning, its Latin-1 bytes replaced by U+FFFD: " << log;
            EXPECT_NEAR(points(r.doc, "correctness"), 60, 1e-6) << failures(r.doc);
        } else {
            EXPECT_TRUE(well_formed_utf8(r.output)) << r.output;
            EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << "an escape reached the text report";
            EXPECT_NE(r.output.find("sum"), std::string::npos) << r.output;
        }
    }
    fs::remove_all(dir);
}

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
