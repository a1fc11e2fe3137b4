// Results documents: round trip through the file, atomic writes, reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/registry.hpp"
#include "harness/results.hpp"
#include "harness/runner.hpp"
#include "harness/strings.hpp"
#include "tests/spinners.hpp"

namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
    fs::path d = fs::temp_directory_path() / ("memwall-test-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
}

// A real results document from a quick run of the GEMM op (small shape),
// what it printed in `progress` if given.
nlohmann::json small_run(const std::string& shape = "m=33,n=17,k=9",
                         const std::vector<std::string>& variants = {"naive", "openblas"}, double budget_s = 0.01,
                         std::ostringstream* progress = nullptr, double wait_quiet_s = 0, int rounds = 1) {
    mw::RunRequest req;
    req.targets = {"gemm"};
    req.shapes = {shape};
    req.variants = variants;
    req.timing.budget_s = budget_s;
    req.timing.min_samples = 3;
    req.timing.wait_quiet_s = wait_quiet_s;
    req.threads = 1;
    req.rounds = rounds;
    auto plans = mw::plan_runs(req);
    mw::Ceilings c;
    c.dram_triad_gbps = {10.0};
    c.peaks = {{"fp32", "test", 1, 100.0}};
    std::ostringstream quiet;
    return mw::run_plans(plans, req, c, progress ? *progress : quiet);
}

TEST(Results, RunDocumentHasTheDesignFields) {
    auto doc = small_run();
    ASSERT_NO_THROW(mw::validate_results(doc));
    ASSERT_EQ(doc["runs"].size(), 2u);
    for (auto& r : doc["runs"]) {
        EXPECT_TRUE(r["correct"].get<bool>()) << r.dump(2);
        EXPECT_GE(r["time_s"]["samples"].get<int>(), 3);
        EXPECT_LE(r["time_s"]["min"].get<double>(), r["time_s"]["median"].get<double>());
        EXPECT_LE(r["time_s"]["median"].get<double>(), r["time_s"]["max"].get<double>());
        EXPECT_DOUBLE_EQ(r["flops"].get<double>(), 2.0 * 33 * 17 * 9);
        EXPECT_NEAR(r["intensity"].get<double>(), r["flops"].get<double>() / r["bytes"].get<double>(), 1e-9);
        for (const char* k : {"speedup_vs_naive", "fraction_of_roof", "gbps", "gflops"}) EXPECT_TRUE(r.contains(k)) << k;
        EXPECT_FALSE(r.contains("quiet_wait")) << "no --wait-quiet asked";
    }
    EXPECT_DOUBLE_EQ(doc["runs"][0]["speedup_vs_naive"].get<double>(), 1.0);
    EXPECT_FALSE(doc["machine"]["cpu_model"].get<std::string>().empty());
}

// The OpenMP wait policy changes short parallel regions' times: the machine
// block records the one the run had ("default" when the variable is unset).
TEST(Results, MachineRecordsTheOpenMpWaitPolicy) {
    const char* was = std::getenv("OMP_WAIT_POLICY");
    const std::string saved = was ? was : "";
    ::setenv("OMP_WAIT_POLICY", "passive", 1);
    EXPECT_EQ(mw::machine_info()["omp_wait_policy"], "passive");
    ::unsetenv("OMP_WAIT_POLICY");
    EXPECT_EQ(mw::machine_info()["omp_wait_policy"], "default");
    if (was) ::setenv("OMP_WAIT_POLICY", saved.c_str(), 1);
}

TEST(Results, JsonRoundTripThroughFile) {
    auto doc = small_run();
    auto path = temp_dir() / "r.json";
    mw::write_json_atomic(path, doc);
    auto back = mw::read_json_file(path);
    EXPECT_EQ(back, doc);
    // No temporary files left behind.
    for (auto& e : fs::directory_iterator(path.parent_path()))
        EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
    fs::remove_all(path.parent_path());
}

TEST(Results, AtomicWriteNeverLeavesPartialFile) {
    auto dir = temp_dir();
    auto path = dir / "keep.json";
    mw::write_file_atomic(path, "{\"old\": true}\n");
    // Writing into a path whose parent is a file fails, and the old file is untouched.
    EXPECT_ANY_THROW(mw::write_file_atomic(path / "child.json", "x"));
    std::ifstream f(path);
    std::string s((std::istreambuf_iterator<char>(f)), {});
    EXPECT_EQ(s, "{\"old\": true}\n");
    fs::remove_all(dir);
}

TEST(Results, ValidateRejectsForeignDocuments) {
    EXPECT_ANY_THROW(mw::validate_results(nlohmann::json::object()));
    EXPECT_ANY_THROW(mw::validate_results({{"schema", "other/9"}}));
    auto doc = small_run();
    doc["runs"][0].erase("flops");
    EXPECT_ANY_THROW(mw::validate_results(doc));
}

TEST(Results, ReportsListEveryVariant) {
    auto doc = small_run();
    auto md = mw::report_markdown(doc);
    auto csv = mw::report_csv(doc);
    for (auto& r : doc["runs"]) {
        EXPECT_NE(md.find(r["variant"].get<std::string>()), std::string::npos);
        const std::string field = std::string(",").append(r["variant"].get<std::string>()).append(",");
        EXPECT_NE(csv.find(field), std::string::npos);
    }
    // header + one line per run
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + static_cast<long>(doc["runs"].size()));
    auto cmp = mw::compare_markdown(doc, doc);
    EXPECT_NE(cmp.find("1x"), std::string::npos) << cmp;
    EXPECT_EQ(cmp.find("OMP_WAIT_POLICY differs"), std::string::npos) << cmp;
    auto other = doc;
    other["machine"]["omp_wait_policy"] = doc["machine"]["omp_wait_policy"] == "passive" ? "active" : "passive";
    cmp = mw::compare_markdown(doc, other);
    EXPECT_NE(cmp.find("OMP_WAIT_POLICY differs"), std::string::npos) << cmp;
    EXPECT_EQ(cmp.find("huge pages differ"), std::string::npos) << cmp;
    // Pages: another THP mode, or the advice switched off, is flagged too.
    auto pages = doc;
    pages["machine"]["huge_pages_advised"] = false;
    cmp = mw::compare_markdown(doc, pages);
    EXPECT_NE(cmp.find("huge pages differ"), std::string::npos) << cmp;
    EXPECT_NE(cmp.find("(not advised)"), std::string::npos) << cmp;
}

// --rounds 3: each round's best is kept, and the speedup over the naive rung
// gets the range of the three paired ratios, which holds the best-of-all
// ratio; the markdown and compare show it. One round: no range anywhere.
TEST(Results, RoundsGiveTheSpeedupARange) {
    const auto doc = small_run("m=33,n=17,k=9", {"naive", "simd"}, 0.01, nullptr, 0, 3);
    ASSERT_EQ(doc["runs"].size(), 2u);
    const auto& naive = doc["runs"][0];
    const auto& simd = doc["runs"][1];
    ASSERT_EQ(naive["time_s"]["round_best"].size(), 3u) << naive["time_s"].dump();
    ASSERT_EQ(simd["time_s"]["round_best"].size(), 3u) << simd["time_s"].dump();
    double best = 1e9;
    for (auto& b : simd["time_s"]["round_best"]) best = std::min(best, b.get<double>());
    EXPECT_DOUBLE_EQ(best, simd["time_s"]["best"].get<double>());  // the rounds' bests are the rounds' own
    ASSERT_TRUE(simd.contains("speedup_vs_naive_range")) << simd.dump(2);
    const auto& range = simd["speedup_vs_naive_range"];
    EXPECT_EQ(range["rounds"], 3);
    const double s = simd["speedup_vs_naive"].get<double>();
    EXPECT_LE(range["lo"].get<double>(), s * (1 + 1e-12));
    EXPECT_GE(range["hi"].get<double>(), s * (1 - 1e-12));
    double lo = 1e9, hi = 0;
    for (int i = 0; i < 3; ++i) {
        const double ratio = naive["time_s"]["round_best"][i].get<double>() / simd["time_s"]["round_best"][i].get<double>();
        lo = std::min(lo, ratio), hi = std::max(hi, ratio);
    }
    EXPECT_DOUBLE_EQ(range["lo"].get<double>(), lo);
    EXPECT_DOUBLE_EQ(range["hi"].get<double>(), hi);
    const std::string shown = " (" + mw::fmt(lo, 3) + "–" + mw::fmt(hi, 3) + ")";
    const std::string md = mw::report_markdown(doc);
    EXPECT_NE(md.find(shown), std::string::npos) << md;
    EXPECT_NE(md.find("the range of the speedup over the run's interleaved rounds"), std::string::npos) << md;
    EXPECT_NE(mw::compare_markdown(doc, doc).find(shown), std::string::npos);
    // The naive rung against itself has no range worth showing: 1x every round.
    EXPECT_FALSE(naive.contains("speedup_vs_naive_range"));
    const auto one = small_run();
    for (auto& r : one["runs"]) {
        EXPECT_FALSE(r.contains("speedup_vs_naive_range")) << r.dump(2);
        EXPECT_FALSE(r["time_s"].contains("round_best")) << r["time_s"].dump();
    }
    EXPECT_EQ(mw::report_markdown(one).find("interleaved rounds"), std::string::npos);
}

// A row disturbed while timed is marked in the markdown, with a footnote
// that says what disturbed it; a run with none has neither.
TEST(Results, ADisturbedRowIsMarked) {
    auto doc = small_run();
    for (auto& r : doc["runs"]) {
        ASSERT_TRUE(r.contains("disturbance")) << r.dump(2);  // measured on every CPU row
        r["disturbance"]["disturbed"] = false;
    }
    EXPECT_EQ(mw::report_markdown(doc).find("disturbed"), std::string::npos);
    // An emulated row's time means nothing: never marked.
    auto emulated = doc;
    emulated["runs"][1]["timing_meaningful"] = false;
    emulated["runs"][1]["disturbance"] = {{"disturbed", true}, {"why", "x"}};
    EXPECT_EQ(mw::report_markdown(emulated).find("disturbed"), std::string::npos);
    doc["runs"][1]["disturbance"] = {{"disturbed", true}, {"why", "other processes used 61% of its 2 cores"}};
    const std::string md = mw::report_markdown(doc);
    EXPECT_NE(md.find("(disturbed*)"), std::string::npos) << md;
    EXPECT_NE(md.find("other processes used 61% of its 2 cores"), std::string::npos) << md;
    EXPECT_NE(md.find(doc["runs"][1]["variant"].get<std::string>() + ": other processes"), std::string::npos) << md;
}

// `memwall run` beside a process spinning on every core: every row it times
// is marked disturbed, and the terminal says so as it happens; a wait for a
// quiet machine (--wait-quiet 0.6) gives up, and the row and terminal say so.
TEST(Disturbance, ARunBesideASpinnerMarksItsRows) {
    std::ostringstream progress;
    mw::test::SpinnerOnEveryCore neighbours;
    ASSERT_GT(neighbours.count(), 0u);
    // 1.5 s a variant: its window stays past kMinOthersWindowS even when the
    // warm-up call, slowed beside the spinner, doubles the estimate a sample is sized by.
    const auto doc = small_run("m=129,n=127,k=33", {"naive", "simd"}, 1.5, &progress, 0.6);
    neighbours.stop();
    ASSERT_EQ(doc["runs"].size(), 2u);
    for (auto& r : doc["runs"]) {
        ASSERT_TRUE(r.contains("disturbance")) << r.dump(2);
        ASSERT_GE(r["disturbance"]["window_s"].get<double>(), mw::kMinOthersWindowS) << r["disturbance"].dump();
        EXPECT_TRUE(r["disturbance"]["disturbed"].get<bool>()) << r["disturbance"].dump();
        EXPECT_GT(r["disturbance"]["others_share"].get<double>(), 0.3) << r["disturbance"].dump();
        ASSERT_TRUE(r.contains("quiet_wait")) << r.dump(2);
        EXPECT_FALSE(r["quiet_wait"]["quiet"].get<bool>()) << r["quiet_wait"].dump();
        EXPECT_GE(r["quiet_wait"]["waited_s"].get<double>(), 0.6) << r["quiet_wait"].dump();
        EXPECT_NE(r["quiet_wait"]["why"].get<std::string>().find("other processes used"), std::string::npos);
    }
    EXPECT_NE(progress.str().find("DISTURBED while timed: other processes used"), std::string::npos) << progress.str();
    EXPECT_NE(progress.str().find("no quiet machine within --wait-quiet 0.6 s (other processes used"), std::string::npos)
        << progress.str();
}

// Whether large buffers sat on huge pages moves a DRAM stream's rate: the
// machine block records the kernel's mode and whether the run advised them.
TEST(Results, MachineRecordsThePages) {
    const auto m = mw::machine_info();
    const std::string mode = m["transparent_hugepages"];
    EXPECT_TRUE(mode == "always" || mode == "madvise" || mode == "never" || mode == "unknown") << mode;
    EXPECT_EQ(m["huge_pages_advised"], std::getenv("MEMWALL_HUGEPAGES") == nullptr ||
                                           std::string(std::getenv("MEMWALL_HUGEPAGES")) != "0");
}

}  // namespace

namespace {

// Results files and rendered lessons are committed: they must not record the
// folders of the machine that ran the command.
TEST(ResultsPaths, PathsUnderTheRepositoryBecomeRelative) {
    const fs::path root = fs::temp_directory_path() / "mw-record-root";
    fs::create_directories(root / "results" / "m");
    EXPECT_EQ(mw::path_for_record((root / "results/m/ceilings.json").string(), root), "results/m/ceilings.json");
    EXPECT_EQ(mw::path_for_record((root / "results/m/../m/new.json").string(), root), "results/m/new.json");
    // Relative paths are taken from the current directory.
    const fs::path cwd = fs::current_path();
    fs::current_path(root / "results");
    EXPECT_EQ(mw::path_for_record("m/r.json", root), "results/m/r.json");
    fs::current_path(cwd);
    // Outside the repository: only the file name; a sibling folder whose name
    // starts like the root's is outside too.
    EXPECT_EQ(mw::path_for_record("/elsewhere/deep/out.json", root), "out.json");
    EXPECT_EQ(mw::path_for_record(root.string() + "-other/x.json", root), "x.json");
    // Not paths: left alone.
    EXPECT_EQ(mw::path_for_record("m=64,n=64,k=64", root), "m=64,n=64,k=64");
    EXPECT_EQ(mw::path_for_record("cuda-emu", root), "cuda-emu");
    fs::remove_all(root);
}

TEST(ResultsPaths, CommandRecordsArgumentsAndFlagValuesRelative) {
    const fs::path root = MEMWALL_SOURCE_DIR;
    std::string a0 = "memwall", a1 = "run", a2 = "gemm", a3 = "--ceilings", a4 = (root / "results/c.json").string(),
                a5 = "--out=" + (root / "results/r.json").string(), a6 = "--shape", a7 = "m=1,n=2,k=3";
    char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(), a4.data(), a5.data(), a6.data(), a7.data()};
    setenv("MEMWALL_SOURCE_DIR", root.c_str(), 1);
    EXPECT_EQ(mw::command_for_record(8, argv),
              "memwall run gemm --ceilings results/c.json --out=results/r.json --shape m=1,n=2,k=3");
    unsetenv("MEMWALL_SOURCE_DIR");
}

}  // namespace

namespace {

// Results recorded before the whole-workload fields existed (no peak_bytes,
// mfu, units, counters) must still report and plot, and read as they did.
std::vector<fs::path> recorded_results() {
    std::vector<fs::path> files;
    for (auto& e : fs::recursive_directory_iterator(fs::path(MEMWALL_SOURCE_DIR) / "results")) {
        if (e.path().extension() != ".json") continue;
        auto doc = mw::read_json_file(e.path());
        if (doc.is_object() && doc.value("schema", "") == mw::kResultsSchema) files.push_back(e.path());
    }
    return files;
}

TEST(Results, RecordedFilesStillReport) {
    const auto files = recorded_results();
    ASSERT_FALSE(files.empty());
    for (auto& f : files) {
        const auto doc = mw::read_json_file(f);
        std::string md, csv;
        ASSERT_NO_THROW(md = mw::report_markdown(doc)) << f;
        ASSERT_NO_THROW(csv = mw::report_csv(doc)) << f;
        bool new_fields = false;
        for (auto& r : doc["runs"]) new_fields = new_fields || r.contains("peak_bytes") || r.contains("mfu");
        if (!new_fields) {
            EXPECT_EQ(md.find("| MFU"), std::string::npos) << f;
            EXPECT_EQ(md.find("peak memory"), std::string::npos) << f;
        }
    }
    // One file's markdown, byte for byte as recorded beside it: the optional
    // columns stay out of reports of older files.
    const fs::path v = fs::path(MEMWALL_SOURCE_DIR) / "results/xeon-kvm-2c/vectorization-cpu";
    std::ifstream in(v.string() + ".md");
    const std::string recorded((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(mw::report_markdown(mw::read_json_file(v.string() + ".json")), recorded)
        << "the report of " << v << ".json changed (if on purpose: memwall report it into the .md)";
}

}  // namespace

