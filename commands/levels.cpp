#include "commands/levels.hpp"

#include <algorithm>
#include <regex>

#include "harness/results.hpp"
#include "harness/command.hpp"
#include "harness/strings.hpp"

namespace mw {

namespace fs = std::filesystem;

std::vector<std::string> level_ids(const fs::path& levels_dir) {
    std::vector<std::string> ids;
    if (fs::is_directory(levels_dir))
        for (auto& d : fs::directory_iterator(levels_dir))
            if (fs::exists(d.path() / "level.json")) ids.push_back(d.path().filename().string());
    std::sort(ids.begin(), ids.end());
    return ids;
}

LevelDir find_level(const fs::path& levels_dir, const std::string& name) {
    std::vector<std::string> known;
    for (auto& dir_name : level_ids(levels_dir)) {
        const fs::path dir = levels_dir / dir_name;
        auto doc = read_json_file(dir / "level.json");
        const std::string id = doc.value("id", dir_name);
        known.push_back(id);
        // "01-vectorization" answers to "01", "1" and "vectorization" as well.
        std::smatch m;
        const bool numbered = std::regex_match(id, m, std::regex("0*([0-9]+)-(.*)"));
        const bool hit = name == id || name == doc.value("lever", "") ||
                         (numbered && (name == m[2].str() || name == id.substr(0, id.find('-')) || name == m[1].str()));
        if (hit) return {dir, id, std::move(doc)};
    }
    throw UsageError("unknown level '" + name + "'; valid levels: " +
                     (known.empty() ? "(none found under " + levels_dir.string() + ")" : join(known)));
}

}  // namespace mw
