// `memwall grade` cannot be fooled: every negative control in submissions/
// loses its points for the right reason, a correct naive submission passes
// correctness with a low speed score, and the reference solutions (the
// project's own optimized code) get full marks. Usage errors exit 2.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "grade_run.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using namespace grade_test;

const std::string kExercise = kSource + "/levels/01-vectorization/exercise";

// memwall grade 01 <args> --format <format> --out <tmp>; the report is parsed.
GradeRun grade(const std::string& args, const std::string& format = "json", const std::string& env = "") {
    return grade_level("01", args, format, env);
}

// --- CPU negative controls -----------------------------------------------------

class GradeRejects : public testing::TestWithParam<Control> {};

TEST_P(GradeRejects, LosesItsPointsForTheRightReason) {
    const Control& c = GetParam();
    const GradeRun r = grade(control(c.file) + " --seed 11 " + c.extra);
    expect_rejected(r, c, "");
}

INSTANTIATE_TEST_SUITE_P(
    Controls, GradeRejects,
    testing::Values(Control{"wrong_k.cpp", "elements outside", 0},
                    Control{"zeros.cpp", "expected", 0},
                    Control{"partial.cpp", "NaN/Inf", 0},
                    // Right on the first call of every shape, wrong on the second.
                    Control{"cached.cpp", "call 2 of 2", 0},
                    Control{"mutates_input.cpp", "wrote into its input A", 0},
                    Control{"segfault.cpp", "SIGSEGV", 0},
                    Control{"fp16_accumulate.cpp", "elements outside", 0}),
    [](const testing::TestParamInfo<Control>& i) { return fs::path(i.param.file).stem().string(); });

// Three more negative controls, each graded once for the checks above and
// its own below.
TEST(Grade, CrashesAreNamed) {
    const GradeRun r = grade(control("aborts.cpp") + " --seed 11");
    // Square shapes (1, 7) pass; the others crash, and it says why.
    expect_rejected(r, {"aborts.cpp", "only square matrices", 20}, "");
    EXPECT_NE(failures(r.doc).find("SIGABRT"), std::string::npos) << failures(r.doc);
    EXPECT_TRUE((*find_test(r.doc, "correctness m=7,n=7,k=7"))["passed"].get<bool>()) << "a crash costs only its shape";
}

TEST(Grade, CompileErrorIsAZeroNotACrash) {
    const GradeRun r = grade(control("compile_error.cpp") + " --seed 1");
    expect_rejected(r, {"compile_error.cpp", "undeclared_bias", 0}, "");
    EXPECT_FALSE(r.doc["build"]["ok"].get<bool>());
    EXPECT_NE(r.doc["build"]["log"].get<std::string>().find("compile_error.cpp:4"), std::string::npos)
        << "the compiler's message names the student's file and line:\n" << r.doc["build"]["log"];
    EXPECT_EQ(r.doc["score"].get<double>(), 0);
}

TEST(Grade, EndlessLoopIsKilledAtTheLimit) {
    const auto t0 = std::chrono::steady_clock::now();
    const GradeRun r = grade(control("endless.cpp") + " --seed 1 --time-limit 2");
    // Less any wait for another grade's timing (tests run side by side).
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - r.lock_wait_s;
    expect_rejected(r, {"endless.cpp", "timed out after", 0}, "");
    print_margin("wall_s", s, 60, true);
    EXPECT_LT(s, 60) << "the 2 s limit must hold (compile time included)";
    expect_stopped_at_limit(r.doc, 2, 0.5, true);
}

// --- correct submissions -----------------------------------------------------------

TEST(Grade, NaiveStubIsCorrectButSlow) {
    expect_correct_but_slow(
        grade_level("01", "--submission " + kExercise + "/gemm_cpu.cpp --seed 5"));
}

TEST(Grade, ReferenceSolutionGetsFullMarks) {
    expect_full_marks("01", kExercise + "/solutions/gemm_cpu_reference.cpp");
}

// One grade times at a time on a host: a grade waits for another's lock
// (here held by the test all along) and, past its wait (one wait for its
// compile and its run together), times anyway and says so; its compile
// keeps off a timing (waits for the lock held exclusively) but not off
// another compile (goes ahead beside one held shared, where the timing
// waits); a grade that times nothing (cuda-emu) holds it shared and has no
// "timed without" note; a lock path that is a FIFO or a link (a hostile
// neighbour's), or a file of another user's, neither hangs the grade nor
// loses its report.
TEST(Grade, OneGradeTimesAtATimeOnAHost) {
    const fs::path dir = fs::temp_directory_path() / ("memwall-lock-test-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    struct Cleanup {
        fs::path dir;
        ~Cleanup() { fs::remove_all(dir); }
    } cleanup{dir};
    const fs::path lock = dir / "grade.lock";
    const int fd = open(lock.c_str(), O_RDONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
    const std::string stub = "--submission " + kExercise + "/gemm_cpu.cpp --seed 5" + kOneThread;
    const std::string held = "MEMWALL_GRADE_LOCK=" + lock.string() + " MEMWALL_GRADE_LOCK_WAIT_S=3";
    GradeRun r = grade(stub, "json", held);
    const GradeRun emu = grade_level("03", "--submission " + kSource +
                                               "/levels/03-layout/exercise/solutions/transpose_cuda_reference.cu "
                                               "--backend cuda-emu --seed 3 --reference-solution",
                                     "json", held);
    close(fd);
    ASSERT_EQ(r.status, 0) << r.output;
    ASSERT_TRUE(r.doc.contains("timing_lock")) << r.doc.dump(1);
    EXPECT_FALSE(r.doc["timing_lock"]["held"].get<bool>());
    EXPECT_NE(r.doc.dump().find("timed without the host's grading lock"), std::string::npos) << r.doc.dump(1);
    EXPECT_NEAR(points(r.doc, "correctness"), 60, 1e-6) << "still graded after the wait";
    // The compile kept off the timing too (it takes the lock shared), and
    // the two waited 3 s in all, not each.
    EXPECT_FALSE(r.doc["build"]["lock"]["held"].get<bool>()) << r.doc["build"].dump(1);
    EXPECT_GE(r.doc["build"]["lock"]["waited_s"].get<double>(), 2.9) << "the compile did not wait for the timing";
    EXPECT_TRUE(r.doc["build"]["ok"].get<bool>()) << "compiled all the same";
    EXPECT_GE(r.lock_wait_s, 2.9) << "it did not wait for the lock";
    EXPECT_LT(r.lock_wait_s, 4.5) << "the compile and the run waited 3 s each, not 3 s in all";
    // Under cuda-emu nothing is timed: the lock is taken shared, and not
    // having it is no note (no speed ratio to be noisier).
    ASSERT_EQ(emu.status, 0) << emu.output;
    EXPECT_EQ(emu.doc["timing_lock"]["mode"], "shared") << emu.doc["timing_lock"];
    EXPECT_FALSE(emu.doc["timing_lock"]["held"].get<bool>()) << emu.doc["timing_lock"];
    EXPECT_EQ(emu.doc.dump().find("timed without"), std::string::npos) << emu.doc.dump(1);
    EXPECT_EQ(emu.doc["score"].get<double>(), 60) << "graded all the same";

    // Held shared (another grade compiling): a compile goes ahead at once,
    // the timing waits for it.
    const int fd2 = open(lock.c_str(), O_RDONLY);
    ASSERT_EQ(flock(fd2, LOCK_SH | LOCK_NB), 0);
    r = grade(stub, "json", "MEMWALL_GRADE_LOCK=" + lock.string() + " MEMWALL_GRADE_LOCK_WAIT_S=3");
    close(fd2);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(r.doc["build"]["lock"]["held"].get<bool>()) << r.doc["build"].dump(1);
    EXPECT_LT(r.doc["build"]["lock"]["waited_s"].get<double>(), 1.0);
    EXPECT_EQ(r.doc["timing_lock"]["mode"], "exclusive");
    EXPECT_FALSE(r.doc["timing_lock"]["held"].get<bool>()) << "it timed beside a compile";
    EXPECT_GE(r.doc["timing_lock"]["waited_s"].get<double>(), 2.9);

    r = grade(stub, "json", held);  // the lock free now: taken at once
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(r.doc["timing_lock"]["held"].get<bool>());
    EXPECT_LT(r.doc["timing_lock"]["waited_s"].get<double>(), 1.0);
    EXPECT_TRUE(r.doc["build"]["lock"]["held"].get<bool>());

    auto refused = [&](const fs::path& path, const std::string& why) {
        const GradeRun g = grade(stub, "json", "MEMWALL_GRADE_LOCK=" + path.string());
        ASSERT_EQ(g.status, 0) << g.output;
        EXPECT_FALSE(g.doc["timing_lock"]["held"].get<bool>()) << path;
        EXPECT_NE(g.doc["timing_lock"].value("why_not", "").find(why), std::string::npos) << g.doc["timing_lock"];
        EXPECT_NEAR(points(g.doc, "correctness"), 60, 1e-6) << "graded all the same";
    };
    const fs::path fifo = dir / "fifo.lock";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    refused(fifo, "not a plain file");
    const fs::path link = dir / "link.lock";
    fs::create_symlink(lock, link);
    refused(link, "cannot open");
    if (geteuid() == 0) {  // a file another user made (and could hold): not used
        const fs::path theirs = dir / "theirs.lock";
        std::ofstream(theirs).put('\n');
        ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
        refused(theirs, "belongs to another user");
    }

    r = grade(stub, "json", "MEMWALL_GRADE_LOCK_WAIT_S=soon");
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("MEMWALL_GRADE_LOCK_WAIT_S 'soon'"), std::string::npos) << r.output;
}

// A timed call that shared its core with another task is slower than the
// code, and two such calls of one side can agree: the grader sees that the
// call's working threads waited on the run queue (run_queue.hpp), counts it
// and lets it confirm no best. Here a task spins on every core, so whichever
// the grade takes, both sides' calls wait. A grader that read the wrong
// field, the wrong processes, or its own threads instead of the worker's
// counts none.
TEST(Grade, CallsThatSharedTheirCoreAreSeen) {
    SpinnerOnEveryCore spinners;
    ASSERT_GT(spinners.count(), 0u);
    const GradeRun r = grade_level("01", "--submission " + kExercise +
                                             "/solutions/gemm_cpu_reference.cpp --seed 8 --threads 1 --reference-solution");
    spinners.stop();
    ASSERT_EQ(r.status, 0) << r.output;
    const json* speed = find_test(r.doc, "speed");
    ASSERT_NE(speed, nullptr) << r.output;
    ASSERT_TRUE((*speed)["speed"].contains("disturbed_calls")) << (*speed)["output"];
    const json& d = (*speed)["speed"]["disturbed_calls"];
    EXPECT_GT(d["reference"].get<int>(), 0) << (*speed)["output"];
    EXPECT_GT(d["submission"].get<int>(), 0) << (*speed)["output"];
    EXPECT_NE((*speed)["output"].get<std::string>().find("waited for a core"), std::string::npos)
        << (*speed)["output"];
}

// --- CUDA exercise under cuda-emu -----------------------------------------------------

TEST(GradeCudaEmu, ReferenceSolutionIsCorrectSpeedNotGraded) {
    // --reference-solution: the instructor's solution builds on a rung's header, which a student's compiler does not see.
    const GradeRun r = grade("--submission " + kExercise +
                             "/solutions/gemm_cuda_reference.cu --backend cuda-emu --seed 3 --reference-solution");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc["exercise"], "gemm-cuda");
    EXPECT_EQ(r.doc["score"].get<double>(), 60) << failures(r.doc);
    EXPECT_EQ(r.doc["max_score"].get<double>(), 60) << "speed points need a real GPU";
    EXPECT_NE(r.doc["notes"].dump().find("not graded under cuda-emu"), std::string::npos);
}

// Zero-byte and per-call scratch allocations, device-to-device copies, sets
// and several launches all work against the grader's emulated device memory.
TEST(GradeCudaEmu, HonestRuntimeTrafficKeepsFullMarks) {
    const GradeRun r = grade(control("honest_cuda_device_traffic.cu") + " --backend cuda-emu --seed 3");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc["score"].get<double>(), 60) << failures(r.doc);
}

TEST(GradeCudaEmu, MissingBoundsGuardFails) {
    const GradeRun r = grade(control("cuda_no_bounds_guard.cu") + " --backend cuda-emu --seed 3");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc["score"].get<double>(), 0) << r.doc.dump(2);
}

TEST(GradeCudaEmu, MissingSyncthreadsFails) {
    const GradeRun r = grade(control("cuda_missing_sync.cu") + " --backend cuda-emu --seed 3");
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.doc["score"].get<double>(), 0) << r.doc.dump(2);
    EXPECT_NE(failures(r.doc).find("NaN"), std::string::npos) << "shared memory read before written is poison";
}

// --- seeds and formats ------------------------------------------------------------------

TEST(Grade, SameSeedSameInputsOtherSeedOtherInputs) {
    const GradeRun a = grade(control("wrong_k.cpp") + " --seed 7"), b = grade(control("wrong_k.cpp") + " --seed 7"),
              c = grade(control("wrong_k.cpp") + " --seed 8");
    EXPECT_EQ(failures(a.doc), failures(b.doc));
    EXPECT_NE(failures(a.doc), failures(c.doc));
    EXPECT_EQ(a.doc["seed"]["value"], 7);
}

TEST(Grade, SecretSeedIsNeverPrinted) {
    const fs::path secret = fs::temp_directory_path() / ("memwall-secret-" + std::to_string(getpid()));
    std::ofstream(secret) << "918273645\n";
    const GradeRun f = grade(control("zeros.cpp") + " --secret-seed-file " + secret.string(), "text");
    fs::remove(secret);
    const GradeRun e = grade(control("zeros.cpp"), "json", "MEMWALL_GRADE_SECRET=918273645");
    EXPECT_EQ(f.status, 0) << f.output;
    EXPECT_NE(f.output.find("seed: secret"), std::string::npos) << f.output;
    EXPECT_EQ(f.output.find("918273645"), std::string::npos) << f.output;
    EXPECT_EQ(e.doc["seed"]["kind"], "secret");
    EXPECT_FALSE(e.doc["seed"].contains("value"));
    EXPECT_EQ(e.doc.dump().find("918273645"), std::string::npos);
    const GradeRun random = grade(control("zeros.cpp"));
    EXPECT_EQ(random.doc["seed"]["kind"], "random");
    EXPECT_TRUE(random.doc["seed"].contains("value")) << "a random seed is printed, so the run can be repeated";
}

TEST(Grade, GradescopeResults) {
    const GradeRun r = grade(control("aborts.cpp") + " --seed 2", "gradescope");
    ASSERT_EQ(r.status, 0) << r.output;
    ASSERT_TRUE(r.doc.contains("score") && r.doc.contains("tests") && r.doc.contains("output")) << r.doc.dump(2);
    double sum = 0, max = 0;
    for (auto& t : r.doc["tests"]) {
        for (const char* k : {"name", "score", "max_score", "output", "visibility", "status"})
            EXPECT_TRUE(t.contains(k)) << k << " missing in " << t.dump();
        sum += t["score"].get<double>(), max += t["max_score"].get<double>();
    }
    EXPECT_DOUBLE_EQ(r.doc["score"].get<double>(), sum);
    EXPECT_DOUBLE_EQ(r.doc["max_score"].get<double>(), max);
    EXPECT_EQ(r.doc["score"].get<double>(), 20);
}

// --- usage errors: exit 2, naming the valid choices ------------------------------------

TEST(Grade, UsageErrors) {
    const std::string ok = "--submission " + kControls + "/zeros.cpp";
    auto run = [](const std::string& args) {
        GradeRun r;
        std::array<char, 512> buf{};
        FILE* p = popen((std::string(MEMWALL_BIN) + " grade " + args + " 2>&1").c_str(), "r");
        while (fgets(buf.data(), buf.size(), p)) r.output += buf.data();
        const int st = pclose(p);
        r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        return r;
    };
    for (auto [args, mention] : std::vector<std::pair<std::string, std::string>>{
             {"99-nothing " + ok, "01-vectorization"},
             {"01 " + ok + " --exercise nope", "gemm-cpu, gemm-cuda"},
             {"01 " + ok + " --backend tpu", "cuda-emu"},
             {"01 " + ok + " --exercise gemm-cpu --backend cuda-emu", "valid backends: cpu"},
             {"01 " + ok + " --format pdf", "text, json, gradescope"},
             {"01 --submission /nonexistent/x.cpp", "/nonexistent/x.cpp"},
             {"vectorization " + ok + " --seed abc", "--seed"}}) {
        const GradeRun r = run(args);
        EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
        EXPECT_NE(r.output.find(mention), std::string::npos) << args << "\n" << r.output;
    }
}

}  // namespace
