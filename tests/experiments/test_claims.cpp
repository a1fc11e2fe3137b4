// The claims file parses, every claim is well formed, and `memwall
// reproduce` gives each a verdict that is not an error; `memwall calc` and
// `memwall reproduce` exit 2 on bad input, naming the problem.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
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
    const std::set<std::string> kinds = {"formula", "cpu-experiment", "gpu-only", "open"};
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
    const std::set<std::string> ok = {"reproduced", "differs", "depends on an assumption", "needs a GPU", "not run",
                                      "not measurable here"};
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
        if (v == "not measurable here") {  // an open claim: no number, and what would check it
            EXPECT_EQ(c["ours_text"], "—") << c["id"];
            EXPECT_NE(c.value("explanation", "").find("would check it: "), std::string::npos) << c["id"];
        }
        if (v == "depends on an assumption") {  // both readings computed, one that holds and one that does not
            ASSERT_TRUE(c.contains("assumption")) << c["id"];
            int holds = 0, fails = 0;
            for (auto& a : c["assumption"]["readings"]) (a["holds"].get<bool>() ? holds : fails)++;
            EXPECT_GE(holds, 1) << c["id"];
            EXPECT_GE(fails, 1) << c["id"];
        }
        if (v == "reproduced" && c["published"].contains("value") && c["published"]["value"].is_number() &&
            c["published"]["value"].get<double>() != 0 && c.contains("ours") && c["ours"].is_number()) {
            EXPECT_TRUE(c.contains("relative_gap")) << c["id"] << ": a reproduced claim shows its gap";
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
    const auto precision = nlohmann::json::parse(f.output);  // kept: a range over a temporary's member dangles
    EXPECT_FALSE(precision["claims"].empty());
    for (auto& c : precision["claims"]) EXPECT_EQ(c["lever"], "precision");
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
    EXPECT_TRUE(cov["skips_of_files_not_in_seeds"].empty()) << cov["skips_of_files_not_in_seeds"].dump(1);
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

// The README's rule (experiments/README.md, "Tolerances"): a published number
// with decimals is matched within half a unit of its last decimal (295.2 ->
// 0.05), a whole number within 5% of itself (a few per cent: "3x" is not met
// by 3.17), zero within 0.5. The decimals are those the seed wrote: a number
// of the claim's quote that is the published value up to a power of ten
// ("4.19 GB" for 4.19e9 B: half of 0.01 GB), else those of the stored value.
// A tolerance may be tighter, never looser; a range is met inside it or
// within 2% of an end.
TEST(ClaimsFile, TolerancesFollowTheReadmeRule) {
    const std::regex number(R"(\d[\d,]*(?:\.\d+)?)");
    int judged = 0, from_quote = 0;
    const auto doc = claims_file();
    for (auto& c : doc["claims"]) {
        const std::string id = c["id"];
        const auto& pub = c["published"];
        const auto tol = c.value("tolerance", nlohmann::json{{"relative", 0.02}});
        auto slack_at = [&](double v) {
            return tol.contains("absolute") ? tol["absolute"].get<double>() : tol.value("relative", 0.02) * std::abs(v);
        };
        if (pub.contains("range")) {
            for (auto& e : pub["range"]) {
                const double end = std::abs(e.get<double>());
                EXPECT_LE(slack_at(end), 0.02 * end + 1e-12) << id << ": tolerance " << tol.dump() << " at the end " << end;
            }
            ++judged;
            continue;
        }
        if (!pub["value"].is_number()) continue;  // a category ("memory-bound")
        const double v = pub["value"].get<double>();
        // The unit of the last digit written (0: a whole number), from the
        // quote where it holds the value; nullopt where it does not.
        const std::string quote = c["source"].value("quote", "");
        auto from_the_quote = [&]() -> std::optional<double> {
            for (std::sregex_iterator it(quote.begin(), quote.end(), number), e; it != e && v != 0; ++it) {
                std::string t = it->str();
                t.erase(std::remove(t.begin(), t.end(), ','), t.end());
                const double q = std::strtod(t.c_str(), nullptr);
                const double k = q == 0 ? 0.5 : std::log10(std::abs(v) / q);
                if (std::abs(k - std::round(k)) > 1e-9) continue;
                const auto dot = t.find('.');
                return dot == std::string::npos ? 0.0
                                                : std::pow(10.0, std::round(k) - static_cast<double>(t.size() - dot - 1));
            }
            return std::nullopt;
        };
        double last_digit = 0;
        if (const auto q = from_the_quote()) {
            last_digit = *q;
            ++from_quote;
        } else if (v != std::floor(v)) {  // the decimals of the stored value
            for (int digits = 1; digits <= 17; ++digits) {
                char b[64];
                std::snprintf(b, sizeof b, "%.*g", digits, v);
                if (std::strtod(b, nullptr) != v) continue;
                const std::string text = b;
                ASSERT_EQ(text.find('e'), std::string::npos) << id << ": write " << v << " without an exponent";
                last_digit = std::pow(10.0, -static_cast<double>(text.size() - text.find('.') - 1));
                break;
            }
        }
        const double allowed = last_digit > 0 ? last_digit / 2 : v == 0 ? 0.5 : 0.05 * std::abs(v);
        EXPECT_LE(slack_at(v), allowed * (1 + 1e-9))
            << id << ": published " << v << " (quote \"" << quote << "\"), tolerance " << tol.dump()
            << " is looser than " << (last_digit > 0 ? "half a unit of its last decimal" : "5% of a whole number")
            << " (" << allowed << ")";
        ++judged;
    }
    EXPECT_GE(judged, 280);
    EXPECT_GE(from_quote, 150) << "the quotes hold most published values";
}

// One reading per phrase: two claims that take an input from the same seed
// line must not read it as two nearly equal numbers ("8k" as 8192 in one and
// 8000 in the other). Readings of an "assumption" are exempt: they differ on
// purpose, and each is labelled.
TEST(ClaimsFile, OnePhraseHasOneReading) {
    std::map<std::string, std::vector<std::pair<std::string, const nlohmann::json*>>> by_line;
    const auto doc = claims_file();
    for (auto& c : doc["claims"]) {
        const auto& src = c["source"];
        by_line[src["file"].get<std::string>() + ":" + std::to_string(src["line"].get<int>())].push_back(
            {c["id"].get<std::string>(), &c});
    }
    int pairs = 0;
    for (auto& [line, cs] : by_line)
        for (std::size_t i = 0; i < cs.size(); ++i)
            for (std::size_t j = i + 1; j < cs.size(); ++j) {
                const auto a = (*cs[i].second)["check"].value("params", nlohmann::json::object());
                const auto b = (*cs[j].second)["check"].value("params", nlohmann::json::object());
                for (auto& [k, x] : a.items()) {
                    if (!x.is_number() || !b.contains(k) || !b[k].is_number()) continue;
                    ++pairs;
                    const double p = x.get<double>(), q = b[k].get<double>();
                    if (p == q) continue;
                    EXPECT_GT(std::abs(p - q), 0.05 * std::max(std::abs(p), std::abs(q)))
                        << line << ": " << cs[i].first << " reads " << k << " as " << p << ", " << cs[j].first
                        << " as " << q;
                }
            }
    EXPECT_GE(pairs, 20);
}

// An input the seed leaves open: a figure that follows under one reading and
// not under the project's own is "depends on an assumption", with both
// computed; one that follows under neither still differs; one that follows
// under the project's own is reproduced.
TEST(Reproduce, AnAssumptionVerdictComputesBothReadings) {
    const std::string dir = testing::TempDir() + "/memwall_assumption_probe";
    std::filesystem::create_directories(dir + "/experiments");
    // KV cache of 32 layers, 32 heads of 128, FP16: 8000 tokens are 3.906 GiB, 8192 are 4 GiB.
    auto claim = [](const std::string& id, double published) {
        return nlohmann::json{
            {"id", id}, {"lever", "kv_cache"},
            {"source", {{"file", "000_probe.txt"}, {"line", 1}, {"quote", "8k"}, {"section", "probe"}}},
            {"statement", "probe"}, {"published", {{"value", published}, {"unit", "GiB"}}},
            {"check", {{"kind", "formula"}, {"formula", "kv_cache"}, {"output", "bytes"},
                       {"params", {{"layers", 32}, {"attention", "mha"}, {"q_heads", 32}, {"head_dim", 128},
                                   {"tokens", 8192}, {"dtype_bytes", 2}}}}},
            {"tolerance", {{"absolute", 0.05}}},
            {"on_difference", "probe"},
            {"assumption", {{"open", "whether 8k is 8192 or 8000 tokens"}, {"ours", "8k as 8192"},
                            {"readings", {{{"label", "8k as 8000"}, {"params", {{"tokens", 8000}}}}}}}}};
    };
    nlohmann::json file = {{"schema", "memwall.claims/1"},
                           {"claims", {claim("p.follows_if_8000", 3.9), claim("p.ours", 4.0), claim("p.neither", 5.0)}}};
    std::ofstream(dir + "/experiments/claims.json") << file.dump(1);
    std::ofstream(dir + "/000_probe.txt") << "8k\n";
    auto r = memwall("reproduce --format json --claims " + dir + "/experiments/claims.json --seeds " + dir, false);
    ASSERT_EQ(r.status, 0) << r.output.substr(0, 2000);
    std::map<std::string, nlohmann::json> by_id;
    const auto doc = nlohmann::json::parse(r.output);
    for (auto& c : doc["claims"]) by_id[c["id"]] = c;
    const auto& f = by_id["p.follows_if_8000"];
    EXPECT_EQ(f["verdict"], "depends on an assumption") << f.dump(1);
    ASSERT_EQ(f["assumption"]["readings"].size(), 2u);
    EXPECT_FALSE(f["assumption"]["readings"][0]["holds"].get<bool>());
    EXPECT_EQ(f["assumption"]["readings"][0]["ours_text"], "4 GiB");
    EXPECT_TRUE(f["assumption"]["readings"][1]["holds"].get<bool>());
    EXPECT_EQ(f["assumption"]["readings"][1]["ours_text"], "3.906 GiB");
    EXPECT_FALSE(f.contains("severity")) << "not an error";
    EXPECT_EQ(by_id["p.ours"]["verdict"], "reproduced");
    EXPECT_EQ(by_id["p.neither"]["verdict"], "differs");
    EXPECT_TRUE(by_id["p.neither"].contains("severity"));
    // The markdown names both readings.
    auto md = memwall("reproduce --claim p.follows_if_8000 --claims " + dir + "/experiments/claims.json --seeds " + dir,
                      false);
    const auto at = md.output.find("## Depends on an assumption");
    ASSERT_NE(at, std::string::npos) << md.output;
    const std::string section = md.output.substr(at, md.output.find("\n## ", at + 1) - at);
    EXPECT_NE(section.find("follows 8k as 8000: 3.906 GiB"), std::string::npos) << section;
    EXPECT_NE(section.find("does not follow 8k as 8192: 4 GiB"), std::string::npos) << section;
    EXPECT_NE(md.output.find("depends on an assumption (+2.56%)"), std::string::npos) << "the gap beside the verdict";
    std::filesystem::remove_all(dir);
}

// Coverage is counted per number too: a number inside a claim's quote, a
// number on a line skipped with a reason, and the rest; digits glued to a
// name ("H100", "FP16") are not numbers, "8k" and "3.9" are.
TEST(Reproduce, CoverageCountsNumbersNotOnlyLines) {
    const std::string dir = testing::TempDir() + "/memwall_numbers_probe";
    std::filesystem::create_directories(dir + "/experiments");
    std::ofstream(dir + "/000_probe.txt") << "An H100 holds 80 GB; 8k tokens of FP16 need 3.9 GiB, plus 1,024.5 MB.\n"
                                          << "Published in 2023 and 2024.\n";
    const nlohmann::json claim = {
        {"id", "p.hbm"}, {"lever", "roofline"},
        {"source", {{"file", "000_probe.txt"}, {"line", 1}, {"quote", "holds 80 GB"}, {"section", "probe"}}},
        {"statement", "probe"}, {"published", {{"value", 80}, {"unit", "GB"}}},
        {"check", {{"kind", "gpu-only"}, {"why", "probe"}}}, {"tolerance", {{"relative", 0.05}}}};
    std::ofstream(dir + "/experiments/claims.json")
        << nlohmann::json{{"schema", "memwall.claims/1"}, {"claims", {claim}}}.dump(1);
    std::ofstream(dir + "/experiments/coverage.json")
        << R"({"skips": [{"file": "000_probe.txt", "line": 2, "kind": "year"}]})";
    auto r = memwall("reproduce --format json --claims " + dir + "/experiments/claims.json --seeds " + dir, false);
    ASSERT_EQ(r.status, 0) << r.output.substr(0, 2000);
    const auto doc = nlohmann::json::parse(r.output);
    const auto& n = doc["coverage"]["numbers"];
    EXPECT_EQ(n["found"], 6) << n;  // 80, 8k, 3.9, 1,024.5 on line 1; 2023, 2024 on line 2
    EXPECT_EQ(n["in_claim_quotes_or_inputs"], 1) << n;
    EXPECT_EQ(n["skipped_with_a_reason"], 2) << n;
    EXPECT_EQ(n["not_yet_accounted_for"], 3) << n;
    EXPECT_NE(doc["summary"].get<std::string>().find("Seed numbers: 6 found"), std::string::npos) << doc["summary"];
    std::filesystem::remove_all(dir);
}

// A number is skipped only for a kind of a fixed list (a year, a heading's
// numbering, ...), a whole line or some of its numbers ("tokens"); a figure
// no claim checks is an open claim ("not measurable here", with what would
// check it), counted; a claim's "inputs" account for the numbers its
// conditions come from; a skip of another kind is refused, naming the kinds.
TEST(Reproduce, SkipsHaveAFixedKindAndOpenClaimsAreCounted) {
    const std::string dir = testing::TempDir() + "/memwall_kinds_probe";
    std::filesystem::create_directories(dir + "/experiments");
    std::ofstream(dir + "/000_probe.txt") << "An H100 holds 80 GB, said in 2023, and serves 5 racks at batch 4.\n"
                                          << "Lever 3, revised 2024.\n";
    auto claim = [](const std::string& id, const std::string& quote, double value, const nlohmann::json& check) {
        return nlohmann::json{
            {"id", id}, {"lever", "roofline"},
            {"source", {{"file", "000_probe.txt"}, {"line", 1}, {"quote", quote}, {"section", "probe"}}},
            {"statement", "probe"}, {"published", {{"value", value}, {"unit", "GB"}}},
            {"check", check}, {"tolerance", {{"relative", 0.05}}}};
    };
    nlohmann::json hbm = claim("p.hbm", "holds 80 GB", 80, {{"kind", "gpu-only"}, {"why", "probe"}});
    hbm["inputs"] = {{{"file", "000_probe.txt"}, {"line", 1}, {"quote", "batch 4"}}};
    const nlohmann::json racks =
        claim("p.racks", "5 racks", 5, {{"kind", "open"}, {"why", "no rack size given"}, {"would_check", "a rack's spec"}});
    std::ofstream(dir + "/experiments/claims.json")
        << nlohmann::json{{"schema", "memwall.claims/1"}, {"claims", {hbm, racks}}}.dump(1);
    auto write_skips = [&](const std::string& kind) {
        std::ofstream(dir + "/experiments/coverage.json")
            << R"({"skips": [{"file": "000_probe.txt", "line": 1, "kind": "year", "tokens": ["2023"]},)"
            << R"( {"file": "000_probe.txt", "line": 2, "kind": ")" << kind << R"("}]})";
    };
    write_skips("heading/numbering");
    const std::string cmd = "reproduce --format json --claims " + dir + "/experiments/claims.json --seeds " + dir;
    auto r = memwall(cmd, false);
    ASSERT_EQ(r.status, 0) << r.output.substr(0, 2000);
    const auto doc = nlohmann::json::parse(r.output);
    const auto& n = doc["coverage"]["numbers"];
    EXPECT_EQ(n["found"], 6) << n;  // 80, 2023, 5, 4 on line 1; 3, 2024 on line 2
    EXPECT_EQ(n["in_claim_quotes_or_inputs"], 3) << n;  // 80 and 5 (the claims), 4 (an input)
    EXPECT_EQ(n["skipped_with_a_reason"], 3) << n;
    EXPECT_EQ(n["skipped_by_kind"]["year"], 1) << n;
    EXPECT_EQ(n["skipped_by_kind"]["heading/numbering"], 2) << n;
    EXPECT_EQ(n["not_yet_accounted_for"], 0) << n << doc["coverage"]["unaccounted_numbers"];
    EXPECT_EQ(doc["coverage"]["open_claims"], 1);
    for (auto& c : doc["claims"])
        if (c["id"] == "p.racks") {
            EXPECT_EQ(c["verdict"], "not measurable here");
            EXPECT_NE(c.value("explanation", "").find("a rack's spec"), std::string::npos) << c;
        }
    EXPECT_NE(doc["summary"].get<std::string>().find("1 open claim not measurable here"), std::string::npos)
        << doc["summary"];

    write_skips("rhetorical");
    r = memwall(cmd);
    EXPECT_NE(r.status, 0) << r.output.substr(0, 500);
    EXPECT_NE(r.output.find("skip kind 'rhetorical' is not one of: code listing, citation"), std::string::npos)
        << r.output.substr(0, 500);
    std::filesystem::remove_all(dir);
}

// A quote names one place on its line, and a skip one number: a quote that
// occurs twice must say which ("occurrence"), a listed token skips one
// occurrence of it (the second "4" below stays unaccounted until listed
// twice), a token the line does not hold is refused, and a line that holds
// a claim's quote is never skipped whole (a figure beside the claimed one
// would be hidden).
TEST(Reproduce, QuotesAndSkipsNameOnePlace) {
    const std::string dir = testing::TempDir() + "/memwall_places_probe";
    std::filesystem::create_directories(dir + "/experiments");
    std::ofstream(dir + "/000_probe.txt") << "Batch 4 reads 80 GB; batch 4 again reads 80 GB.\n"
                                          << "Lever 3, revised 2024 and 2024.\n";
    nlohmann::json claim = {
        {"id", "p.hbm"}, {"lever", "roofline"},
        {"source", {{"file", "000_probe.txt"}, {"line", 1}, {"quote", "80 GB"}, {"section", "probe"}}},
        {"statement", "probe"}, {"published", {{"value", 80}, {"unit", "GB"}}},
        {"check", {{"kind", "gpu-only"}, {"why", "probe"}}}, {"tolerance", {{"relative", 0.05}}}};
    const std::string cmd = "reproduce --format json --claims " + dir + "/experiments/claims.json --seeds " + dir;
    auto run = [&](const nlohmann::json& c, const std::string& skips, bool with_stderr = false) {
        std::ofstream(dir + "/experiments/claims.json")
            << nlohmann::json{{"schema", "memwall.claims/1"}, {"claims", {c}}}.dump(1);
        std::ofstream(dir + "/experiments/coverage.json") << skips;
        return memwall(cmd, with_stderr);
    };
    const std::string line2 = R"({"file": "000_probe.txt", "line": 2, "kind": "year", "tokens": ["2024", "2024"]},)"
                              R"( {"file": "000_probe.txt", "line": 2, "kind": "heading/numbering", "tokens": ["3"]})";
    // "80 GB" twice, no occurrence: refused as a quote (misquoted, with why).
    auto r = run(claim, R"({"skips": [)" + line2 + "]}");
    ASSERT_EQ(r.status, 0) << r.output.substr(0, 2000);
    auto doc = nlohmann::json::parse(r.output);
    ASSERT_EQ(doc["coverage"]["misquoted"].size(), 1u) << doc["coverage"]["misquoted"];
    EXPECT_NE(doc["coverage"]["misquoted"][0].value("why", "").find("occurs 2 times"), std::string::npos);
    // The second occurrence named: the first 80 and both 4s are left; one "4"
    // listed skips one of them.
    claim["source"]["occurrence"] = 2;
    r = run(claim, R"({"skips": [)" + line2 +
                       R"(, {"file": "000_probe.txt", "line": 1, "kind": "format name", "tokens": ["4", "80"]}]})");
    ASSERT_EQ(r.status, 0) << r.output.substr(0, 2000);
    doc = nlohmann::json::parse(r.output);
    EXPECT_TRUE(doc["coverage"]["misquoted"].empty()) << doc["coverage"]["misquoted"];
    const auto& n = doc["coverage"]["numbers"];
    EXPECT_EQ(n["found"], 7) << n;
    EXPECT_EQ(n["in_claim_quotes_or_inputs"], 1) << n;
    EXPECT_EQ(n["skipped_with_a_reason"], 5) << n;  // 4 and the first 80 on line 1; 3, 2024, 2024 on line 2
    EXPECT_EQ(n["not_yet_accounted_for"], 1) << n;
    EXPECT_EQ(doc["coverage"]["unaccounted_numbers"]["000_probe.txt"]["1"], nlohmann::json({"4"}));
    // A token the line does not hold outside the quotes (the quoted 80 is not
    // free to skip), and a whole-line skip of the claimed line: refused.
    r = run(claim,
            R"({"skips": [)" + line2 +
                R"(, {"file": "000_probe.txt", "line": 1, "kind": "format name", "tokens": ["4", "80", "80"]}]})",
            true);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.output.find("line 1 skips '80'"), std::string::npos) << r.output.substr(0, 500);
    r = run(claim, R"({"skips": [)" + line2 + R"(, {"file": "000_probe.txt", "line": 1, "kind": "format name"}]})",
            true);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.output.find("line 1 holds a claim's quote"), std::string::npos) << r.output.substr(0, 500);
    // A skip of a line the text does not have is refused; one of a file the
    // seeds do not hold is listed (the seeds may be another folder's).
    r = run(claim, R"({"skips": [{"file": "000_probe.txt", "line": 9, "kind": "year"}]})", true);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.output.find("are not lines of 000_probe.txt (1..2)"), std::string::npos) << r.output.substr(0, 500);
    r = run(claim, R"({"skips": [)" + line2 + R"(, {"file": "001_missing.txt", "line": 1, "kind": "year"}]})");
    ASSERT_EQ(r.status, 0) << r.output.substr(0, 500);
    EXPECT_EQ(nlohmann::json::parse(r.output)["coverage"]["skips_of_files_not_in_seeds"].size(), 1u);
    std::filesystem::remove_all(dir);
}
