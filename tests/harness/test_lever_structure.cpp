// The rules every lever follows (docs/adding-a-lever.md), checked over the
// whole registry, so a new lever is held to them without a test of its own:
//   - every op has exactly one reference variant, at rung 0, on each backend
//     it has variants on;
//   - a backend's variants of an op have distinct names, and only variants
//     of the same rung idea share a rung (same source file);
//   - each variant's lever is its op's lever, its rationale is not empty, and
//     its source file lives in reference/<lever>/ or optimized/<lever>/;
//   - every rung file a lever header's ladder comment names exists, and the
//     rung number the comment gives is the registered one;
//   - every step of a level (levels/*/level.json) names a registered variant
//     of its op at the rung the step gives;
//   - a function declared in a kernels/ or reference/ header but defined in
//     an optimized/ rung (other code calls the rung's idea through it) has
//     that rung file named in the header.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "harness/registry.hpp"
#include "harness/results.hpp"

namespace {

namespace fs = std::filesystem;
const fs::path kRoot = MEMWALL_SOURCE_DIR;

std::string where(const mw::Variant& v) {
    return v.op + "/" + v.name + " (" + mw::to_string(v.backend) + ", " + v.source + ")";
}

TEST(LeverStructure, EveryOpHasOneReferenceRungZeroPerBackend) {
    for (auto& op : mw::ops()) {
        std::map<mw::Backend, int> variants, references;
        for (auto* v : mw::variants_of(op.name)) {
            ++variants[v->backend];
            if (v->role == mw::Role::reference) {
                ++references[v->backend];
                EXPECT_EQ(v->rung, 0) << "reference variant not at rung 0: " << where(*v);
            } else if (v->role != mw::Role::exercise) {
                EXPECT_GT(v->rung, 0) << "only the reference variant sits at rung 0: " << where(*v);
            }
        }
        EXPECT_FALSE(variants.empty()) << "op " << op.name << " has no variants";
        for (auto& [b, n] : variants)
            EXPECT_EQ(references[b], 1) << "op " << op.name << " on " << mw::to_string(b) << ": " << references[b]
                                        << " reference variants";
    }
}

TEST(LeverStructure, RungsAreDistinctUnlessOneFileHoldsTheRung) {
    for (auto& op : mw::ops()) {
        std::map<std::pair<mw::Backend, int>, std::string> file_of_rung;
        std::set<std::pair<mw::Backend, std::string>> names;
        for (auto* v : mw::variants_of(op.name)) {
            EXPECT_TRUE(names.insert({v->backend, v->name}).second) << "name used twice: " << where(*v);
            if (v->role == mw::Role::vendor || v->role == mw::Role::exercise) continue;
            auto [it, fresh] = file_of_rung.insert({{v->backend, v->rung}, v->source});
            // Several variants may share a rung only as configurations of one
            // rung file (int4 at G = 32/64/128, bf16 and fp16 weights).
            EXPECT_TRUE(fresh || it->second == v->source)
                << "rung " << v->rung << " of " << op.name << " is both " << it->second << " and " << where(*v);
        }
    }
}

TEST(LeverStructure, VariantsBelongToTheirOpsLeverAndSayWhy) {
    for (auto& v : mw::variants()) {
        const mw::Op* op = mw::find_op(v.op);
        ASSERT_NE(op, nullptr) << "variant of an unknown op: " << where(v);
        EXPECT_EQ(v.lever, op->lever) << where(v);
        EXPECT_FALSE(v.rationale.empty()) << "no rationale: " << where(v);
        if (v.role == mw::Role::exercise) continue;
        const bool in_lever = v.source.rfind("reference/" + op->lever + "/", 0) == 0 ||
                              v.source.rfind("optimized/" + op->lever + "/", 0) == 0;
        EXPECT_TRUE(in_lever) << "variant outside reference/" << op->lever << "/ and optimized/" << op->lever
                              << "/: " << where(v);
        EXPECT_TRUE(fs::exists(kRoot / v.source)) << where(v);
    }
}

// Ladder lines of a lever header: "//   optimized/<lever>/<file>  [rung] N ...".
struct LadderLine {
    std::string header, file, rung;
};

std::vector<LadderLine> ladder_lines() {
    std::vector<LadderLine> out;
    const std::regex line(R"(^//\s+((?:reference|optimized)/[A-Za-z0-9_]+/[A-Za-z0-9_]+\.(?:cpp|cu))\s+(?:rung\s+)?([0-9]+|vendor)\b)");
    for (auto& lever : fs::directory_iterator(kRoot / "reference"))
        for (auto& f : fs::directory_iterator(lever.path())) {
            if (f.path().extension() != ".hpp") continue;
            std::ifstream in(f.path());
            std::string text;
            for (std::smatch m; std::getline(in, text);)
                if (std::regex_search(text, m, line))
                    out.push_back({fs::relative(f.path(), kRoot).string(), m[1].str(), m[2].str()});
        }
    return out;
}

TEST(LeverStructure, LadderCommentsNameExistingFilesAndRegisteredRungs) {
    const auto lines = ladder_lines();
    std::set<std::string> levers;
    for (auto& l : lines) levers.insert(l.file.substr(l.file.find('/') + 1, l.file.rfind('/') - l.file.find('/') - 1));
    // Every lever with variants has a ladder comment.
    for (auto& lever : mw::lever_names()) EXPECT_TRUE(levers.count(lever)) << "no ladder comment for " << lever;

    for (auto& l : lines) {
        EXPECT_TRUE(fs::exists(kRoot / l.file)) << l.header << " names " << l.file << ", which does not exist";
        std::set<std::string> registered;
        for (auto& v : mw::variants())
            if (v.source == l.file) registered.insert(v.role == mw::Role::vendor ? "vendor" : std::to_string(v.rung));
        if (registered.empty()) continue;  // e.g. a CUDA file in a build without the CUDA backends
        EXPECT_TRUE(registered.count(l.rung)) << l.header << " puts " << l.file << " at rung " << l.rung
                                              << ", but its variants are registered at another rung";
    }
}

TEST(LeverStructure, LevelStepsNameRegisteredRungs) {
    int steps = 0;
    for (auto& dir : fs::directory_iterator(kRoot / "levels")) {
        if (!fs::exists(dir.path() / "level.json")) continue;
        const auto level = mw::read_json_file(dir.path() / "level.json");
        for (auto& step : level.value("steps", nlohmann::json::array())) {
            if (!step.contains("variant") || !step.contains("rung")) continue;
            ++steps;
            // A step's op defaults to the level's.
            const std::string op = step.value("op", level.value("op", "")), name = step["variant"];
            const int rung = step["rung"];
            bool found = false, same_rung = false;
            for (auto* v : mw::variants_of(op))
                if (v->name == name) {
                    found = true;
                    same_rung |= v->rung == rung;
                }
            EXPECT_TRUE(found) << dir.path().filename().string() << ": step names " << op << "/" << name
                               << ", which is not registered";
            EXPECT_TRUE(!found || same_rung) << dir.path().filename().string() << ": step puts " << op << "/" << name
                                             << " at rung " << rung << ", the registry elsewhere";
        }
    }
    EXPECT_GT(steps, 0) << "no level steps found under " << (kRoot / "levels").string();
}

// Statements at column 0 of a source file (namespace scope in this
// project's style), each joined over its lines up to its first ';' or '{'.
std::vector<std::string> column0_statements(const fs::path& file) {
    std::ifstream f(file);
    std::vector<std::string> out;
    std::string cur;
    for (std::string line; std::getline(f, line);) {
        if (cur.empty() && (line.empty() || std::isspace(static_cast<unsigned char>(line[0])) || line[0] == '/' ||
                            line[0] == '#' || line[0] == '}'))
            continue;
        cur += line + " ";
        if (line.find(';') != std::string::npos || line.find('{') != std::string::npos) {
            out.push_back(cur);
            cur.clear();
        }
    }
    return out;
}

// The function a statement declares or defines ("" if none), and whether it
// is a definition (a body follows) rather than a declaration.
std::pair<std::string, bool> function_of(const std::string& stmt) {
    static const std::regex fn(R"(^[A-Za-z_][\w:<>,\s\*&]*?[\s\*&]((?:\w+::)*)(\w+)\s*\()");
    std::smatch m;
    if (stmt.rfind("namespace", 0) == 0 || stmt.rfind("MW_", 0) == 0 || stmt.rfind("struct", 0) == 0 ||
        stmt.rfind("using", 0) == 0 || stmt.rfind("static_assert", 0) == 0 || !std::regex_search(stmt, m, fn))
        return {"", false};
    const auto semi = stmt.find(';'), brace = stmt.find('{');
    return {m[2], brace != std::string::npos && (semi == std::string::npos || brace < semi)};
}

std::vector<fs::path> files_under(const std::string& dir, const std::set<std::string>& exts) {
    std::vector<fs::path> out;
    for (auto& e : fs::recursive_directory_iterator(kRoot / dir))
        if (e.is_regular_file() && exts.count(e.path().extension().string())) out.push_back(e.path());
    return out;
}

TEST(LeverStructure, FunctionsDeclaredBelowAndDefinedInARungNameTheRung) {
    // Where each function is defined: in a rung, or on the floors below.
    std::map<std::string, std::set<std::string>> rung_files;  // name -> optimized/ files defining it
    std::set<std::string> defined_below;
    for (const char* dir : {"optimized", "kernels", "reference", "model", "harness"})
        for (auto& file : files_under(dir, {".cpp", ".cu"}))
            for (auto& stmt : column0_statements(file)) {
                auto [name, body] = function_of(stmt);
                if (name.empty() || !body) continue;
                if (std::string(dir) == "optimized") rung_files[name].insert(file.filename().string());
                else defined_below.insert(name);
            }
    int checked = 0;
    for (const char* dir : {"kernels", "reference"})
        for (auto& header : files_under(dir, {".hpp", ".cuh"})) {
            std::ifstream f(header);
            std::stringstream text;
            text << f.rdbuf();
            for (auto& stmt : column0_statements(header)) {
                auto [name, body] = function_of(stmt);
                if (name.empty() || body || defined_below.count(name) || !rung_files.count(name)) continue;
                ++checked;
                bool named = false;
                for (auto& rung : rung_files[name]) named |= text.str().find(rung) != std::string::npos;
                EXPECT_TRUE(named) << fs::relative(header, kRoot).string() << " declares " << name
                                   << ", defined in rung " << *rung_files[name].begin()
                                   << ": say so in the header (\"defined in optimized/<lever>/<file>\")";
            }
        }
    EXPECT_GT(checked, 10) << "too few rung functions declared below the rungs were found";
}

TEST(LeverStructure, FunctionOfReadsDeclarationsAndDefinitions) {
    EXPECT_EQ(function_of("void gemm_threads(const float* A, int M); "), std::make_pair(std::string("gemm_threads"), false));
    EXPECT_EQ(function_of("Instance prepare_every_k(Problem& p) { "), std::make_pair(std::string("prepare_every_k"), true));
    EXPECT_EQ(function_of("double mw::gemm::bytes_blocked(const Shape&, double, double) { return 0; } "),
              std::make_pair(std::string("bytes_blocked"), true));
    EXPECT_EQ(function_of("std::vector<float> init_params(const Config& c, std::uint64_t seed); "),
              std::make_pair(std::string("init_params"), false));
    EXPECT_EQ(function_of("namespace mw::gemm { ").first, "");
    EXPECT_EQ(function_of("MW_REGISTER_VARIANT(gemm_threads_cpu, { ").first, "");
}

}  // namespace
