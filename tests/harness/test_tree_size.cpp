// The tracked tree stays small enough to travel: a borrowed GPU machine
// receives the tree and the GPU kit together, 64 MiB at most (issue "GPU
// kit"). Budgets: the whole tracked tree 30.5 MB (30 until the claims
// accounted for every number of the seeds; the kit, ~21 MB, keeps tree + kit
// under scripts/gpu-kit.sh's 56 MB); results/ 15 MB besides the
// trained checkpoints (results/model/*.safetensors). A failure names the
// largest files, so that whoever grew the tree sees what to slim.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
const fs::path kRoot = MEMWALL_SOURCE_DIR;

constexpr double kTreeBudget = 30.5e6;
constexpr double kResultsBudget = 15e6;

struct Tracked {
    std::string path;
    std::uintmax_t bytes;
};

// Every file git tracks, with its size in the working tree; empty where the
// source folder is not a git checkout or git is missing.
std::vector<Tracked> tracked_files(bool& ok) {
    std::vector<Tracked> files;
    const std::string cmd = "git -C '" + kRoot.string() + "' ls-files -z 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    ok = p != nullptr;
    if (!p) return files;
    std::string name;
    for (int c; (c = std::fgetc(p)) != EOF;) {
        if (c != '\0') {
            name.push_back(char(c));
            continue;
        }
        std::error_code ec;
        const auto bytes = fs::file_size(kRoot / name, ec);
        if (!ec) files.push_back({name, bytes});  // a tracked file deleted in the work tree weighs nothing
        name.clear();
    }
    const int status = pclose(p);
    ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && !files.empty();
    return files;
}

bool is_checkpoint(const std::string& path) {
    return path.rfind("results/model/", 0) == 0 && fs::path(path).extension() == ".safetensors";
}

std::string mb(double bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f MB", bytes / 1e6);
    return text;
}

std::string largest(std::vector<Tracked> files, std::size_t n = 10) {
    std::sort(files.begin(), files.end(), [](auto& a, auto& b) { return a.bytes > b.bytes; });
    std::string out;
    for (std::size_t i = 0; i < std::min(n, files.size()); ++i)
        out += "  " + std::to_string(files[i].bytes / 1000) + " kB  " + files[i].path + "\n";
    return out;
}

double total(const std::vector<Tracked>& files) {
    double sum = 0;
    for (auto& f : files) sum += double(f.bytes);
    return sum;
}

TEST(TreeSize, TheTrackedTreeFitsItsBudget) {
    bool ok = false;
    const auto files = tracked_files(ok);
    if (!ok) GTEST_SKIP() << kRoot << " is not a git checkout (or git is missing): nothing to weigh";
    EXPECT_LE(total(files), kTreeBudget) << "the tracked tree weighs " << mb(total(files)) << ", over its "
                                         << mb(kTreeBudget) << "; the largest files:\n"
                                         << largest(files);
}

TEST(TreeSize, ResultsBesidesTheCheckpointsFitTheirBudget) {
    bool ok = false;
    const auto files = tracked_files(ok);
    if (!ok) GTEST_SKIP() << kRoot << " is not a git checkout (or git is missing): nothing to weigh";
    std::vector<Tracked> results;
    for (auto& f : files)
        if (f.path.rfind("results/", 0) == 0 && !is_checkpoint(f.path)) results.push_back(f);
    ASSERT_FALSE(results.empty()) << "no results/ files tracked";
    EXPECT_LE(total(results), kResultsBudget)
        << "results/ (besides the checkpoints) weighs " << mb(total(results)) << ", over its "
        << mb(kResultsBudget) << "; the largest files:\n"
        << largest(results);
}

}  // namespace
