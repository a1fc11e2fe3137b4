// `memwall course grade-all`: a class folder (tests/course/class03 and
// level 03's stub: two independent blocked transposes, a renamed copy of one of
// them in a platform-style folder, a renamed copy of the project's own
// rung, a compile error and a wrong answer) graded in the sandbox, killed in
// the middle, resumed without regrading what was finished; the copies
// flagged and nothing else; the table and the page written.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

const fs::path kClass = fs::path(MEMWALL_SOURCE_DIR) / "tests/course/class03";

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

int reports_in(const fs::path& grades) {
    int n = 0;
    if (fs::is_directory(grades))
        for (auto& e : fs::directory_iterator(grades)) n += e.path().extension() == ".json";
    return n;
}

}  // namespace

TEST(GradeAll, SurvivesAKillResumesAndFlagsEveryCopy) {
    std::string t = (fs::temp_directory_path() / "memwall-grade-all-XXXXXX").string();
    const fs::path tmp = mkdtemp(t.data());
    fs::permissions(tmp, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec |
                             fs::perms::group_read | fs::perms::group_exec);
    const fs::path subs = tmp / "subs", out = tmp / "class";
    fs::copy(kClass, subs, fs::copy_options::recursive);
    fs::copy_file(fs::path(MEMWALL_SOURCE_DIR) / "levels/03-layout/exercise/transpose_cpu.cpp", subs / "naive_stub.cpp");
    const std::string cmd = std::string(MEMWALL_BIN) + " course grade-all 03 " + subs.string() + " --out " +
                            out.string() + " --seed 3";

    // First run, in its own process group, killed (SIGKILL, no clean-up of
    // its own) once two grades are finished.
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        setpgid(0, 0);
        const std::string log = (tmp / "first.log").string();
        execl("/bin/sh", "sh", "-c", (cmd + " > " + log + " 2>&1").c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
    while (reports_in(out / "grades") < 2 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill(-pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the killed grade's guard cleans up
    std::map<std::string, fs::file_time_type> finished;
    for (auto& e : fs::directory_iterator(out / "grades"))
        if (e.path().extension() == ".json") finished[e.path().filename().string()] = fs::last_write_time(e.path());
    ASSERT_GE(finished.size(), 2u) << read(tmp / "first.log");
    ASSERT_LT(finished.size(), 7u) << "the kill came too late to test a resume";
    EXPECT_FALSE(fs::exists(out / "summary.json"));

    // The second run keeps every finished grade and grades the rest.
    std::array<char, 512> buf{};
    std::string output;
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    while (fgets(buf.data(), buf.size(), p)) output += buf.data();
    ASSERT_EQ(pclose(p), 0) << output;
    for (const auto& [name, when] : finished)
        EXPECT_EQ(fs::last_write_time(out / "grades" / name), when) << name << " was graded again\n" << output;
    std::ostringstream counts;
    counts << "(" << 7 - finished.size() << " graded now, " << finished.size() << " kept";
    EXPECT_NE(output.find(counts.str()), std::string::npos) << output;

    const nlohmann::json summary = nlohmann::json::parse(read(out / "summary.json"));
    ASSERT_EQ(summary["submissions"].size(), 7u);
    std::map<std::string, nlohmann::json> row;
    for (const auto& r : summary["submissions"]) row[r["id"].get<std::string>()] = r;
    // Correctness is exact (a transpose moves values); speed is not asserted.
    for (const char* id : {"blocked_a.cpp", "strips_b.cpp", "copy_of_rung.cpp", "naive_stub.cpp", "student_f"})
        EXPECT_TRUE(row[id]["fully_correct"].get<bool>()) << id;
    EXPECT_EQ(row["student_f"]["file"], "transpose.cpp");
    EXPECT_FALSE(row["broken_wrong.cpp"]["fully_correct"].get<bool>());
    EXPECT_EQ(row["broken_compile.cpp"]["score"].get<double>(), 0.0);
    EXPECT_EQ(row["broken_compile.cpp"]["tests"]["build"], false);

    // Exactly the two planted copies, each with its regions.
    std::set<std::string> copies;
    for (const auto& c : summary["copies"]) {
        copies.insert(c["a"].get<std::string>() + " ~ " + c["b"].get<std::string>());
        EXPECT_FALSE(c["regions"].empty());
    }
    EXPECT_EQ(copies, (std::set<std::string>{"blocked_a.cpp ~ student_f",
                                             "copy_of_rung.cpp ~ optimized/layout/transpose_blocked.cpp"}));

    const std::string csv = read(out / "scores.csv");
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 8) << csv;
    const std::string html = read(out / "index.html");
    for (const char* s : {"Leaderboard", "blocked_a.cpp ~ student_f", "transpose_blocked.cpp (the project", "copy of "})
        EXPECT_NE(html.find(s), std::string::npos) << s;
    fs::remove_all(tmp);
}
