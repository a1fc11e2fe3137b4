// docs/course.md, "Authoring an exercise": the files the section shows
// (each code block after a `<!-- file: PATH -->` line), written as they are
// into a copy of the source tree, make an exercise the grader grades: the
// stub is correct on every shape, and an answer that forgets to normalize is
// not. If the section's files stop working, this fails.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

const fs::path kSource = MEMWALL_SOURCE_DIR;

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// PATH -> contents of every `<!-- file: PATH -->` block of the doc.
std::vector<std::pair<std::string, std::string>> doc_files(const std::string& doc) {
    std::vector<std::pair<std::string, std::string>> out;
    const std::string mark = "<!-- file: ";
    for (std::size_t at = doc.find(mark); at != std::string::npos; at = doc.find(mark, at + 1)) {
        const std::size_t end = doc.find(" -->", at);
        const std::string path = doc.substr(at + mark.size(), end - at - mark.size());
        const std::size_t open = doc.find("```", end), body = doc.find('\n', open) + 1;
        const std::size_t close = doc.find("\n```", body);
        out.emplace_back(path, doc.substr(body, close + 1 - body));
    }
    return out;
}

nlohmann::json grade(const fs::path& root, const fs::path& submission, const fs::path& report) {
    const std::string cmd = "MEMWALL_SOURCE_DIR=" + root.string() + " " + MEMWALL_BIN + " grade 90 --submission " +
                            submission.string() + " --seed 3 --format json --out " + report.string() + " 2>&1";
    std::array<char, 512> buf{};
    std::string output;
    FILE* p = popen(cmd.c_str(), "r");
    while (fgets(buf.data(), buf.size(), p)) output += buf.data();
    const int st = pclose(p);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << output;
    return fs::exists(report) ? nlohmann::json::parse(read(report)) : nlohmann::json();
}

int correct_shapes(const nlohmann::json& doc) {
    int n = 0;
    for (const auto& t : doc["tests"]) n += t["kind"] == "correctness" && t["passed"].get<bool>();
    return n;
}

}  // namespace

TEST(Authoring, TheDocsExerciseIsGraded) {
    const auto files = doc_files(read(kSource / "docs/course.md"));
    ASSERT_EQ(files.size(), 3u) << "the manifest, the stub and the adapter";

    std::string t = (fs::temp_directory_path() / "memwall-authoring-XXXXXX").string();
    const fs::path tmp = mkdtemp(t.data());
    fs::permissions(tmp, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec |
                             fs::perms::group_read | fs::perms::group_exec);  // the sandbox's user reads the tree
    const fs::path root = tmp / "src";
    fs::create_directories(root);
    for (const char* d : {"commands", "harness", "kernels", "reference", "optimized", "levels"})
        fs::copy(kSource / d, root / d, fs::copy_options::recursive);
    for (const auto& [path, text] : files) {
        ASSERT_FALSE(fs::exists(root / path)) << path << " would replace a file of the project";
        fs::create_directories((root / path).parent_path());
        std::ofstream(root / path) << text;
    }
    const fs::path stub = root / "levels/90-softmax/exercise/softmax_cpu.cpp";
    ASSERT_TRUE(fs::exists(stub));

    const nlohmann::json good = grade(root, stub, tmp / "good.json");
    ASSERT_TRUE(good.is_object());
    EXPECT_EQ(good["exercise"], "softmax-cpu");
    EXPECT_EQ(good["op"], "softmax");
    EXPECT_EQ(correct_shapes(good), 4) << good.dump(2);
    EXPECT_GE(good["score"].get<double>(), 60.0);

    // The same loop without the division: wrong on every shape but 1 x 1's
    // (whose one exp is 1 anyway).
    std::string wrong = read(stub);
    const std::string divide = "for (int j = 0; j < cols; ++j) yr[j] /= s;";
    ASSERT_NE(wrong.find(divide), std::string::npos);
    wrong.replace(wrong.find(divide), divide.size(), "(void)s;");
    std::ofstream(tmp / "wrong.cpp") << wrong;
    const nlohmann::json bad = grade(root, tmp / "wrong.cpp", tmp / "bad.json");
    ASSERT_TRUE(bad.is_object());
    EXPECT_EQ(correct_shapes(bad), 1) << bad.dump(2);
    EXPECT_LE(bad["score"].get<double>(), 15.0 + 1e-9);
    fs::remove_all(tmp);
}
