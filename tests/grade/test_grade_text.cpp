// The grader's small pieces that need no sandbox: call seeds keyed by
// HMAC-SHA256 (commands/grade/keyed_seed.hpp), the sanitizing of a
// submission's bytes on their way into a report (commands/grade/sanitize.hpp),
// and the search for the BLAS libraries a sandbox hides (sandbox.hpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "commands/grade/grade.hpp"
#include "commands/grade/keyed_seed.hpp"
#include "commands/grade/sandbox.hpp"
#include "commands/grade/sanitize.hpp"

namespace {

using mw::grade::bounded;
using mw::grade::keyed_seed;
using mw::grade::printable;
using mw::grade::valid_utf8;

// A BLAS a package bundles in a folder of its own, at any depth, is found
// (numpy's wheels and R ship theirs so); a folder named for one is taken
// whole; other libraries are left alone.
TEST(GradeSandbox, BlasIsFoundAtAnyDepth) {
    namespace fs = std::filesystem;
    const fs::path root = fs::temp_directory_path() / ("memwall-blas-" + std::to_string(getpid()));
    fs::remove_all(root);
    for (const char* d : {"lib/python3/dist-packages/numpy.libs", "lib/R/lib", "lib/x86_64-linux-gnu/openblas-pthread",
                          "lib/x86_64-linux-gnu/other"})
        fs::create_directories(root / d);
    for (const char* f : {"lib/python3/dist-packages/numpy.libs/libscipy_openblas64_-ff651d7f.so",
                          "lib/R/lib/libRblas.so", "lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
                          "lib/x86_64-linux-gnu/other/libMKL_rt.so.2", "lib/x86_64-linux-gnu/other/libm.so.6",
                          "lib/x86_64-linux-gnu/libfoo.so"})
        std::ofstream(root / f) << "x";
    std::vector<std::string> dirs, files;
    mw::grade::find_blas({root.string()}, dirs, files);
    const std::string r = fs::canonical(root).string();
    EXPECT_EQ(dirs, std::vector<std::string>{r + "/lib/x86_64-linux-gnu/openblas-pthread"});
    EXPECT_EQ(files, (std::vector<std::string>{r + "/lib/R/lib/libRblas.so",
                                               r + "/lib/python3/dist-packages/numpy.libs/libscipy_openblas64_-ff651d7f.so",
                                               r + "/lib/x86_64-linux-gnu/other/libMKL_rt.so.2"}));  // any case
    fs::remove_all(root);
}

// A freeze that never completes (here a freezer whose state reads back as
// nothing) is tried three times, and the call it ends is the grader's
// failure, not the submission's timeout: on a busy machine a call answered in
// 2 ms was once reported "timed out after 0.00195 s" because the freezer took
// over 2 s, and the submission lost its points (GradeAttack.AStoppedClock...).
TEST(GradeSandbox, AFreezeThatDoesNotCompleteIsNotTheSubmissionsTimeout) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("memwall-freezer-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::create_symlink("/dev/null", dir / "freezer.state");
    const auto cg = mw::grade::Cgroup::freezer_at(dir.string());
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(cg->freeze());
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(waited, 5.5) << "three tries of 2 s each";
    EXPECT_LT(waited, 30.0);
    fs::remove_all(dir);

    mw::grade::Exit e;
    e.unstoppable = true;
    const std::string said = e.describe(0.00195, {});
    EXPECT_EQ(said.find("timed out"), std::string::npos) << said;
    EXPECT_NE(said.find("could not be stopped"), std::string::npos) << said;
}

// The text report names the cores graded on and how busy each core was.
TEST(GradeText, TheReportSaysHowBusyEachCoreWas) {
    const nlohmann::json doc = {{"level", "01"}, {"exercise", "gemm-cpu"}, {"seed", {{"kind", "practice"}, {"value", 1}}},
                                {"threads", 1}, {"cpus", "1"},
                                {"cpu_busy", {{"0", 0.97}, {"1", 0.02}}}, {"tests", nlohmann::json::array()},
                                {"score", 0}, {"max_score", 100}};
    const std::string text = mw::grade::report_text(doc);
    EXPECT_NE(text.find("threads: 1 (on CPUs 1,"), std::string::npos) << text;
    EXPECT_NE(text.find("0 97%, 1 2%"), std::string::npos) << text;
}

TEST(GradeSeed, IsHmacSha256OfTheKeyAndTheCall) {
    // RFC 4231, test case 1: key 20 x 0x0b, "Hi There" ->
    // b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7;
    // the first 8 bytes, little-endian.
    EXPECT_EQ(keyed_seed(std::string(20, '\x0b'), "Hi There"), 0x5338dbd8614c34b0ull);
    // RFC 4231, test case 2: key "Jefe" -> 5bdcc146bf60754e...
    EXPECT_EQ(keyed_seed("Jefe", "what do ya want for nothing?"), 0x4e7560bf46c1dc5bull);
}

TEST(GradeSeed, EveryCallHasItsOwnSeed) {
    std::set<std::uint64_t> seen;
    for (int i = 0; i < 1000; ++i) seen.insert(keyed_seed("a secret", "speed/round#" + std::to_string(i)));
    EXPECT_EQ(seen.size(), 1000u);
    EXPECT_NE(keyed_seed("a secret", "x#0"), keyed_seed("a secreT", "x#0"));
}

TEST(GradeText, InvalidUtf8BecomesReplacementCharacters) {
    const std::string fffd = "\xEF\xBF\xBD";
    EXPECT_EQ(valid_utf8("plain \xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
              "plain \xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    EXPECT_EQ(valid_utf8("latin-1 \xe9t\xe9"), "latin-1 " + fffd + "t" + fffd);
    EXPECT_EQ(valid_utf8("cut \xe2\x82"), "cut " + fffd + fffd);
    EXPECT_EQ(valid_utf8("\xc0\xaf"), fffd + fffd);              // overlong '/'
    EXPECT_EQ(valid_utf8("\xed\xa0\x80"), fffd + fffd + fffd);  // a surrogate
    EXPECT_EQ(valid_utf8("\xf4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // past U+10FFFF
    EXPECT_EQ(valid_utf8("\xff"), fffd);
}

TEST(GradeText, ControlCharactersAreMadeVisible) {
    EXPECT_EQ(printable("line\n\tindented"), "line\n\tindented");
    EXPECT_EQ(printable("\x1b[2J\x07\rPASS"), "\\x1B[2J\\x07\\x0DPASS");
    EXPECT_EQ(printable(std::string("nul\0end", 7)), "nul\\x00end");
    EXPECT_EQ(printable("del\x7f"), "del\\x7F");
    EXPECT_EQ(printable("csi \xc2\x9b"), "csi \\x9B");  // U+009B, a C1 control
    EXPECT_EQ(printable("\xc2\xa0nbsp"), "\xc2\xa0nbsp");  // U+00A0 is not one
    EXPECT_EQ(printable("bad \xff"), "bad \xEF\xBF\xBD");
}

TEST(GradeText, AFullMessageFieldIsReadNoFurtherThanItsSize) {
    const char field[4] = {'a', 'b', 'c', 'd'};  // no terminating NUL
    EXPECT_EQ(bounded(field, sizeof field), "abcd");
    const char shorter[4] = {'a', 0, 'c', 'd'};
    EXPECT_EQ(bounded(shorter, sizeof shorter), "a");
}

}  // namespace
