// Finding a level folder (levels/NN-<lever>/) from what a user types: the
// one lookup `memwall lesson` and `memwall grade` share.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mw {

struct LevelDir {
    std::filesystem::path dir;  // levels/01-vectorization
    std::string id;             // level.json's "id" (else the folder name)
    nlohmann::json manifest;    // level.json
};

// Folder names of every level (a folder with a level.json), sorted.
std::vector<std::string> level_ids(const std::filesystem::path& levels_dir);

// The level `name` names: its id ("01-vectorization"), its number ("01" or
// "1"), its lever ("vectorization", or the manifest's "lever"). Throws
// UsageError (harness/runner.hpp) naming the valid levels.
LevelDir find_level(const std::filesystem::path& levels_dir, const std::string& name);

}  // namespace mw
