// `memwall report DIR --html`: a good folder (made by real runs of the
// binary) gives one page; a bad one — a missing file, JSON cut short, a
// schema of another version — gives exit status 2, a message naming the
// file, and no page (an earlier page stays as it was). Also the noise-aware
// verdicts of compare_runs, and `memwall run all`'s per-op shapes.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/run_memwall.hpp"
#include "harness/results.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using mw::test::Result;

Result memwall(const std::string& args) { return mw::test::run_memwall(args); }

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

fs::path tmp_root() { return fs::temp_directory_path() / ("memwall-report-test-" + std::to_string(::getpid())); }

// A small real results folder: the committed ceilings of the project's EPYC
// guest (ctest runs each test in its own process: a calibration per test
// would cost seconds each) and two rungs of gemm run now.
class ReportHtml : public testing::Test {
protected:
    static fs::path good;
    static void SetUpTestSuite() {
        good = tmp_root() / "good";
        fs::remove_all(good);
        fs::create_directories(good);
        fs::copy_file(fs::path(MEMWALL_SOURCE_DIR) / "results/epyc-kvm-2c/ceilings.json", good / "ceilings.json");
        auto r = memwall("run gemm --quick --budget 0.01 --variant simd --shape m=33,n=7,k=129 --ceilings " +
                         (good / "ceilings.json").string() + " --out " + (good / "vectorization-cpu.json").string());
        ASSERT_EQ(r.status, 0) << r.output;
    }
    static void TearDownTestSuite() { fs::remove_all(tmp_root()); }

    // A copy of the good folder, to damage.
    static fs::path copy(const std::string& name) {
        const fs::path d = tmp_root() / name;
        fs::remove_all(d);
        fs::create_directories(d);
        for (const char* f : {"ceilings.json", "vectorization-cpu.json"}) fs::copy_file(good / f, d / f);
        return d;
    }
    // A copy whose JSON file is edited by `edit` and written back.
    template <class Edit> static fs::path copy_edited(const std::string& name, const char* file, Edit edit) {
        const fs::path d = copy(name);
        json doc = json::parse(slurp(d / file));
        edit(doc);
        spit(d / file, doc.dump());
        return d;
    }
    static void expect_rejected(const fs::path& dir, const std::vector<std::string>& mentions) {
        auto r = memwall("report " + dir.string() + " --html");
        EXPECT_EQ(r.status, 2) << r.output;
        for (auto& m : mentions) EXPECT_NE(r.output.find(m), std::string::npos) << "no '" << m << "' in: " << r.output;
        EXPECT_FALSE(fs::exists(dir / "index.html"));
        EXPECT_FALSE(fs::exists(dir / "plots"));
        if (fs::is_directory(dir)) {
            for (auto& e : fs::directory_iterator(dir)) {
                EXPECT_EQ(e.path().filename().string().find("tmp"), std::string::npos) << e.path();
            }
        }
    }
};
fs::path ReportHtml::good;

TEST_F(ReportHtml, AGoodFolderGivesOneSelfContainedPage) {
    const fs::path d = copy("page");
    auto r = memwall("report " + d.string() + " --html");
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string page = slurp(d / "index.html");
    EXPECT_NE(page.find("id=\"lever-vectorization\""), std::string::npos);
    EXPECT_NE(page.find("<svg class=\"plot\""), std::string::npos);
    EXPECT_NE(page.find("aria-label=\"roofline of gemm"), std::string::npos);
    EXPECT_NE(page.find("aria-label=\"speedup of gemm"), std::string::npos);
    EXPECT_NE(page.find("k=129,m=33,n=7"), std::string::npos);
    for (const char* no : {"<script", "http://", "https://", "<img", "<link"}) {
        // The SVG namespace URIs are names, not fetches.
        std::string stripped = page;
        for (const char* ns : {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"})
            for (size_t p; (p = stripped.find(ns)) != std::string::npos;) stripped.erase(p, std::strlen(ns));
        EXPECT_EQ(stripped.find(no), std::string::npos) << "the page holds '" << no << "'";
    }
    EXPECT_TRUE(fs::exists(d / "plots" / "vectorization-cpu"));
}

TEST_F(ReportHtml, ComparedWithItselfEveryTimedVariantIsWithinNoise) {
    const fs::path d = copy("self");
    auto r = memwall("report " + d.string() + " --html --compare " + good.string());
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string page = slurp(d / "index.html");
    EXPECT_NE(page.find("Against the baseline"), std::string::npos);
    EXPECT_NE(page.find(">within noise<"), std::string::npos);
    EXPECT_EQ(page.find(">faster<"), std::string::npos);
    EXPECT_EQ(page.find(">slower<"), std::string::npos);
}

// A row disturbed while timed is shaded with its cause in the title; a
// speedup with a range over rounds shows the range under the ratio.
TEST_F(ReportHtml, ADisturbedRowAndASpeedupRangeAreShown) {
    const fs::path plain = copy("plain");
    ASSERT_EQ(memwall("report " + plain.string() + " --html").status, 0);
    const std::string before = slurp(plain / "index.html");
    EXPECT_EQ(before.find("class=\"disturbed\""), std::string::npos);
    EXPECT_EQ(before.find("interleaved rounds"), std::string::npos);
    const fs::path d = copy_edited("marked", "vectorization-cpu.json", [](json& doc) {
        auto& r = doc["runs"].back();
        r["disturbance"] = {{"disturbed", true}, {"why", "other processes used 61% of its 2 cores"}};
        r["speedup_vs_naive_range"] = {{"lo", 2.5}, {"hi", 3.25}, {"rounds", 3}};
    });
    auto r = memwall("report " + d.string() + " --html");
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string page = slurp(d / "index.html");
    EXPECT_NE(page.find("class=\"disturbed\" title=\"disturbed while timed: other processes used 61% of its 2 cores"),
              std::string::npos);
    EXPECT_NE(page.find("over 3 interleaved rounds"), std::string::npos);
    EXPECT_NE(page.find(">2.5x–3.25x</small>"), std::string::npos);
}

TEST_F(ReportHtml, MissingCeilingsIsAnErrorNamingIt) {
    const fs::path d = copy("no-ceilings");
    fs::remove(d / "ceilings.json");
    expect_rejected(d, {"ceilings.json", "missing"});
}

TEST_F(ReportHtml, AFileJobJsonListsButIsMissingIsNamed) {
    const fs::path d = copy("no-listed");
    spit(d / "job.json", json{{"schema", "memwall.job/1"},
                              {"files", {"ceilings.json", "vectorization-cpu.json", "fusion-cpu.json"}},
                              {"parts", json::array()}}
                             .dump());
    expect_rejected(d, {"fusion-cpu.json", "missing"});
}

TEST_F(ReportHtml, TruncatedResultsAreNamed) {
    const fs::path d = copy("truncated");
    const std::string text = slurp(d / "vectorization-cpu.json");
    spit(d / "vectorization-cpu.json", text.substr(0, text.size() / 2));
    expect_rejected(d, {"vectorization-cpu.json", "not valid JSON"});
}

TEST_F(ReportHtml, TruncatedCeilingsAreNamed) {
    const fs::path d = copy("truncated-ceilings");
    const std::string text = slurp(d / "ceilings.json");
    spit(d / "ceilings.json", text.substr(0, 7));
    expect_rejected(d, {"ceilings.json", "not valid JSON"});
}

TEST_F(ReportHtml, AnEmptyFileIsNamed) {
    const fs::path d = copy("empty");
    spit(d / "vectorization-cpu.json", "");
    expect_rejected(d, {"vectorization-cpu.json", "empty"});
}

TEST_F(ReportHtml, AnotherSchemaVersionIsNamed) {
    const fs::path d = copy_edited("schema", "vectorization-cpu.json", [](json& doc) { doc["schema"] = "memwall.results/2"; });
    expect_rejected(d, {"vectorization-cpu.json", "memwall.results/2", "memwall.results/1"});
}

TEST_F(ReportHtml, CeilingsOfAnotherSchemaVersionAreNamed) {
    const fs::path d = copy_edited("ceilings-schema", "ceilings.json", [](json& doc) { doc["schema"] = "memwall.ceilings/0"; });
    expect_rejected(d, {"ceilings.json", "memwall.ceilings/0", "memwall.ceilings/1"});
}

TEST_F(ReportHtml, ARunWithoutItsTimesIsNamed) {
    const fs::path d = copy_edited("no-time", "vectorization-cpu.json", [](json& doc) { doc["runs"][0].erase("time_s"); });
    expect_rejected(d, {"vectorization-cpu.json", "time_s"});
}

TEST_F(ReportHtml, AFolderWithoutResultsIsAnError) {
    const fs::path d = copy("no-results");
    fs::remove(d / "vectorization-cpu.json");
    expect_rejected(d, {"no results files", d.string()});
}

TEST_F(ReportHtml, ANonexistentFolderIsNamed) { expect_rejected(tmp_root() / "nowhere", {"nowhere", "does not exist"}); }

TEST_F(ReportHtml, ABadCompareFolderIsNamedAndNoPageIsWritten) {
    const fs::path d = copy("bad-compare"), other = copy("bad-compare-base");
    spit(other / "ceilings.json", "{\"schema\": \"memwall.ceilings/1\", \"ceil");
    auto r = memwall("report " + d.string() + " --html --compare " + other.string());
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find((other / "ceilings.json").string()), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(d / "index.html"));
}

// A failure after a good page leaves that page as it was, not a partial one.
TEST_F(ReportHtml, AFailureLeavesTheEarlierPageWhole) {
    const fs::path d = copy("earlier");
    ASSERT_EQ(memwall("report " + d.string() + " --html").status, 0);
    const std::string before = slurp(d / "index.html");
    const std::string text = slurp(d / "vectorization-cpu.json");
    spit(d / "vectorization-cpu.json", text.substr(0, text.size() - 10));
    auto r = memwall("report " + d.string() + " --html");
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_EQ(slurp(d / "index.html"), before);
}

// ------------------------------------------------------------ compare_runs

json timed_run(double best, double median, bool correct = true) {
    return {{"lever", "l"}, {"op", "o"}, {"variant", "v"}, {"backend", "cpu"}, {"dtype", "f32"},
            {"shape", {{"n", 1}}}, {"correct", correct}, {"timing_meaningful", true},
            {"time_s", {{"best", best}, {"min", best}, {"median", median}, {"samples", 10}}}};
}

TEST(CompareRuns, VerdictsFollowTheNoiseOfBothRuns) {
    // Tight runs (1% spread): the 5% floor decides.
    EXPECT_EQ(mw::compare_runs(timed_run(1.0, 1.01), timed_run(0.5, 0.505)).verdict, "faster");
    EXPECT_EQ(mw::compare_runs(timed_run(0.5, 0.505), timed_run(1.0, 1.01)).verdict, "slower");
    EXPECT_EQ(mw::compare_runs(timed_run(1.0, 1.01), timed_run(0.97, 0.98)).verdict, "within noise");
    // A noisy run (median 40% over best) widens the band to 80%: 1.5x is noise.
    const auto noisy = mw::compare_runs(timed_run(1.5, 2.1), timed_run(1.0, 1.01));
    EXPECT_NEAR(noisy.noise, 0.8, 1e-9);
    EXPECT_NEAR(noisy.ratio, 1.5, 1e-12);
    EXPECT_EQ(noisy.verdict, "within noise");
    EXPECT_EQ(mw::compare_runs(timed_run(2.0, 2.8), timed_run(1.0, 1.01)).verdict, "faster");
}

TEST(CompareRuns, EmulatedOrBrokenRunsAreNotTimedAndCorrectnessWins) {
    json emu = timed_run(1.0, 1.0);
    emu["backend"] = "cuda-emu";
    EXPECT_EQ(mw::compare_runs(emu, emu).verdict, "not timed");
    EXPECT_EQ(mw::compare_runs(timed_run(1.0, 1.0), timed_run(0.1, 0.1, false)).verdict, "now INCORRECT");
    EXPECT_EQ(mw::compare_runs(timed_run(1.0, 1.0, false), timed_run(1.0, 1.0)).verdict, "now correct");
}

// A run disturbed while timed (another process on its cores) is slower than
// the machine can do: a difference against it is not called real.
TEST(CompareRuns, ADisturbedRunIsNotJudged) {
    json quiet = timed_run(1.0, 1.01), busy = timed_run(2.0, 2.02);
    busy["disturbance"] = {{"disturbed", true}, {"why", "other processes used 50% of its 2 cores"}};
    EXPECT_EQ(mw::compare_runs(quiet, busy).verdict, "not judged: the new run was disturbed while timed");
    EXPECT_EQ(mw::compare_runs(busy, quiet).verdict, "not judged: the base run was disturbed while timed");
    EXPECT_EQ(mw::compare_runs(busy, busy).verdict, "not judged: both runs were disturbed while timed");
    json calm = busy;
    calm["disturbance"]["disturbed"] = false;
    EXPECT_EQ(mw::compare_runs(quiet, calm).verdict, "slower");
}

// ------------------------------------------------------------ run all's shapes

TEST(RunAll, AnOpShapeForAnOpNotRunIsAUsageError) {
    const fs::path out = tmp_root() / "shape-op.json";
    auto r = memwall("run vectorization --shape softmax:rows=7 --out " + out.string());
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("'softmax'"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("gemm"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out));
}

TEST_F(ReportHtml, RunAllAnOpShapeAppliesToItsOpOnly) {
    const fs::path dir = tmp_root() / "run-all";
    auto r = memwall("run gemm transpose --variant naive --budget 0.01 --shape gemm:m=7,n=33,k=1 "
                     "--shape transpose:rows=129,cols=1 --ceilings " + (good / "ceilings.json").string() +
                     " --out-dir " + dir.string());
    ASSERT_EQ(r.status, 0) << r.output;
    const json v = json::parse(slurp(dir / "vectorization-cpu.json"));
    const json l = json::parse(slurp(dir / "layout-cpu.json"));
    for (auto& run : v["runs"]) EXPECT_EQ(run["shape_str"], "k=1,m=7,n=33");
    bool transposed = false;
    for (auto& run : l["runs"]) {
        EXPECT_EQ(run["lever"], "layout");
        if (run["op"] == "transpose") {
            transposed = true;
            EXPECT_EQ(run["shape_str"], "cols=1,rows=129");
        }
    }
    EXPECT_TRUE(transposed);
    // Progress names lever, op and rung.
    EXPECT_NE(r.output.find("layout / transpose rung 0"), std::string::npos) << r.output;
}

TEST(RunAll, AllIsAValidTarget) {
    auto r = memwall("list --json");
    ASSERT_EQ(r.status, 0);
    // Planning every op with a bad shape for one: the error is about that shape, not "all".
    auto bad = memwall("run all --shape gemm:m=0 --out " + (tmp_root() / "all.json").string());
    EXPECT_EQ(bad.status, 2) << bad.output;
    EXPECT_NE(bad.output.find("'m'"), std::string::npos) << bad.output;
    EXPECT_EQ(bad.output.find("unknown lever"), std::string::npos) << bad.output;
}

}  // namespace
