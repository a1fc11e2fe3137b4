// Results documents: versioned JSON (machine, ceilings, runs[]), written
// atomically, plus markdown/CSV reports and run-to-run comparison.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace mw {

inline constexpr const char* kResultsSchema = "memwall.results/1";
inline constexpr const char* kCeilingsSchema = "memwall.ceilings/1";

// CPU model and flags, cores, caches, compiler and flags, git commit, and the
// GPU block when a GPU is present.
nlohmann::json machine_info();

// Writes `text` to `path` through a temporary file in the same directory and
// a rename, so a reader never sees a partial file. Creates parent folders.
void write_file_atomic(const std::filesystem::path& path, const std::string& text);
void write_json_atomic(const std::filesystem::path& path, const nlohmann::json& doc);

// Reads a results (or ceilings) document; throws with the path and reason.
nlohmann::json read_json_file(const std::filesystem::path& path);

// A path as results files and rendered lessons record it, so that they hold
// no machine's folders: relative to the repository root `root` when it lies
// under it (a relative path is taken from the current directory); an
// absolute path elsewhere keeps only its file name; anything else as given.
std::string path_for_record(const std::string& path, const std::filesystem::path& root);
// This build's repository root: $MEMWALL_SOURCE_DIR, else the source folder
// the build was configured from.
std::filesystem::path source_root();
// The same against this build's repository root ($MEMWALL_SOURCE_DIR, else
// the source folder the build was configured from).
std::string path_for_record(const std::string& path);
// "memwall <args>", each path argument (also `--flag=path`) through
// path_for_record.
std::string command_for_record(int argc, char** argv);
// Throws std::runtime_error naming the missing field when `doc` is not a
// results document this version understands.
void validate_results(const nlohmann::json& doc);

std::string report_markdown(const nlohmann::json& results);
std::string report_csv(const nlohmann::json& results);
// Per matching (lever, op, variant, backend, dtype, shape): time in both
// files, the ratio and the verdict of compare_runs, as markdown.
std::string compare_markdown(const nlohmann::json& base, const nlohmann::json& now);

// One variant in two results files, judged against the noise the two runs
// themselves show. ratio = base best / new best (above 1: new is faster).
// noise = the larger relative spread (median / best - 1) of the two runs,
// doubled, and at least 5%; the verdict is "faster" when ratio > 1 + noise,
// "slower" when ratio < 1 / (1 + noise), else "within noise"; "not timed"
// when either run's time means nothing (cuda-emu, not run). A change of
// correctness overrides: "now INCORRECT" / "now correct".
struct RunComparison {
    double ratio = 0, noise = 0;
    std::string verdict;
};
RunComparison compare_runs(const nlohmann::json& base, const nlohmann::json& now);
// The key runs of two files are matched by: lever / op / backend / dtype / shape / variant.
std::string run_key(const nlohmann::json& run);

// The speedup of b over a round by round (--rounds N, interleaved: round i
// of both ran minutes apart at most, on one machine state): the smallest and
// largest of a_i / b_i over two time_s.round_best arrays; nothing when they
// are not both N >= 2 positive times. The best-of-all ratio min a / min b
// always lies inside it.
std::optional<std::pair<double, double>> paired_ratio_range(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace mw
