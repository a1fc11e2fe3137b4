// The house's floors, read from the code: includes run one way,
//
//   engine (harness/) <- kernels/ <- reference/ <- optimized/ <- levels/
//                           ^
//                           +-- model/ and commands/ stand on kernels/
//
// so a lower floor never includes a higher one (reference/ may use model/,
// the oracle; levels/ may use commands/grade/, the worker's API; commands/
// and model/ never use reference/ or optimized/: levers reach them by
// registration). No source anywhere #includes a .cpp or .cu file (the grader
// links the worker library instead). The engine names no lever, op or
// variant of the registry.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness/registry.hpp"

namespace {

namespace fs = std::filesystem;
const fs::path kRoot = MEMWALL_SOURCE_DIR;

const std::vector<std::string> kFloors = {"harness", "kernels", "model", "commands", "reference", "optimized", "levels"};

// What each floor may include (besides itself).
const std::map<std::string, std::set<std::string>> kMayInclude = {
    {"harness", {}},
    {"kernels", {"harness"}},
    {"model", {"harness", "kernels"}},
    {"commands", {"harness", "kernels", "model"}},
    {"reference", {"harness", "kernels", "model"}},
    {"optimized", {"harness", "kernels", "model", "reference"}},
    {"levels", {"harness", "kernels", "model", "commands", "reference", "optimized"}},
};

std::string floor_of(const std::string& path) {
    const auto slash = path.find('/');
    const std::string top = slash == std::string::npos ? "" : path.substr(0, slash);
    for (auto& f : kFloors)
        if (f == top) return f;
    return "";
}

bool is_source(const fs::path& p) {
    static const std::set<std::string> exts = {".cpp", ".hpp", ".cu", ".cuh", ".h", ".cc"};
    return exts.count(p.extension().string()) > 0;
}

std::string read(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Every source file under `dirs` (repository-relative), build folders aside.
std::vector<std::string> sources_under(const std::vector<std::string>& dirs) {
    std::vector<std::string> out;
    for (auto& d : dirs) {
        if (!fs::exists(kRoot / d)) continue;
        for (auto& e : fs::recursive_directory_iterator(kRoot / d)) {
            if (!e.is_regular_file() || !is_source(e.path())) continue;
            const std::string rel = fs::relative(e.path(), kRoot).generic_string();
            if (rel.find("/build") != std::string::npos) continue;
            out.push_back(rel);
        }
    }
    return out;
}

struct Include {
    std::string file, target;
    int line;
};

std::vector<Include> quoted_includes(const std::string& file) {
    static const std::regex inc(R"re(^\s*#\s*include\s+"([^"]+)")re");
    std::vector<Include> out;
    std::stringstream ss(read(kRoot / file));
    int n = 0;
    std::smatch m;
    for (std::string line; std::getline(ss, line);) {
        ++n;
        if (std::regex_search(line, m, inc)) out.push_back({file, m[1], n});
    }
    return out;
}

// The text of a source without its comments (strings kept).
std::string code_only(const std::string& text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\'' && i + 2 < text.size()) {  // a character literal ('"' among them)
            const std::size_t end = text.find('\'', i + (text[i + 1] == '\\' ? 3 : 2));
            if (end == std::string::npos) break;
            out += text.substr(i, end - i + 1);
            i = end;
        } else if (text[i] == '"') {  // a string literal, copied whole
            const std::size_t start = i;
            for (++i; i < text.size() && text[i] != '"'; ++i)
                if (text[i] == '\\') ++i;
            out += text.substr(start, i - start + 1);
        } else if (text.compare(i, 2, "//") == 0) {
            while (i < text.size() && text[i] != '\n') ++i;
            out += '\n';
        } else if (text.compare(i, 2, "/*") == 0) {
            const auto end = text.find("*/", i + 2);
            i = end == std::string::npos ? text.size() : end + 1;
        } else {
            out += text[i];
        }
    }
    return out;
}

TEST(Layers, FloorsTableIsWhole) {
    for (auto& f : kFloors) EXPECT_TRUE(kMayInclude.count(f)) << f;
    EXPECT_EQ(floor_of("harness/registry.hpp"), "harness");
    EXPECT_EQ(floor_of("optimized/fusion/softmax_online.cpp"), "optimized");
    EXPECT_EQ(floor_of("tests/harness/test_layers.cpp"), "");
    EXPECT_EQ(floor_of("harnessx/a.hpp"), "");
}

TEST(Layers, NoIncludeRunsFromALowerFloorToAHigherOne) {
    int checked = 0;
    for (auto& file : sources_under(kFloors)) {
        const std::string from = floor_of(file);
        for (auto& inc : quoted_includes(file)) {
            const std::string to = floor_of(inc.target);
            if (to.empty() || to == from) continue;
            ++checked;
            EXPECT_TRUE(kMayInclude.at(from).count(to))
                << file << ":" << inc.line << " (" << from << ") includes " << inc.target << " (" << to
                << "): the " << from << " floor stands below " << to << "; move the shared part down";
        }
    }
    EXPECT_GT(checked, 100) << "too few cross-floor includes found: is MEMWALL_SOURCE_DIR right?";
}

TEST(Layers, NoSourceIncludesACppOrCuFile) {
    std::vector<std::string> dirs = kFloors;
    for (const char* d : {"tests", "notebooks-cpp", "experiments"}) dirs.push_back(d);
    int files = 0;
    for (auto& file : sources_under(dirs)) {
        // Hostile submissions are a student's code, not the project's: one
        // of them tries to include the instructor's solution.
        if (file.rfind("tests/grade/submissions/", 0) == 0) continue;
        ++files;
        for (auto& inc : quoted_includes(file)) {
            const std::string ext = fs::path(inc.target).extension().string();
            EXPECT_TRUE(ext != ".cpp" && ext != ".cu" && ext != ".cc")
                << file << ":" << inc.line << " includes " << inc.target
                << ": link the code (a library, or a header that declares it) instead";
        }
    }
    EXPECT_GT(files, 200);
}

// Words the engine uses for its own things that some variants are also
// named after: number formats (a variant "fp32" stores its weights so), a
// thread count (the "threads" rung), the libraries whose versions the
// machine block records (and whose GEMM calibrate times, or whose
// loading the registry checks for the rungs that need it).
const std::set<std::string> kEngineWords = {"fp32", "fp16", "bf16", "int8", "int4", "threads", "openblas", "onednn", "cublas"};

TEST(Layers, TheEngineNamesNoLeverOpOrVariant) {
    std::set<std::string> names;
    for (auto& l : mw::lever_names()) names.insert(l);
    for (auto& op : mw::ops()) names.insert(op.name);
    for (auto& v : mw::variants()) names.insert(v.name);
    ASSERT_GT(names.size(), 50u);
    for (auto& w : kEngineWords) names.erase(w);
    static const std::regex literal(R"re("([A-Za-z0-9_\-]+)")re");
    for (auto& file : sources_under({"harness"})) {
        const std::string code = code_only(read(kRoot / file));
        for (std::sregex_iterator it(code.begin(), code.end(), literal), end; it != end; ++it)
            EXPECT_FALSE(names.count((*it)[1])) << file << " names \"" << (*it)[1]
                                                << "\", a lever, op or variant: the engine knows none; let the "
                                                   "op or variant declare what it needs";
    }
}

TEST(Layers, CodeOnlyDropsCommentsAndKeepsStrings) {
    EXPECT_EQ(code_only("a // \"gemm\"\nb"), "a \nb");
    EXPECT_EQ(code_only("x /* \"gemm\" */ y"), "x  y");
    EXPECT_EQ(code_only("s = \"a // b\";"), "s = \"a // b\";");
    EXPECT_EQ(code_only("s = \"q\\\"x\";"), "s = \"q\\\"x\";");
    EXPECT_EQ(code_only("c == '\"' // \"gemm\"\n"), "c == '\"' \n");
}

}  // namespace
