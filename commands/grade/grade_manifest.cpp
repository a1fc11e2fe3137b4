// Finding the repository and reading level manifests for `memwall grade`.
#include <unistd.h>

#include <fstream>

#include "commands/grade/grade.hpp"
#include "commands/levels.hpp"
#include "harness/results.hpp"
#include "harness/command.hpp"

namespace mw::grade {

namespace fs = std::filesystem;

namespace {

bool is_source_root(const fs::path& p) { return fs::exists(p / "commands" / "grade" / "grade_worker.hpp"); }

// The build tree's CMakeCache.txt names the source tree it was configured from.
fs::path source_from_cmake_cache() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
        std::ifstream cache(dir / "CMakeCache.txt");
        std::string line;
        while (std::getline(cache, line))
            if (line.rfind("CMAKE_HOME_DIRECTORY:INTERNAL=", 0) == 0) return line.substr(line.find('=') + 1);
    }
    return {};
}

Exercise parse_exercise(const nlohmann::json& level, const nlohmann::json& e, const fs::path& dir) {
    Exercise x;
    x.level_id = level.value("id", dir.filename().string());
    x.level_title = level.value("title", "");
    x.op = e.value("op", level.value("op", ""));  // an exercise may name its own op
    x.level_dir = dir;
    x.id = e.at("id");
    x.backend = e.at("backend");
    x.stub = dir / e.at("stub").get<std::string>();
    x.adapter = dir / e.at("adapter").get<std::string>();
    x.symbol = e.value("symbol", "");
    x.signature = e.value("signature", "");
    x.reference_variant = e.at("reference_variant");
    const auto& g = e.at("grading");
    x.correctness_shapes = g.at("correctness_shapes").get<std::vector<std::string>>();
    x.speed_shape = g.value("speed_shape", "");
    x.threads = g.value("threads", 0);
    x.full_credit_ratio = g.value("full_credit_ratio", 0.75);
    x.floor_ratio = g.value("floor_ratio", 0.02);
    x.zero_credit_ratio = g.value("zero_credit_ratio", 0.0);
    if (!(x.full_credit_ratio > 0) || !(x.zero_credit_ratio >= 0 && x.zero_credit_ratio < x.full_credit_ratio) ||
        !(x.floor_ratio >= 0 && (x.zero_credit_ratio == 0 || x.floor_ratio <= x.zero_credit_ratio)))
        throw UsageError("level " + x.level_id + ", exercise " + x.id + ": grading.floor_ratio " +
                         std::to_string(x.floor_ratio) + ", zero_credit_ratio " + std::to_string(x.zero_credit_ratio) +
                         " and full_credit_ratio " + std::to_string(x.full_credit_ratio) +
                         " must satisfy 0 <= zero_credit_ratio < full_credit_ratio, and floor_ratio <= "
                         "zero_credit_ratio where that is set (points would jump from none at the floor)");
    x.correctness_points = g.value("correctness_points", 60.0);
    x.speed_points = g.value("speed_points", 40.0);
    x.time_limit_s = g.value("time_limit_s", 120.0);
    x.memory_limit_mb = g.value("memory_limit_mb", 2048.0);
    x.emulated_note = g.value("emulated_note", "");
    x.oracle = g.value("oracle", "exact");
    if (g.contains("cxx_flags")) x.cxx_flags = g.at("cxx_flags").get<std::vector<std::string>>();
    for (auto& f : x.cxx_flags)
        if (f.rfind("-O", 0) != 0 && f.rfind("-m", 0) != 0 && f.rfind("-f", 0) != 0)
            throw UsageError("level " + x.level_id + ", exercise " + x.id + ": grading.cxx_flags '" + f +
                             "' is not valid; valid: optimization flags (-O..., -m..., -f...)");
    x.timing = g.value("timing", "round_trip");
    x.prepared_inputs = g.value("prepared_inputs", "");
    if (g.contains("withheld_inputs")) x.withheld_inputs = g.at("withheld_inputs").get<std::vector<std::string>>();
    if (!x.withheld_inputs.empty() && x.backend != "cpu")
        throw UsageError("level " + x.level_id + ", exercise " + x.id +
                         ": grading.withheld_inputs is valid for backend cpu only, not '" + x.backend +
                         "' (a CUDA exercise's inputs are staged in device memory)");
    x.allow_blas = g.value("allow_blas", false);
    x.max_rounds = g.value("max_rounds", 30);
    if (x.max_rounds < 2)
        throw UsageError("level " + x.level_id + ", exercise " + x.id + ": grading.max_rounds " +
                         std::to_string(x.max_rounds) + " must be at least 2");
    if (x.oracle != "exact" && x.oracle != "contract" && x.oracle != "reference")
        throw UsageError("level " + x.level_id + ", exercise " + x.id + ": grading.oracle '" + x.oracle +
                         "' is not valid; valid: exact, contract, reference");
    if (x.timing != "round_trip" && x.timing != "call")
        throw UsageError("level " + x.level_id + ", exercise " + x.id + ": grading.timing '" + x.timing +
                         "' is not valid; valid: round_trip, call");
    return x;
}

}  // namespace

fs::path source_dir() {
    if (const char* env = std::getenv("MEMWALL_SOURCE_DIR"); env && is_source_root(env)) return env;
#ifdef MEMWALL_SOURCE_DIR
    if (is_source_root(MEMWALL_SOURCE_DIR)) return MEMWALL_SOURCE_DIR;
#endif
    if (fs::path p = source_from_cmake_cache(); !p.empty() && is_source_root(p)) return p;
    for (fs::path dir = fs::current_path(); !dir.empty(); dir = dir.parent_path()) {
        if (is_source_root(dir)) return dir;
        if (dir == dir.root_path()) break;
    }
    throw UsageError("cannot find the memwall source tree; set MEMWALL_SOURCE_DIR to the repository root");
}

fs::path levels_dir() {
    if (const char* env = std::getenv("MEMWALL_LEVELS_DIR"); env && *env) return env;
    return source_dir() / "levels";
}

std::vector<Exercise> load_level(const std::string& level) {
    const LevelDir found = find_level(levels_dir(), level);
    std::vector<Exercise> out;
    for (auto& e : found.manifest.value("exercises", nlohmann::json::array()))
        out.push_back(parse_exercise(found.manifest, e, found.dir));
    if (out.empty()) throw UsageError("level '" + found.id + "' has no exercises to grade");
    return out;
}

}  // namespace mw::grade
