// `memwall plot`: rooflines, speedup bars and peak-memory bars from a results file, drawn by
// gnuplot. The .gp scripts and .dat files stay next to the images so a
// student can restyle a figure or plot their own numbers into it.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mw {

// Whether a `gnuplot` executable is on PATH.
bool gnuplot_available();

// For each (lever, op, backend, shape) group of `results` (schema
// memwall.results/1) writes into `out_dir`
//   roofline-<lever>-<op>-<backend>[-<shape>].{svg,png,gp,points.dat,roofs.dat}
//   speedup-<lever>-<op>-<backend>[-<shape>].{svg,png,gp,dat}
//   memory-<lever>-<op>-<backend>[-<shape>].{svg,png,gp,dat}  (runs with peak_bytes)
// (the shape suffix only when a (lever, op, backend) has several shapes).
// Runs whose timings mean nothing (backend cuda-emu, timing_meaningful
// false) are left out. Every file written is appended to `written`.
// Throws std::runtime_error when gnuplot is missing or fails.
void plot_results(const nlohmann::json& results, const std::filesystem::path& out_dir,
                  std::vector<std::filesystem::path>* written = nullptr);

// The stem plot_results gives the group of `run` (a run of `results`):
// roofline-<stem>.svg, speedup-<stem>.svg, memory-<stem>.svg. Empty when the
// run is not plotted (cuda-emu, timing not meaningful).
std::string plot_stem(const nlohmann::json& results, const nlohmann::json& run);

// A line plot in the same style (a training run's loss curves):
// `stem`.{svg,png,gp,dat} in `out_dir`, one line per series, x and y linear
// unless `logx`. Throws std::runtime_error when gnuplot is missing or fails.
struct LineSeries {
    std::string title;
    std::vector<std::pair<double, double>> points;
};
void plot_lines(const std::filesystem::path& out_dir, const std::string& stem, const std::string& title,
                const std::string& xlabel, const std::string& ylabel, const std::vector<LineSeries>& series,
                bool logx = false, std::vector<std::filesystem::path>* written = nullptr);

}  // namespace mw
