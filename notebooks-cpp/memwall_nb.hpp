// memwall for notebooks: a C++17 facade over the `memwall` command line, for
// the C++ notebooks in this folder. They run in the clang_repl kernel (PyPI
// `clang-repl` over Debian's clang-repl-19; what CI executes) or in xeus-cling
// (xcpp17, from conda); notebooks-cpp/run_notebook.py is the fallback that
// compiles all cells as one program.
//
// The project is C++20 and the notebook is C++17, so the notebook does not
// include the project's headers. It loads libmemwall_nb (built from
// memwall_nb.cpp as C++17) with mwnb::load(), which is inline here so that it
// runs before the library is there, and drives the memwall binary of the same
// build tree; results come back as the JSON the CLI writes.
//
//   #pragma cling add_include_path(".")   // xeus-cling; clang-repl gets -I. from its config
//   #include "memwall_nb.hpp"
//   mwnb::load();                          // cell 1: dlopen the facade
//   mwnb::configure();                     // cell 2 on: use it
//
// The build tree is $MEMWALL_BUILD_DIR, else "../build" (the release preset's
// folder seen from notebooks-cpp/, where a notebook runs); the folder the
// notebook writes to is $MEMWALL_NB_WORK, else "nb-work".
//
// Every function prints at least one line: the clang_repl kernel (1.0.4)
// fails on a cell that prints nothing, so every cell of these notebooks ends
// in one that does (mwnb::note for cells that only define functions).
//
// clang-repl runs the initializers of a cell's const globals before the
// cell's statements (clang-repl-19: `f(); const bool b = g();` calls g first),
// so a global whose initializer does something that must follow an earlier
// statement of its cell is declared non-const (`bool quick = mwnb::quick();`,
// `std::string ceilings = mwnb::calibrate();` after setenv and configure()).
//
// Images are shown with xeus-cling's display mechanism: xcpp::display(img)
// finds mwnb::mime_bundle_repr(const Image&) by argument-dependent lookup
// (ci/include/xcpp/xdisplay.hpp stands in for it under clang-repl and g++).
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mwnb {

// $MEMWALL_BUILD_DIR, else "../build".
inline std::string default_build_dir() {
    const char* e = std::getenv("MEMWALL_BUILD_DIR");
    return e && *e ? e : "../build";
}

// $MEMWALL_NB_WORK, else "nb-work".
inline std::string default_work_dir() {
    const char* e = std::getenv("MEMWALL_NB_WORK");
    return e && *e ? e : "nb-work";
}

// Loads <build>/notebooks-cpp/libmemwall_nb.so into the kernel's process
// (RTLD_GLOBAL, so the interpreter resolves the facade's symbols from it).
// Call it in a cell before the first cell that uses the facade.
inline void load(const std::string& build_dir = default_build_dir()) {
    const std::string lib = build_dir + "/notebooks-cpp/libmemwall_nb.so";
    if (!::dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
        const char* why = ::dlerror();
        throw std::runtime_error("cannot load " + lib + " (" + (why ? why : "?") +
                                 "); build the project first (cmake --preset release && cmake --build --preset "
                                 "release), or set MEMWALL_BUILD_DIR to your build tree");
    }
    std::printf("memwall_nb: loaded %s\n", lib.c_str());
    std::fflush(stdout);
}

// Where the build tree (with the memwall binary) is, and a folder for the
// files the notebook writes (created if missing). Relative paths are taken
// from the notebook's working directory. Prints both.
void configure(const std::string& build_dir = default_build_dir(), const std::string& work_dir = default_work_dir());

// Whether to run the ops' quick shapes with short timing: true when
// $MEMWALL_NB_QUICK is 1 (CI), else false (the level's lesson shapes, the
// shapes its results file was recorded at). Prints which.
bool quick();

// Prints `text` on a line of its own and returns true: for a cell that only
// defines functions, as `bool x_defined = mwnb::note("...");`.
bool note(const std::string& text);
std::string memwall_binary();
std::string work_path(const std::string& name);

// Runs `memwall <args>`, echoing its output into the notebook. Throws
// std::runtime_error (with the output's tail) when it exits non-zero.
void memwall(const std::string& args);

// Runs `memwall <args> --out <work folder>/<name>` (echoing its output) and
// returns the results document it wrote: for cells that read the runs
// themselves (a field of each run, a counter, several shapes side by side).
nlohmann::json run_json(const std::string& args, const std::string& name);

// `memwall calibrate --quick` once, saved under the work folder; later calls
// reuse the file. Returns its path.
std::string calibrate();

// One step of a level's lesson, run now: the same text, prediction,
// measurement and roofline as `memwall lesson <level> --step N --only`.
struct Step {
    int index = 0;
    std::string op, variant, title, shape, bound;
    double predicted_gflops = 0, measured_gflops = 0, recorded_gflops = 0;
    double predicted_ms = 0, measured_ms = 0;  // 0: none (no prediction of time)
    double speedup_vs_naive = 0, intensity = 0, roof_gflops = 0, fraction_of_roof = 0;
    bool correct = false;
    std::string results_file;  // the step's runs, as a memwall results file
};
Step run_step(const std::string& level, int step, bool quick);

// Merges the runs of several steps into one results file (one naive run, the
// first step's) and returns its path, ready for plot().
std::string merge_results(const std::vector<Step>& steps, const std::string& name);

// `memwall plot` on a results file; returns the PNG paths it wrote.
std::vector<std::string> plot(const std::string& results_file);

// A PNG for xcpp::display.
struct Image {
    std::string path;
    std::string png;  // file contents
};
Image image(const std::string& png_path);
nlohmann::json mime_bundle_repr(const Image& img);

// One line per step, in the form the outputs check reads
// (notebooks-cpp/nbcheck.py outputs):
//   => op/variant at SHAPE: T ms per call (predicted P ms), G GFLOP/s = R% of the predicted Q; correct
void verdict(const Step& s);

// One such line for each run of a results document (from run_json).
void verdicts(const nlohmann::json& results);

// The notebook's last line, which CI checks: how many steps and runs this
// session ran and how many of them were correct.
//   memwall_nb summary: S steps run, S correct; R runs, R correct on CPU MODEL (N cores)
// (the machine from the calibration in the work folder).
void summary();

// A small text table of steps: predicted and measured GFLOP/s side by side
// (steps named op/variant when they span several ops).
void print_table(const std::vector<Step>& steps);

std::string base64(const std::string& bytes);

}  // namespace mwnb
