// The claims file parses, every claim is well formed, and `memwall
// reproduce` gives each a verdict that is not an error; `memwall calc` and
// `memwall reproduce` exit 2 on bad input, naming the problem.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "commands/claims/formulas.hpp"

namespace {

struct Result {
    int status;
    std::string output;
};

Result memwall(const std::string& args, bool with_stderr = true) {
    std::string cmd = std::string(MEMWALL_BIN) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
    std::array<char, 4096> buf{};
    std::string out;
    FILE* p = popen(cmd.c_str(), "r");
    while (fgets(buf.data(), buf.size(), p)) out += buf.data();
    int st = pclose(p);
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

nlohmann::json claims_file() {
    std::ifstream f(MEMWALL_CLAIMS);
    return nlohmann::json::parse(f);
}

}  // namespace

TEST(ClaimsFile, ParsesAndEveryClaimIsWellFormed) {
    auto doc = claims_file();
    ASSERT_TRUE(doc["claims"].is_array());
    EXPECT_GE(doc["claims"].size(), 25u);
    std::set<std::string> ids;
    const std::set<std::string> kinds = {"formula", "cpu-experiment", "gpu-only"};
    for (auto& c : doc["claims"]) {
        const std::string id = c.value("id", "");
        EXPECT_TRUE(ids.insert(id).second) << "duplicate id " << id;
        for (const char* k : {"lever", "source", "statement", "published", "check", "tolerance"})
            EXPECT_TRUE(c.contains(k)) << id << " lacks " << k;
        EXPECT_TRUE(c["source"].contains("file") && c["source"].contains("section")) << id;
        // Lever ids are spelled like their folders and ops: kv_cache, not kv-cache.
        EXPECT_EQ(c.value("lever", "").find('-'), std::string::npos) << id << ": lever " << c.value("lever", "");
        const std::string file = c["source"]["file"];
        EXPECT_TRUE(file.rfind("000_", 0) == 0 || file.rfind("001_", 0) == 0 || file.rfind("002_", 0) == 0) << id;
        EXPECT_TRUE(c["published"].contains("value") || c["published"].contains("range")) << id;
        EXPECT_NE(mw::calc::find_unit(c["published"].value("unit", "")), nullptr) << id;
        EXPECT_TRUE(kinds.count(c["check"].value("kind", ""))) << id;
        if (c["check"]["kind"] == "formula") {
            EXPECT_NE(mw::calc::find_formula(c["check"].value("formula", "")), nullptr) << id;
        }
    }
}

TEST(Reproduce, EveryClaimHasAVerdictThatIsNotAnError) {
    auto r = memwall("reproduce --format json", false);
    ASSERT_EQ(r.status, 0) << r.output.substr(0, 2000);
    auto doc = nlohmann::json::parse(r.output);
    const std::set<std::string> ok = {"reproduced", "differs", "needs a GPU", "not run"};
    EXPECT_EQ(doc["claims"].size(), claims_file()["claims"].size());
    int verdicts = 0;
    for (auto& c : doc["claims"]) {
        const std::string v = c["verdict"];
        EXPECT_TRUE(ok.count(v)) << c["id"] << ": " << v << " " << c.value("explanation", "");
        if (v == "reproduced" || v == "differs") ++verdicts;
        if (v == "differs") {
            EXPECT_TRUE(c.contains("recomputation")) << c["id"];
            EXPECT_TRUE(c.contains("explanation")) << c["id"] << " differs without saying why";
        }
        if (v == "needs a GPU") {
            EXPECT_EQ(c["ours_text"], "—") << c["id"] << ": a GPU claim must not get a number";
        }
    }
    EXPECT_GE(verdicts, 25);
}

TEST(Reproduce, FiltersAndDecimalBinaryHint) {
    auto r = memwall("reproduce --claim kv.llama2_7b_per_token_0_5mb --format json", false);
    ASSERT_EQ(r.status, 0);
    auto doc = nlohmann::json::parse(r.output);
    ASSERT_EQ(doc["claims"].size(), 1u);
    // 524288 B shown in MB and, beside it, MiB.
    EXPECT_NE(doc["claims"][0]["ours_text"].get<std::string>().find("0.5 MiB"), std::string::npos);
    auto f = memwall("reproduce --lever precision --format json", false);
    ASSERT_EQ(f.status, 0);
    for (auto& c : nlohmann::json::parse(f.output)["claims"]) EXPECT_EQ(c["lever"], "precision");
    // The folder spelling and the hyphenated one name the same lever.
    auto k = memwall("reproduce --lever kv-cache --format json", false);
    ASSERT_EQ(k.status, 0) << k.output;
    const auto kv = nlohmann::json::parse(k.output)["claims"];
    EXPECT_FALSE(kv.empty());
    for (auto& c : kv) EXPECT_EQ(c["lever"], "kv_cache");
}

struct BadInput {
    std::string args;
    std::vector<std::string> must_mention;
};

class CalcReproduceBadInput : public testing::TestWithParam<BadInput> {};

TEST_P(CalcReproduceBadInput, ExitsTwoNamingTheProblem) {
    auto r = memwall(GetParam().args);
    EXPECT_EQ(r.status, 2) << r.output;
    for (auto& m : GetParam().must_mention) EXPECT_NE(r.output.find(m), std::string::npos) << "missing '" << m << "' in: " << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Cli, CalcReproduceBadInput,
    testing::Values(BadInput{"calc nosuch", {"'nosuch'", "kv_cache", "roofline"}},
                    BadInput{"calc", {"valid formulas"}},
                    BadInput{"calc kv_cache --layers 32 --tokens 10", {"--head_dim"}},
                    BadInput{"calc kv_cache --layers x --head_dim 1 --tokens 1 --kv_heads 1", {"'x'", "--layers"}},
                    BadInput{"calc gemm_intensity --m 4 --n 4 --k 4 --q 3", {"'q'", "dtype_bytes"}},
                    BadInput{"calc gemm_intensity --m 0 --n 4 --k 4", {"--m", "> 0"}},
                    BadInput{"calc kv_cache --layers 2 --head_dim 4 --tokens 5 --attention xqa", {"'xqa'", "mha, gqa, mqa"}},
                    BadInput{"calc ridge --gpu Z9000", {"'Z9000'", "H100"}},
                    BadInput{"calc ridge --peak_tflops", {"--peak_tflops"}},
                    BadInput{"reproduce --lever nosuch", {"'nosuch'", "fusion"}},
                    BadInput{"reproduce --claim nosuch", {"'nosuch'", "closest"}},
                    BadInput{"calc kv_cache --layers 32.5 --kv_heads 8 --head_dim 128 --tokens 10", {"'32.5'", "--layers", "whole"}},
                    BadInput{"calc scaling_tax --local_mfu 65 --fleet_mfu 0.48", {"'65'", "--local_mfu", "0..1"}},
                    BadInput{"calc speculative --alpha 1.5 --gamma 4", {"'1.5'", "--alpha"}},
                    BadInput{"calc moe --tokens 100 --experts 8 --top_k 2.5", {"'2.5'", "--top_k"}},
                    BadInput{"calc roofline --gpu H100 --achieved_tbs 4", {"--achieved_tbs", "exceeds"}},
                    BadInput{"reproduce --format xml", {"'xml'", "md, json"}},
                    BadInput{"reproduce --out report.txt", {"report.txt", ".json"}},
                    // Plain decimals only: no hex, no inf or nan, no blanks, nothing past double's range.
                    BadInput{"calc kv_cache --layers 0x10 --kv_heads 8 --head_dim 128 --tokens 10", {"'0x10'", "--layers", "decimal"}},
                    BadInput{"calc gemm_intensity --m inf --n 4 --k 4", {"'inf'", "--m", "decimal"}},
                    BadInput{"calc gemm_intensity --m nan --n 4 --k 4", {"'nan'", "--m"}},
                    BadInput{"calc gemm_intensity --m 1e999 --n 4 --k 4", {"'1e999'", "--m"}},
                    BadInput{"calc gemm_intensity --m ' 4' --n 4 --k 4", {"' 4'", "--m"}},
                    // A result that overflows names itself and the inputs.
                    BadInput{"calc gemm_intensity --m 1e300 --n 1e300 --k 1e300", {"not finite", "--m 1e+300"}},
                    // Work bounded: the checkpoint search stops at a million layers.
                    BadInput{"calc checkpoint --layers 1e12 --activation_bytes 1e6", {"--layers", "1..1000000"}}));

TEST(Calc, ListAndJsonOutput) {
    auto l = memwall("calc --list");
    EXPECT_EQ(l.status, 0);
    for (auto& name : mw::calc::formula_names()) EXPECT_NE(l.output.find(name + ":"), std::string::npos) << name;
    auto j = memwall("calc kv_cache --layers 32 --attention gqa --q_heads 32 --kv_heads 8 --head_dim 128 --tokens 8000 --json", false);
    ASSERT_EQ(j.status, 0);
    auto doc = nlohmann::json::parse(j.output);
    EXPECT_DOUBLE_EQ(doc["outputs"]["bytes"]["value"].get<double>(), 2.0 * 32 * 8 * 128 * 8000 * 2);
    EXPECT_EQ(doc["outputs"]["bytes"]["unit"], "B");
}

// A mistyped id gets the closest ids, not the whole list.
TEST(Reproduce, MistypedClaimSuggestsClosest) {
    auto r = memwall("reproduce --claim fusion.flash_65");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.output.find("fusion.flash_65x"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("kv.llama2_70b_gqa8"), std::string::npos) << "lists every id: " << r.output;
}

// Every numeric line of the seed texts has a claim or a recorded reason, and
// every claim's quote is on its line. Skips when the seeds are not beside the repository.
TEST(Reproduce, SeedCoverageIsComplete) {
    auto r = memwall("reproduce --format json", false);
    ASSERT_EQ(r.status, 0);
    auto doc = nlohmann::json::parse(r.output);
    const auto& cov = doc["coverage"];
    if (!cov.value("available", false)) GTEST_SKIP() << cov.value("why", "");
    EXPECT_GE(doc["claims"].size(), 240u);
    EXPECT_TRUE(cov["misquoted"].empty()) << cov["misquoted"].dump(1);
    for (auto& u : cov["uncovered"]) ADD_FAILURE() << "no claim, no reason: " << u.dump();
    // The closing note counts verdicts, severities and cross-claim checks.
    const std::string s = doc["summary"];
    for (const char* k : {"Claims: ", "Differs by severity", "Cross-claim checks", "numeric lines"})
        EXPECT_NE(s.find(k), std::string::npos) << s;
    EXPECT_GE(doc["cross_claim"]["inconsistencies"].size(), 10u);
}

// A seed line with a number and no claim is reported; a severity is given to every difference.
TEST(Reproduce, UncoveredLineIsReportedAndSeveritiesSorted) {
    const std::string dir = testing::TempDir() + "/memwall_seeds_probe";
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/000_probe.txt") << "no digits here\nthe cache holds 42 GB\n";
    auto r = memwall("reproduce --format json --seeds " + dir, false);
    ASSERT_EQ(r.status, 0);
    auto doc = nlohmann::json::parse(r.output);
    bool found = false;
    for (auto& u : doc["coverage"]["uncovered"]) found = found || (u["file"] == "000_probe.txt" && u["line"] == 2);
    EXPECT_TRUE(found) << doc["coverage"].dump().substr(0, 500);
    for (auto& c : doc["claims"]) {
        if (c["verdict"] == "differs") {
            EXPECT_TRUE(c.contains("severity")) << c["id"];
        }
    }
    std::filesystem::remove_all(dir);
}
