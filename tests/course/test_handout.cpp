// `memwall course handout`: a student's folder for every level holds the
// stubs, the lesson and a practice grader that grades from the folder alone,
// and nothing that answers the exercise (by content: winnowed fingerprints
// against every solution and every optimized source of the lever, whatever
// the file is called); a handout that would leak is not written.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands/course/fingerprint.hpp"

namespace fs = std::filesystem;
using namespace mw::course;

namespace {

const fs::path kSource = MEMWALL_SOURCE_DIR;

struct Shell {
    int status = -1;
    std::string output;
};

Shell sh(const std::string& cmd) {
    Shell r;
    std::array<char, 512> buf{};
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    while (fgets(buf.data(), buf.size(), p)) r.output += buf.data();
    const int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "memwall-handout-XXXXXX").string();
        path = mkdtemp(t.data());
        // The sandbox's user (nobody, when the tests run as root) reads the
        // handout's sources from here.
        fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
    }
    ~TempDir() { fs::remove_all(path); }
};

const std::vector<std::string> kLevels = {"01-vectorization", "02-fusion", "03-layout", "04-precision",
                                          "05-checkpointing", "06-kv-cache", "07-speculative", "08-moe"};

// What answers a level, found here without the command's help: every file of
// the level's solutions folder and of its lever's optimized/ folder.
std::vector<Document> answers(const std::string& level) {
    const nlohmann::json manifest = nlohmann::json::parse(read(kSource / "levels" / level / "level.json"));
    std::vector<fs::path> files;
    for (const fs::path& dir : {kSource / "levels" / level / "exercise" / "solutions",
                               kSource / "optimized" / manifest["lever"].get<std::string>()})
        for (auto& e : fs::directory_iterator(dir))
            if (e.is_regular_file() && e.path().extension() != ".txt") files.push_back(e.path());
    std::vector<Document> out;
    for (const fs::path& f : files) out.push_back(Document::of(f.lexically_relative(kSource).string(), read(f)));
    return out;
}

}  // namespace

class Handout : public ::testing::TestWithParam<std::string> {};

TEST_P(Handout, HoldsTheExerciseAndNoAnswer) {
    const std::string level = GetParam();
    TempDir tmp;
    const fs::path out = tmp.path / "handout";
    const Shell r = sh(std::string(MEMWALL_BIN) + " course handout " + level + " --out " + out.string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("none of its"), std::string::npos) << r.output;

    // What a student needs.
    for (const char* f : {"README.md", "lesson.md", "practice.sh", "memwall/memwall"})
        EXPECT_TRUE(fs::is_regular_file(out / f)) << f;
    EXPECT_TRUE(fs::is_regular_file(out / "memwall/src/levels" / level / "level.json"));
    EXPECT_TRUE(fs::is_regular_file(out / "memwall/src/commands/grade/grade_worker.hpp"));
    EXPECT_TRUE(fs::is_regular_file(out / "notebook" / (level + ".ipynb")));
    EXPECT_NE(fs::status(out / "practice.sh").permissions() & fs::perms::owner_exec, fs::perms::none);
    const nlohmann::json manifest = nlohmann::json::parse(read(kSource / "levels" / level / "level.json"));
    for (const auto& x : manifest["exercises"]) {
        const fs::path stub = x["stub"].get<std::string>();
        EXPECT_EQ(read(out / "exercise" / stub.filename()), read(kSource / "levels" / level / stub)) << stub;
        EXPECT_NE(read(out / "README.md").find(x["id"].get<std::string>()), std::string::npos);
    }

    // Nothing that answers it: no solutions or optimized folder by name, and
    // no text file holding a run of any answer's code (the stubs and
    // adapters every student gets are discounted).
    std::vector<Document> given;
    for (auto& e : fs::directory_iterator(kSource / "levels" / level / "exercise"))
        if (e.is_regular_file()) given.push_back(Document::of(e.path().filename().string(), read(e.path())));
    const Base base = base_of(given);
    const std::vector<Document> secret = answers(level);
    ASSERT_FALSE(secret.empty());
    int texts = 0;
    for (auto& e : fs::recursive_directory_iterator(out)) {
        const std::string rel = e.path().lexically_relative(out).generic_string();
        EXPECT_EQ(rel.find("solutions"), std::string::npos) << rel;
        EXPECT_EQ(rel.find("optimized"), std::string::npos) << rel;
        if (!e.is_regular_file() || rel == "memwall/memwall" || e.path().extension() == ".a") continue;
        ++texts;
        const Document d = Document::of(rel, read(e.path()));
        for (const Document& s : secret) {
            const Match m = compare(d, s, base);
            int longest = 0;
            for (const Region& g : m.regions) longest = std::max(longest, g.prints);
            // 4 fingerprints: about 40 tokens in a row, four or five lines
            // of code (a declaration of the public API both sides share is
            // one or two).
            EXPECT_LT(longest, 4) << rel << " holds a run of " << s.name;
            EXPECT_FALSE(is_copy(m)) << rel << " ~ " << s.name << ": " << m.score();
        }
    }
    EXPECT_GE(texts, 6);
}

INSTANTIATE_TEST_SUITE_P(EveryLevel, Handout, ::testing::ValuesIn(kLevels),
                         [](const auto& info) { return std::regex_replace(info.param, std::regex("-"), "_"); });

TEST(HandoutPractice, GradesTheStubFromTheFolderAlone) {
    // The practice grader in a handout compiles against its own memwall/src
    // (the build tree and the repository moved out of the way would show the
    // same): the stub is correct and slow, as from the repository.
    TempDir tmp;
    const fs::path out = tmp.path / "handout";
    ASSERT_EQ(sh(std::string(MEMWALL_BIN) + " course handout 03 --out " + out.string()).status, 0);
    const fs::path report = tmp.path / "r.json";
    const Shell r = sh("env -u MEMWALL_SOURCE_DIR " + (out / "practice.sh").string() + " " +
                     (out / "exercise/transpose_cpu.cpp").string() + " --seed 5 --format json --out " + report.string());
    ASSERT_EQ(r.status, 0) << r.output;
    const nlohmann::json doc = nlohmann::json::parse(read(report));
    int correct = 0;
    for (const auto& t : doc["tests"]) correct += t["kind"] == "correctness" && t["passed"].get<bool>();
    EXPECT_EQ(correct, 8) << doc.dump(2);
    EXPECT_LT(doc["score"].get<double>(), doc["max_score"].get<double>());
}

TEST(HandoutRefuses, AFolderThatWouldHoldAnAnswer) {
    // A copy of the source tree whose lesson lists rung 3's micro-kernel (an
    // author pasting code into a lesson): the handout is not written, and the
    // message names the rung.
    TempDir tmp;
    const fs::path root = tmp.path / "src";
    fs::create_directories(root);
    for (const char* d : {"commands", "harness", "kernels", "reference", "optimized", "levels", "notebooks-cpp"})
        fs::copy(kSource / d, root / d, fs::copy_options::recursive);
    const std::string rung = read(kSource / "optimized/vectorization/gemm_simd.cpp");
    const std::size_t from = rung.find("template <int MR>\nMW_TARGET_AVX2");
    ASSERT_NE(from, std::string::npos);
    std::ofstream(root / "levels/01-vectorization/lesson.rendered.md", std::ios::app)
        << "\n## Appendix\n\n```cpp\n" << rung.substr(from, 1200) << "\n```\n";
    const fs::path out = tmp.path / "handout";
    const Shell r = sh("MEMWALL_SOURCE_DIR=" + root.string() + " " + MEMWALL_BIN + " course handout 01 --out " + out.string());
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_NE(r.output.find("lesson.md lines"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("optimized/vectorization/gemm_simd.cpp"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out));
    for (auto& e : fs::directory_iterator(tmp.path)) EXPECT_EQ(e.path().filename().string().find("partial"), std::string::npos);
}

TEST(HandoutRefuses, BadInputBeforeAnyWork) {
    TempDir tmp;
    Shell r = sh(std::string(MEMWALL_BIN) + " course handout 09 --out " + (tmp.path / "h").string());
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("01-vectorization"), std::string::npos) << r.output;  // the valid levels named
    EXPECT_FALSE(fs::exists(tmp.path / "h"));
    std::ofstream(tmp.path / "keep.txt") << "mine";
    r = sh(std::string(MEMWALL_BIN) + " course handout 01 --out " + tmp.path.string());
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("exists"), std::string::npos) << r.output;
    EXPECT_EQ(read(tmp.path / "keep.txt"), "mine");
}
