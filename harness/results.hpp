// Results documents: versioned JSON (machine, ceilings, runs[]), written
// atomically, plus markdown/CSV reports and run-to-run comparison.
#pragma once

#include <filesystem>
#include <string>

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
// files and the ratio, as markdown.
std::string compare_markdown(const nlohmann::json& base, const nlohmann::json& now);

}  // namespace mw
