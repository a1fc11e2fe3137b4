// `memwall grade`: build a student's submission, run it in a sandboxed child
// process on inputs from a seed it cannot know, check it against the fp64
// oracle in the grader's own process, time it against the project's optimized
// variant, and report text, JSON or Gradescope's results.json.
//
//   memwall grade 01 --submission my_gemm.cpp --seed 7
//   MEMWALL_GRADE_SECRET=... memwall grade 01 --submission gemm.cu --format gradescope --out results.json
//
// The parts: grade_manifest.cpp (levels/*/level.json -> Exercise),
// sandbox.cpp (the sandbox, cgroups, child processes), grade.cpp (the grading
// itself and the CLI), grade_report.cpp (text and Gradescope from the JSON).
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mw::grade {

// One exercise of a level manifest (levels/<level>/level.json, exercises[]).
struct Exercise {
    std::string level_id, level_title, op;
    std::filesystem::path level_dir;
    std::string id, backend;  // backend: "cpu" or "cuda" (which also allows cuda-emu)
    std::filesystem::path stub, adapter;
    std::string symbol, signature, reference_variant;
    std::vector<std::string> correctness_shapes;
    std::string speed_shape;
    int threads = 0;  // 0 = all hardware threads
    // Speed points rise linearly from none at zero_credit_ratio to all at
    // full_credit_ratio (the submission's speed over the reference's); none
    // below floor_ratio either way.
    double full_credit_ratio = 0.75, floor_ratio = 0.02, zero_credit_ratio = 0;
    double correctness_points = 60, speed_points = 40;
    double time_limit_s = 120, memory_limit_mb = 2048;
    std::string emulated_note;
    // What correctness is judged against: "exact" (the op's fp64 oracle),
    // "contract" (the reference variant's contract oracle: lossy exercises) or
    // "reference" (the reference variant's own outputs on the same inputs, run
    // by the grader, bit for bit: exercises whose point is to compute the very
    // same numbers another way, e.g. a checkpointed backward pass).
    std::string oracle = "exact";
    // Optimization flags the submission is compiled with (default -O3
    // -march=native). An exercise graded bit for bit against a reference that
    // the student rebuilds from the project's kernels names the project's own
    // (no -march=native: the kernels pick their ISA at run time, and
    // floating-point contraction under another ISA would change the bits).
    std::vector<std::string> cxx_flags = {"-O3", "-march=native"};
    // How the reference side of a speed call is timed on the CPU: "round_trip"
    // (the grader's clock around the call, minus an empty call's round trip,
    // as for the submission) or "call" (the reference worker, which runs no
    // submission code, times the variant's run() alone: for variants whose
    // prepare(), e.g. quantizing weights, is not part of the exercise's call).
    // The submission is always timed by the grader's clock.
    std::string timing = "round_trip";
    // Most interleaved speed rounds (each a burst of calls per side); fewer
    // for exercises whose every call is expensive to set up (fresh large
    // inputs, weights packed per call).
    int max_rounds = 30;
    // Inputs the grader prepares from the op's inputs and stages after the
    // outputs (e.g. "int4_g64_sym": packed weights and scales), so the worker
    // does no work outside the timed call; "" = none.
    std::string prepared_inputs;
    // The op's inputs the submission does not get (e.g. "W" where it gets
    // W's prepared INT4 form instead): staged empty, zero bytes, in their
    // place, so the call's buffer order stays the op's. The grader keeps
    // them for the oracle and the reference. CPU exercises only.
    std::vector<std::string> withheld_inputs;
    // Whether the sandbox shows the BLAS/LAPACK libraries (default: hidden).
    bool allow_blas = false;
};

// Where the repository is: MEMWALL_SOURCE_DIR (compile definition or
// environment), else the CMake cache beside the running executable, else the
// current directory and its parents.
std::filesystem::path source_dir();
// levels/ under source_dir(), or $MEMWALL_LEVELS_DIR.
std::filesystem::path levels_dir();

// The files `roots` include, transitively, under source_dir(): quoted
// includes, resolved against the source root, then beside the including
// file; the roots themselves among them.
std::set<std::filesystem::path> include_closure(std::vector<std::filesystem::path> roots);
// What the compiler sees of the project when it builds a submission to x:
// the files the exercise folder's stubs and adapters include, transitively
// (quoted includes), and nothing else, never the lever's rungs; with
// reference_solution, the submission's own includes too. `memwall course
// handout` ships exactly these.
std::set<std::filesystem::path> compiler_view(const Exercise& x, const std::filesystem::path& submission = {},
                                              bool reference_solution = false);
// The static libraries a worker links, from the build tree memwall runs from
// or beside memwall itself: the level's worker library (its adapter's
// helpers; with reference_solution, every solution's rungs; empty when the
// level needs none) and the cuda-emu emulator. Throw when missing.
std::filesystem::path worker_library(const Exercise& x, bool reference_solution);
std::filesystem::path emu_library();

// "01-vectorization", "01" or "vectorization" -> the level's exercises.
// Throws UsageError naming the valid levels.
std::vector<Exercise> load_level(const std::string& level);

struct GradeOptions {
    std::string level, submission, exercise, backend, format = "text", out;
    std::string seed_text, secret_seed_file;  // seed_text: --seed as typed
    double time_limit_s = 0;                  // 0 = the manifest's
    int threads = 0;                          // 0 = the manifest's
    bool unsafe_no_sandbox = false;           // local practice without bubblewrap
    bool cleanup = false;                     // --cleanup: remove an earlier crash's left-overs
    bool reference_solution = false;          // link every rung (instructor's solutions only)
};

int run_grade(const GradeOptions& opts);

// Reports made from the grade document (the JSON format).
std::string report_text(const nlohmann::json& doc);
nlohmann::json report_gradescope(const nlohmann::json& doc);

}  // namespace mw::grade
