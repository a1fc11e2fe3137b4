// `memwall course autograder LEVEL --out FILE.zip`: the level's autograder
// for Gradescope. The zip holds:
//   setup.sh, run_autograder   commands/course/autograder/ (Gradescope's
//                              two entry points: install and build once,
//                              then grade each submission)
//   autograder.conf            the level, its exercises' file names and the
//                              build targets grading needs
//   secret-seed                the instructor's secret (mode 0600): every
//                              input of every grade is derived from it
//   memwall/                   the sources setup.sh builds the grader from
// Gradescope's image is not the machine the zip is made on (another
// distribution, no GPU), so the grader is built there from source, never
// copied.
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <regex>
#include <sstream>

#include "commands/course/course.hpp"
#include "commands/grade/grade.hpp"
#include "harness/command.hpp"
#include "harness/results.hpp"

namespace mw::course {

namespace fs = std::filesystem;

namespace {

// What setup.sh needs to configure and build the grader (the top-level
// CMakeLists.txt adds these folders; the rest of the tree is tests, lessons
// and results).
const char* const kBuildTree[] = {"CMakeLists.txt", "CMakePresets.json", "harness", "kernels", "reference",
                                  "optimized",      "model",             "commands", "levels", "notebooks-cpp"};

bool wanted(const fs::path& rel) {
    for (const fs::path& part : rel)
        if (part.string().starts_with(".")) return false;  // .venv, editor files
    return rel.extension() != ".ipynb";
}

// A word autograder.conf may hold unquoted: ids and file names from the
// level's manifest.
std::string shell_word(const std::string& s, const char* what) {
    static const std::regex ok("[A-Za-z0-9._-]+");
    if (!std::regex_match(s, ok))
        throw std::runtime_error(std::string("course autograder: the level's ") + what + " '" + s +
                                 "' is not a plain name ([A-Za-z0-9._-]); rename it in level.json");
    return s;
}

std::string secret_text(const AutograderOptions& o, std::string& origin) {
    if (!o.secret_seed_file.empty()) {
        std::string s;
        try {
            s = read_source(o.secret_seed_file, 1 << 16);
        } catch (const std::exception&) {
            throw UsageError("course autograder: cannot read --secret-seed-file '" + o.secret_seed_file + "'");
        }
        if (s.find_first_not_of(" \t\r\n") == std::string::npos)
            throw UsageError("course autograder: --secret-seed-file '" + o.secret_seed_file + "' is empty");
        origin = "from " + o.secret_seed_file;
        return s;
    }
    if (const char* env = std::getenv("MEMWALL_GRADE_SECRET"); env && *env) {
        origin = "from MEMWALL_GRADE_SECRET";
        return env;
    }
    unsigned char bytes[32];
    if (::getrandom(bytes, sizeof bytes, 0) != ssize_t(sizeof bytes))
        throw std::runtime_error("course autograder: no random bytes for a secret seed (getrandom)");
    std::ostringstream hex;
    for (unsigned char b : bytes) hex << "0123456789abcdef"[b >> 4] << "0123456789abcdef"[b & 15];
    origin = "new, random: it exists only in the zip (pass --secret-seed-file to grade with a seed you keep)";
    return hex.str() + "\n";
}

// `zip -r` of a folder's contents into `zip_path` (Debian's zip: it keeps
// the scripts' execute bits, which Gradescope runs them by).
void zip_folder(const fs::path& folder, const fs::path& zip_path) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("course autograder: fork failed");
    if (pid == 0) {
        if (::chdir(folder.c_str()) != 0) ::_exit(126);
        ::execlp("zip", "zip", "-q", "-r", "-X", zip_path.c_str(), ".", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        throw std::runtime_error("course autograder: 'zip' not found on PATH (apt-get install zip)");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw std::runtime_error("course autograder: zip failed (status " + std::to_string(status) + ")");
}

}  // namespace

int run_autograder_zip(const AutograderOptions& o) {
    std::vector<grade::Exercise> xs = grade::load_level(o.level);
    if (!o.exercise.empty()) {
        std::vector<std::string> ids;
        for (const grade::Exercise& x : xs) ids.push_back(x.id);
        std::erase_if(xs, [&](const grade::Exercise& x) { return x.id != o.exercise; });
        if (xs.empty()) {
            std::string valid;
            for (const std::string& id : ids) valid += (valid.empty() ? "" : ", ") + id;
            throw UsageError("course autograder: unknown exercise '" + o.exercise + "' in level " + o.level +
                             "; valid exercises: " + valid);
        }
    }
    std::string origin;
    const std::string secret = secret_text(o, origin);
    const fs::path out = o.out;
    if (out.extension() != ".zip")
        throw UsageError("course autograder: --out '" + o.out + "' must name a .zip file (Gradescope's format)");
    if (!out.parent_path().empty() && !fs::is_directory(out.parent_path()))
        throw UsageError("course autograder: --out '" + o.out + "': no folder '" + out.parent_path().string() + "'");
    if (fs::is_directory(out)) throw UsageError("course autograder: --out '" + o.out + "' is a folder");
    const fs::path root = fs::weakly_canonical(grade::source_dir());
    const grade::Exercise& first = xs.front();

    // What run_autograder accepts and setup.sh builds.
    std::string exercises, targets;
    bool emu = false;
    for (const grade::Exercise& x : xs) {
        exercises += (exercises.empty() ? "" : " ") + shell_word(x.stub.filename().string(), "stub file name") +
                     ":" + shell_word(x.id, "exercise id");
        if (x.backend == "cuda") emu = true;
        if (x.backend == "cpu" && fs::exists(x.level_dir / "exercise" / "worker_sources.txt") &&
            targets.find("memwall_worker_") == std::string::npos)
            targets += " memwall_worker_" + shell_word(x.level_id, "level id");
    }
    if (emu) targets += " memwall_emu";
    std::ostringstream conf;
    conf << "# Written by `memwall course autograder " << first.level_id << "`: read by setup.sh and\n"
         << "# run_autograder. EXERCISES: file name:exercise id, one per exercise graded.\n"
         << "LEVEL=" << shell_word(first.level_id, "level id") << "\n"
         << "EXERCISES=\"" << exercises << "\"\n"
         << "EMU=" << (emu ? "ON" : "OFF") << "\n"
         << "TARGETS=\"" << (targets.empty() ? "" : targets.substr(1)) << "\"\n";

    const fs::path stage = out.string() + ".partial-" + std::to_string(::getpid()) + ".d";
    const fs::path zip_tmp = fs::absolute(out.string() + ".partial-" + std::to_string(::getpid()) + ".zip");
    struct Cleanup {
        std::vector<fs::path> paths;
        ~Cleanup() {
            std::error_code ec;
            for (const fs::path& p : paths) fs::remove_all(p, ec);
        }
    } cleanup{{stage, zip_tmp}};
    fs::remove_all(stage);
    fs::remove(zip_tmp);
    fs::create_directories(stage);

    for (const char* script : {"setup.sh", "run_autograder"}) {
        copy_into(root / "commands" / "course" / "autograder" / script, stage / script);
        fs::permissions(stage / script, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                            fs::perms::others_read | fs::perms::others_exec);
    }
    write_file_atomic(stage / "autograder.conf", conf.str());
    write_file_atomic(stage / "secret-seed", secret);
    fs::permissions(stage / "secret-seed", fs::perms::owner_read | fs::perms::owner_write);
    std::size_t files = 0;
    for (const char* top : kBuildTree) {
        const fs::path from = root / top;
        if (fs::is_regular_file(from)) {
            copy_into(from, stage / "memwall" / top), ++files;
            continue;
        }
        if (!fs::is_directory(from))
            throw std::runtime_error("course autograder: the source tree has no '" + std::string(top) + "'");
        for (auto& e : fs::recursive_directory_iterator(from)) {
            if (fs::is_symlink(e.symlink_status()) || !e.is_regular_file()) continue;
            const fs::path rel = e.path().lexically_relative(root);
            if (!wanted(rel)) continue;
            copy_into(e.path(), stage / "memwall" / rel), ++files;
        }
    }
    zip_folder(stage, zip_tmp);
    fs::rename(zip_tmp, out);
    std::cout << "memwall course autograder: " << out.string() << ": level " << first.level_id << " (";
    for (std::size_t i = 0; i < xs.size(); ++i)
        std::cout << (i ? ", " : "") << xs[i].id << ": " << xs[i].stub.filename().string();
    std::cout << "), " << files << " source files, " << fs::file_size(out) / 1024 << " KiB; secret seed " << origin
              << "\n";
    return 0;
}

}  // namespace mw::course
