// memwall for notebooks: a C++17 facade over the `memwall` command line, for
// the xeus-cling (xcpp17) notebooks in this folder.
//
// The project is C++20 and the notebook kernel is C++17, so the notebook does
// not include the project's headers. It loads libmemwall_nb (built from
// memwall_nb.cpp as C++17) and drives the memwall binary of the same build
// tree; results come back as the JSON the CLI writes.
//
//   #pragma cling add_include_path(".")                  // this folder
//   #pragma cling add_library_path("../build/notebooks-cpp")
//   #pragma cling load("libmemwall_nb")
//   #include "memwall_nb.hpp"
//   mwnb::configure("../build", "nb-work");
//
// Images are shown with xeus-cling's display mechanism: xcpp::display(img)
// finds mwnb::mime_bundle_repr(const Image&) by argument-dependent lookup.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mwnb {

// Where the build tree (with the memwall binary) is, and a folder for the
// files the notebook writes (created if missing). Relative paths are taken
// from the notebook's working directory.
void configure(const std::string& build_dir, const std::string& work_dir);
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

// A small text table of steps: predicted and measured GFLOP/s side by side
// (steps named op/variant when they span several ops).
void print_table(const std::vector<Step>& steps);

std::string base64(const std::string& bytes);

}  // namespace mwnb
