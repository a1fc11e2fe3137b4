// `memwall course handout LEVEL --out DIR`: the folder a student of one level
// is given. It holds the stubs, the lesson, the level's notebook and a
// practice grader (this very binary, with the part of the source tree its
// compiler shows a submission: course.hpp), and nothing that answers the
// exercise: before the folder is put in place, every text file in it is
// compared with the level's solutions and its op's rungs by winnowed
// fingerprints, and a folder that holds a run of any of them is not written.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "commands/course/course.hpp"
#include "commands/grade/grade.hpp"
#include "harness/command.hpp"
#include "harness/registry.hpp"
#include "harness/results.hpp"

namespace mw::course {

namespace fs = std::filesystem;

namespace {

// The project's own files, whole.
std::string read_text(const fs::path& p) { return read_source(p, std::numeric_limits<std::size_t>::max()); }

std::string in_tree(const fs::path& p) {
    return fs::weakly_canonical(p).lexically_relative(fs::weakly_canonical(grade::source_dir())).generic_string();
}

bool under(const std::string& rel, const char* folder) { return rel.rfind(folder, 0) == 0; }

// Source files a student is meant to read or could have been given by
// mistake: sources, notebooks, text. Binaries (the grader, its libraries)
// are compiled, not copied.
bool is_text(const fs::path& p) {
    static const std::vector<std::string> ext = {".cpp", ".cu", ".hpp", ".cuh", ".h", ".c", ".md", ".json",
                                                 ".ipynb", ".sh", ".txt", ".py", ".cc"};
    return std::find(ext.begin(), ext.end(), p.extension().string()) != ext.end();
}

// Every file the compiler sees for any of the level's exercises.
std::set<fs::path> compiler_view_of(const std::vector<grade::Exercise>& xs) {
    std::set<fs::path> all;
    for (const grade::Exercise& x : xs) all.merge(grade::compiler_view(x));
    return all;
}

}  // namespace

std::vector<Secret> level_secrets(const std::string& level) {
    const std::vector<grade::Exercise> xs = grade::load_level(level);
    const fs::path root = grade::source_dir();
    const std::set<fs::path> seen_by_students = compiler_view_of(xs);
    std::vector<fs::path> roots;
    const fs::path solutions = xs.front().level_dir / "exercise" / "solutions";
    if (fs::is_directory(solutions))
        for (auto& e : fs::directory_iterator(solutions))
            if (e.is_regular_file() && e.path().extension() != ".txt") roots.push_back(e.path());
    std::set<std::string> ops;
    for (const grade::Exercise& x : xs) ops.insert(x.op);
    std::vector<fs::path> rungs;
    for (const std::string& op : ops)
        for (const Variant* v : variants_of(op))
            if (v->role != Role::reference && !v->source.empty() && fs::is_regular_file(root / v->source))
                rungs.push_back(root / v->source);
    // A rung's own headers (gemm_mma.cuh, a lever's kernels) answer the
    // exercise as much as the rung does; the engine's do not.
    std::set<fs::path> files(roots.begin(), roots.end());
    for (const fs::path& f : grade::include_closure(rungs)) {
        const std::string rel = in_tree(f);
        if (under(rel, "optimized/") || under(rel, "kernels/")) files.insert(fs::weakly_canonical(f));
    }
    std::vector<Secret> out;
    for (const fs::path& f : files)
        if (!seen_by_students.count(fs::weakly_canonical(f))) out.push_back({in_tree(f), Document::of(in_tree(f), read_text(f))});
    return out;
}

Base level_base(const std::string& level) {
    const std::vector<grade::Exercise> xs = grade::load_level(level);
    std::vector<Document> given;
    for (auto& e : fs::directory_iterator(xs.front().level_dir / "exercise"))
        if (e.is_regular_file()) given.push_back(Document::of(e.path().filename().string(), read_text(e.path())));
    return base_of(given);
}

std::vector<std::string> leaks(const std::vector<Document>& docs, const std::vector<Secret>& secrets,
                               const Base& base, int min_prints) {
    std::vector<std::string> out;
    for (const Document& d : docs)
        for (const Secret& s : secrets) {
            const Match m = compare(d, s.doc, base);
            if (is_copy(m))
                out.push_back(d.name + " is a copy of " + s.path + " (" + std::to_string(m.shared) + " fingerprints)");
            for (const Region& r : m.regions)
                if (r.prints >= min_prints)
                    out.push_back(d.name + " lines " + std::to_string(r.a_first) + "-" + std::to_string(r.a_last) +
                                  " hold " + s.path + " lines " + std::to_string(r.b_first) + "-" +
                                  std::to_string(r.b_last) + " (" + std::to_string(r.prints) + " fingerprints)");
        }
    return out;
}

namespace {

std::string practice_script(const std::string& level_id) {
    return "#!/bin/sh\n"
           "# Practice grading of level " + level_id + ", on your own machine:\n"
           "#   ./practice.sh exercise/<your file> [memwall grade options, e.g. --seed 7]\n"
           "# The grader compiles your file, checks it on fresh inputs and times it\n"
           "# against the project's optimized code, as the course's grader will (with\n"
           "# its own secret inputs). It runs your code in a bubblewrap sandbox; where\n"
           "# bwrap is not installed, add --unsafe-no-sandbox.\n"
           "set -e\n"
           "here=$(cd \"$(dirname \"$0\")\" && pwd)\n"
           "if [ $# -lt 1 ]; then echo \"usage: $0 SUBMISSION [memwall grade options]\" >&2; exit 2; fi\n"
           "submission=$1\n"
           "shift\n"
           "MEMWALL_SOURCE_DIR=\"$here/memwall/src\" exec \"$here/memwall/memwall\" grade " + level_id +
           " --submission \"$submission\" \"$@\"\n";
}

std::string fmt_points(double x) {
    std::ostringstream s;
    s << x;
    return s.str();
}

std::string student_readme(const std::vector<grade::Exercise>& xs, bool has_notebook, std::size_t secrets) {
    const grade::Exercise& first = xs.front();
    std::ostringstream r;
    r << "# Level " << first.level_id << ": " << first.level_title << "\n\n"
      << "Your folder for this level's exercise. Read `lesson.md`, then make the\n"
      << "code in `exercise/` fast without changing its answers.\n\n"
      << "## The exercise\n\n";
    for (const grade::Exercise& x : xs) {
        r << "- **" << x.id << "** (" << x.backend << "): `exercise/" << x.stub.filename().string() << "`. Keep\n"
          << "  the signature `" << x.signature << "`.\n"
          << "  Graded: correctness (" << fmt_points(x.correctness_points) << " points) on "
          << x.correctness_shapes.size() << " shapes, odd ones first (" << x.correctness_shapes.front()
          << ", ...), fresh inputs on every call; speed (" << fmt_points(x.speed_points) << " points) at "
          << x.speed_shape << (x.threads ? " on " + std::to_string(x.threads) + " threads" : std::string()) << ",\n"
          << "  full credit at " << fmt_points(x.full_credit_ratio) << "x the speed of the project's `"
          << x.reference_variant << "` rung, "
          << (x.zero_credit_ratio > 0 ? "rising from none at " + fmt_points(x.zero_credit_ratio) + "x"
                                      : "none below " + fmt_points(x.floor_ratio) + "x")
          << ".\n";
    }
    r << "\n## Practice\n\n"
      << "```\n./practice.sh exercise/" << first.stub.filename().string() << "\n```\n\n"
      << "grades your file as the course will, with a public seed it prints (pass\n"
      << "`--seed N` to repeat one). Your code runs in a bubblewrap sandbox; on a\n"
      << "machine without `bwrap`, add `--unsafe-no-sandbox` (the report says so).\n"
      << "The practice grader is a Linux x86-64 program (`memwall/memwall`): it\n"
      << "needs the shared libraries it was built with (`ldd memwall/memwall`\n"
      << "lists them) and g++ (C++20, OpenMP)" << (std::any_of(xs.begin(), xs.end(), [](auto& x) { return x.backend == "cuda"; })
                                          ? ", and for the CUDA exercise nvcc and a GPU, or Boost.Context for\n"
                                            "the CPU emulation (`--backend cuda-emu`, correctness only)"
                                          : std::string())
      << ". `memwall/src/` is the part of the project\n"
      << "your code may `#include`: nothing else is visible to the grader's compiler.\n\n"
      << "## What is here\n\n"
      << "- `lesson.md`: the lesson, with the numbers of the machine it was measured on.\n"
      << "- `exercise/`: the file(s) to edit.\n";
    if (has_notebook)
        r << "- `notebook/`: the level's C++ notebook; it drives a built copy of the whole\n"
          << "  project (`MEMWALL_BUILD_DIR`), as on the course's machines.\n";
    r << "- `practice.sh`, `memwall/`: the practice grader.\n\n"
      << "No file here holds a solution: `memwall course handout` compared every text\n"
      << "file with the level's " << secrets << " solution and optimized sources (winnowed\n"
      << "token fingerprints, blind to names, layout and comments) before writing it.\n";
    return r.str();
}

}  // namespace

void copy_into(const fs::path& from, const fs::path& to) {
    fs::create_directories(to.parent_path());
    fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

int run_handout(const HandoutOptions& o) {
    if (o.out.empty()) throw UsageError("course handout: --out FOLDER is required");
    const fs::path out = o.out;
    if (fs::exists(fs::symlink_status(out)))
        throw UsageError("course handout: --out '" + o.out + "' exists; give a folder that does not");
    if (!out.parent_path().empty() && !fs::is_directory(out.parent_path()))
        throw UsageError("course handout: --out '" + o.out + "': no folder '" + out.parent_path().string() + "'");
    const std::vector<grade::Exercise> xs = grade::load_level(o.level);
    const grade::Exercise& first = xs.front();
    const fs::path root = fs::weakly_canonical(grade::source_dir());
    const std::vector<Secret> secrets = level_secrets(o.level);

    const fs::path tmp = out.string() + ".partial-" + std::to_string(::getpid());
    fs::remove_all(tmp);
    struct Cleanup {
        fs::path p;
        ~Cleanup() {
            std::error_code ec;
            if (!p.empty()) fs::remove_all(p, ec);
        }
    } cleanup{tmp};
    fs::create_directories(tmp / "exercise");

    for (const grade::Exercise& x : xs) copy_into(x.stub, tmp / "exercise" / x.stub.filename());
    const fs::path rendered = first.level_dir / "lesson.rendered.md";
    copy_into(fs::exists(rendered) ? rendered : first.level_dir / "lesson.md", tmp / "lesson.md");
    const fs::path notebook = root / "notebooks-cpp" / (first.level_id + ".ipynb");
    if (fs::exists(notebook)) copy_into(notebook, tmp / "notebook" / notebook.filename());

    // The practice grader: this binary, its worker libraries, and the
    // sources its compiler shows a submission (with the level's manifest).
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) throw std::runtime_error("course handout: cannot find the memwall binary (/proc/self/exe)");
    copy_into(self, tmp / "memwall" / "memwall");
    for (const grade::Exercise& x : xs) {
        if (x.backend == "cpu")
            if (const fs::path lib = grade::worker_library(x, false); !lib.empty())
                copy_into(lib, tmp / "memwall" / lib.filename());
        if (x.backend == "cuda") copy_into(grade::emu_library(), tmp / "memwall" / "harness" / "emu" / "libmemwall_emu.a");
    }
    std::set<fs::path> view = compiler_view_of(xs);
    view.insert(first.level_dir / "level.json");
    for (const fs::path& f : view) {
        const fs::path rel = fs::weakly_canonical(f).lexically_relative(root);
        if (rel.empty() || *rel.begin() == "..") continue;
        copy_into(f, tmp / "memwall" / "src" / rel);
    }
    const std::string script = practice_script(first.level_id);
    write_file_atomic(tmp / "practice.sh", script);
    fs::permissions(tmp / "practice.sh", fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add);
    write_file_atomic(tmp / "README.md", student_readme(xs, fs::exists(notebook), secrets.size()));

    // The proof: no text file holds a run of any secret.
    std::vector<Document> docs;
    int files = 0;
    for (auto& e : fs::recursive_directory_iterator(tmp)) {
        if (!e.is_regular_file()) continue;
        ++files;
        if (is_text(e.path()))
            docs.push_back(Document::of(e.path().lexically_relative(tmp).generic_string(), read_text(e.path())));
    }
    const std::vector<std::string> found = leaks(docs, secrets, level_base(o.level));
    if (!found.empty()) {
        std::string why;
        for (const std::string& l : found) why += "\n  " + l;
        throw std::runtime_error("course handout: not written: its files would hold the level's answers:" + why);
    }
    fs::rename(tmp, out);
    cleanup.p.clear();
    std::cout << "memwall course handout: " << out.string() << ": " << files << " files for level " << first.level_id
              << "; none of its " << docs.size() << " text files holds a run of the level's " << secrets.size()
              << " solution and optimized sources\n";
    return 0;
}

}  // namespace mw::course
