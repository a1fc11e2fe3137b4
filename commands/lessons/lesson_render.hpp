// Lesson text with numbers that come from runs, never from the author's keyboard.
//
// A level's lesson.md quotes measurements through placeholders, rendered
// against the level's recorded results file (level.json "results"):
//
//   {{run:simd.gflops}}            a field of a run (dotted path into the run's JSON;
//                                  run:simd@m=512,n=512,k=512.gflops picks a shape;
//                                  run:simd.time_ms is time_s.best in ms)
//                                  Whole-workload fields of a run (docs/results.md, "Results files"):
//                                  run:V.units_per_s, run:V.unit, run:V.mfu, run:V.hfu,
//                                  run:V.executed_flops, run:V.counters.NAME,
//                                  run:V.peak_bytes, run:V.memory_vs_naive, run:V.near_ties,
//                                  run:V.distribution.OUTPUT.p_value
//   {{speedup:simd/naive}}         best time of naive / best time of simd (same shape)
//   {{range:simd/naive}}           that speedup round by round, "lo–hi", over the paired rounds
//                                  of results recorded with --rounds N (time_s.round_best)
//   {{memory:tiled/naive}}         peak_bytes of tiled / peak_bytes of naive (same shape)
//   {{ceiling:dram_gbps}}          calibrated ceilings: dram_gbps, dram_read_gbps, dram_1t_gbps,
//                                  l1_gbps, l2_gbps, l3_gbps, peak.fp32, peak.fp32.1t,
//                                  ridge, clock_ghz, flops_per_cycle, l1d_bytes, ...;
//                                  datapath: the FMA datapath in words, from the measured
//                                  FLOP per cycle and the peak kernel's vector width;
//                                  clock_source: how clock_ghz was obtained, in words
//   {{machine.cpu_model}}          the results file's machine block; machine.name is
//                                  the results folder (results/<name>/...)
//   {{shape:k}}                    an axis of the recorded shape
//   {{model:blocked.intensity}}    a variant's own cost model at that shape:
//                                  flops, executed_flops, units (the op's units per
//                                  call), bytes, intensity, compulsory_bytes
//   {{predict:simd}}               the step's prediction formula (level.json steps[].predict)
//   {{predict_time:simd}}          its predicted time per call in ms: steps[].predict.time_ms,
//                                  else model flops / predicted GFLOP/s (an op with no
//                                  arithmetic, a transpose, must give time_ms)
//   {{claims:kv_cache}}            the lever's published claims with their verdicts, a markdown
//                                  table from results/claims/reproduce.json (`memwall reproduce`)
//   {{gpu:attention}}              the op's CUDA ladder at the GPU kit's shape
//                                  (scripts/gpu-kit/shapes): per rung its compute dtype,
//                                  FLOP/byte, the time an H100 SXM and an A100 SXM would
//                                  take at their spec-sheet roofs (max of FLOPs / peak of
//                                  that dtype and bytes / HBM bandwidth), and the time
//                                  measured on a GPU where results/<gpu>/<lever>-cuda.json
//                                  has that rung at that shape ("not measured" otherwise)
//   {{results:path}}, {{results:command}}, {{results:dir}} (the results file's folder relative
//                                  to the level's: images, ![..]({{results:dir}}/roofline-...png))
//   {{results:stem}}, {{results:stem:OP}}  the stem `memwall plot` gives the op's figures
//                                  (roofline-STEM.png), which carries the shape where the
//                                  results hold several shapes of the op
//
// Levels spanning several ops (a step may name its "op" in level.json): a
// step's section is rendered with that op's runs and recorded shape, and any
// run:, speedup:, memory:, model:, predict: or shape: reference may name
// another op with "OP::" in front: {{speedup:softmax::row_fused/three_pass}},
// {{run:attention::naive.peak_extra_bytes}}, {{shape:softmax::cols}}.
//
// Arithmetic: + - * / ( ), min(a,b), max(a,b), bw1(bytes), bwall(bytes) (the
// one-thread / all-thread bandwidth of the calibrated cache sweep at that
// working set). Operators need spaces around them ("run:a.gflops / 2"): a '/'
// inside a reference belongs to it (speedup:simd/naive).
// Format after '|': a digit = significant digits (default 3), pct, int, KiB, MiB.
//
// Sections: "<!-- step: VARIANT -->" (or "<!-- step: OP/VARIANT -->" for a
// step that names its op) starts a step's text and "<!-- measure -->"
// inside it separates what is read before the rung runs (idea, prediction)
// from what is read after (measurement, the gap).
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/ceilings.hpp"
#include "commands/levels.hpp"
#include "harness/registry.hpp"

namespace mw::lesson {

struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Everything a placeholder may refer to.
struct Context {
    nlohmann::json runs = nlohmann::json::array();  // results "runs"
    Ceilings ceilings;
    nlohmann::json machine = nlohmann::json::object();
    std::string machine_name;  // results/<machine_name>/...
    std::string results_path, results_command;
    std::string claims_file;  // results/claims/reproduce.json (for claims:LEVER)
    std::string results_root;      // the repository's results/ (for gpu:OP's measured column)
    std::string gpu_shapes_file;   // scripts/gpu-kit/shapes (for gpu:OP's shape)
    std::string results_dir;  // the results file's folder, relative to the level's folder (for plots)
    std::optional<Shape> shape;          // shape for shape:, model:, and run: without @
    nlohmann::json steps = nlohmann::json::array();  // level.json "steps" (for predict:)
    std::string op = "gemm";  // the op whose runs and models unqualified references mean
    std::string level_op;     // the level's op: the op of a step that names none (empty: any)
    std::string backend = "cpu";
    std::string self;  // the variant whose prediction is being evaluated
};

using Value = std::variant<double, std::string>;

// Evaluates one placeholder body ("run:simd.gflops / 2 | 2"); throws Error.
Value evaluate(const std::string& expr, const Context& ctx);
std::string format_value(const Value& v, const std::string& fmt);

// Renders every {{...}} in `text`. Unresolved placeholders are collected in
// `errors` (placeholder + reason) and rendered as "??"; with errors == nullptr
// the first one throws.
std::string render(const std::string& text, const Context& ctx, std::vector<std::string>* errors = nullptr);

// One level: its manifest, lesson text and recorded results.
struct Level {
    std::filesystem::path dir;
    nlohmann::json manifest;
    std::string id, title, op;
    std::string lesson_text;          // lesson.md, unrendered
    std::filesystem::path results_file;  // resolved against the repository root
    nlohmann::json results;           // the recorded results document
};

// Finds a level by id, number or lever name under `levels_dir`; throws
// UsageError (harness/runner.hpp) naming the valid levels.
Level load_level(const std::filesystem::path& levels_dir, const std::filesystem::path& repo_root,
                 const std::string& name);
// The runs of the manifest's "extra_results" (file names, looked up beside
// the level's results file: runs that need another command line, such as an
// `mpirun` one) appended to L.results's runs; a file that is not there adds
// nothing (a placeholder that needs its runs then names what is missing).
void append_extra_runs(Level& L);
// Ids of every level: mw::level_ids (commands/levels.hpp).
using mw::level_ids;

// The context of the recorded results (shape: the recorded runs' shape).
Context recorded_context(const Level& level);

// `ctx` for another op: its runs, and the shape of its first recorded run
// (kept when `op` is ctx's own op and it has no run).
Context for_op(const Context& ctx, const std::string& op);

// A manifest step's op ("op" in the step, else the level's) and the name its
// lesson section and the CLI use: "VARIANT", or "OP/VARIANT" when the step
// names its op.
std::string step_op(const nlohmann::json& step, const std::string& level_op);
std::string step_key(const nlohmann::json& step);

// Lesson text split into the intro and one part per step.
struct StepText {
    std::string op;  // empty unless the marker names one (OP/VARIANT)
    std::string variant;
    std::string before;  // idea and prediction
    std::string after;   // measurement and the gap
};
struct Sections {
    std::string intro;
    std::vector<StepText> steps;
    std::string outro;  // after "<!-- end -->"
};
Sections split_sections(const std::string& text);

// The whole lesson rendered as markdown for `ctx`, with a header naming the
// results file and the machine. Errors as in render().
std::string render_document(const Level& level, const Context& ctx, std::vector<std::string>* errors = nullptr);

// Number formatting used by the lesson: `digits` significant digits, never
// in exponent notation.
std::string fmt_num(double x, int digits = 3);

}  // namespace mw::lesson
