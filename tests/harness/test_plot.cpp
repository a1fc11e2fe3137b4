// Plots: a real results document becomes a roofline, a speedup and a memory
// chart in both formats, drawn by gnuplot; emulated runs stay out of them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "harness/plot.hpp"
#include "harness/results.hpp"
#include "harness/runner.hpp"

namespace fs = std::filesystem;

namespace {

TEST(Plot, WritesRooflineAndSpeedupAsSvgAndPng) {
    if (!mw::gnuplot_available()) GTEST_SKIP() << "gnuplot is not installed";
    mw::RunRequest req;
    req.targets = {"gemm"};
    req.shapes = {"m=64,n=64,k=64"};
    req.variants = {"naive", "blocked", "openblas"};
    req.timing.budget_s = 0.01;
    req.timing.min_samples = 3;
    req.threads = 1;
    mw::Ceilings c;
    c.dram_triad_gbps = {10.0};
    c.l1_gbps = 200;
    c.l2_gbps = 80;
    c.peaks = {{"fp32", "test", 1, 100.0}};
    std::ostringstream progress;
    auto doc = mw::run_plans(mw::plan_runs(req), req, c, progress);

    fs::path dir = fs::temp_directory_path() / ("memwall-plot-" + std::to_string(::getpid()));
    std::vector<fs::path> written;
    mw::plot_results(doc, dir, &written);
    for (const char* name : {"roofline-vectorization-gemm-cpu.svg", "roofline-vectorization-gemm-cpu.png",
                             "speedup-vectorization-gemm-cpu.svg", "speedup-vectorization-gemm-cpu.png",
                             "memory-vectorization-gemm-cpu.svg", "memory-vectorization-gemm-cpu.png"}) {
        ASSERT_TRUE(fs::exists(dir / name)) << name;
        EXPECT_GT(fs::file_size(dir / name), 1000u) << name;
    }
    // The SVG names every variant that ran.
    std::ifstream svg(dir / "roofline-vectorization-gemm-cpu.svg");
    std::string text((std::istreambuf_iterator<char>(svg)), {});
    for (const char* v : {"naive", "blocked", "openblas"}) EXPECT_NE(text.find(v), std::string::npos) << v;
    fs::remove_all(dir);
}

TEST(Plot, EmulatedRunsAreLeftOut) {
    if (!mw::gnuplot_available()) GTEST_SKIP() << "gnuplot is not installed";
    nlohmann::json doc = {{"schema", "memwall.results/1"},
                          {"machine", {{"cpu_model", "test"}}},
                          {"ceilings", nlohmann::json::object()},
                          {"runs", nlohmann::json::array()}};
    nlohmann::json r = {{"lever", "vectorization"}, {"op", "gemm"}, {"variant", "naive"}, {"role", "reference"},
                        {"backend", "cuda-emu"}, {"rung", 0}, {"dtype", "f32"}, {"shape", {{"m", 8}}},
                        {"shape_str", "m=8"}, {"flops", 1e3}, {"bytes", 1e3}, {"intensity", 1.0},
                        {"time_s", {{"median", 1e-3}, {"min", 1e-3}, {"max", 1e-3}, {"best", 1e-3}, {"samples", 1}}},
                        {"gflops", 1e-3}, {"gbps", 1e-3}, {"correct", true},
                        {"error", {{"max_abs", 0}, {"max_rel", 0}, {"rel_fro", 0}}},
                        {"timing_meaningful", false}};
    doc["runs"].push_back(r);
    fs::path dir = fs::temp_directory_path() / ("memwall-plot-emu-" + std::to_string(::getpid()));
    std::vector<fs::path> written;
    mw::plot_results(doc, dir, &written);
    EXPECT_TRUE(written.empty());
    fs::remove_all(dir);
}

// Plots a committed record into a fresh temporary folder, which it returns.
fs::path plot_record(const char* record, const char* tag, std::vector<fs::path>* written) {
    const auto doc = mw::read_json_file(fs::path(MEMWALL_SOURCE_DIR) / record);
    fs::path dir = fs::temp_directory_path() / ("memwall-plot-" + std::string(tag) + "-" + std::to_string(::getpid()));
    mw::plot_results(doc, dir, written);
    return dir;
}

// A results file recorded before peak memory was: roofline and speedup
// charts as before, and no memory chart.
TEST(Plot, OlderResultsGetNoMemoryChart) {
    if (!mw::gnuplot_available()) GTEST_SKIP() << "gnuplot is not installed";
    std::vector<fs::path> written;
    const fs::path dir = plot_record("results/xeon-kvm-2c/vectorization-cpu.json", "old", &written);
    EXPECT_TRUE(fs::exists(dir / "roofline-vectorization-gemm-cpu.svg"));
    EXPECT_TRUE(fs::exists(dir / "speedup-vectorization-gemm-cpu.svg"));
    for (auto& w : written) EXPECT_EQ(w.filename().string().rfind("memory-", 0), std::string::npos) << w;
    fs::remove_all(dir);
}

// Two points in one column, close in height, get labels that do not sit on
// one another: in this record OpenBLAS (213 GFLOP/s) and oneDNN (216) share
// an intensity, and rung 4 (226) sits just left of them. (The pass that
// centres pushed labels on their points once undid every push.)
TEST(Plot, CloseLabelsArePushedApart) {
    if (!mw::gnuplot_available()) GTEST_SKIP() << "gnuplot is not installed";
    std::vector<fs::path> written;
    const fs::path dir = plot_record("results/epyc-kvm-2c/vectorization-cpu.json", "labels", &written);
    std::ifstream gp(dir / "roofline-vectorization-gemm-cpu-k-1024-m-1024-n-1024.gp");
    ASSERT_TRUE(gp.good());
    struct Label { std::string text; double x, y; };
    std::vector<Label> labels;
    for (std::string line; std::getline(gp, line);) {
        // set label 6 "openblas (vendor)" at 63.991,213.174 right boxed ...
        const auto open = line.find('"'), at = line.find("\" at ");
        if (line.rfind("set label", 0) != 0 || open == std::string::npos || at == std::string::npos) continue;
        const std::string text = line.substr(open + 1, at - open - 1);
        if (text.find("vendor") == std::string::npos && text.find(':') == std::string::npos) continue;  // the arrow's "358x"
        labels.push_back({text, std::stod(line.substr(at + 5)), std::stod(line.substr(line.find(',', at) + 1))});
    }
    ASSERT_EQ(labels.size(), 7u);  // rungs 0-4 and the two vendors
    for (size_t i = 0; i < labels.size(); ++i)
        for (size_t j = i + 1; j < labels.size(); ++j)
            if (std::abs(std::log10(labels[i].x / labels[j].x)) < 0.3) {
                EXPECT_GT(std::abs(std::log10(labels[i].y / labels[j].y)), 0.1)
                    << labels[i].text << " at " << labels[i].y << " and " << labels[j].text << " at " << labels[j].y;
            }
    fs::remove_all(dir);
}

// Bar charts sit two to a row (the HTML page, markdown viewers): a long shape
// in their title is broken at commas so that no line runs off the canvas.
TEST(Plot, BarChartTitlesWrapALongShape) {
    if (!mw::gnuplot_available()) GTEST_SKIP() << "gnuplot is not installed";
    std::vector<fs::path> written;
    const fs::path dir = plot_record("results/epyc-kvm-2c/moe-moe_ffn.json", "wrap", &written);
    int charts = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string chart = entry.path().filename().string();
        if (entry.path().extension() != ".svg" ||
            (chart.rfind("speedup-moe-moe_ffn-cpu", 0) != 0 && chart.rfind("memory-moe-moe_ffn-cpu", 0) != 0))
            continue;
        ++charts;
        std::ifstream svg(entry.path());
        const std::string text((std::istreambuf_iterator<char>(svg)), {});
        std::string shape_text;
        // gnuplot writes each line of a title as one <text> element.
        for (std::size_t close = text.find("</text>"); close != std::string::npos;
             close = text.find("</text>", close + 1)) {
            const std::size_t open = text.rfind('>', close - 1);
            const std::string line = text.substr(open + 1, close - open - 1);
            if (line.find("d_model=") == std::string::npos && line.find("top_k=") == std::string::npos) continue;
            EXPECT_LE(line.size(), 64u) << chart << ": " << line;
            shape_text += line;
        }
        for (const char* axis : {"tokens=", "d_model=", "d_ff=", "experts=", "top_k="})
            EXPECT_NE(shape_text.find(axis), std::string::npos) << chart << " title lacks " << axis;
    }
    EXPECT_GE(charts, 2);
    fs::remove_all(dir);
}

}  // namespace
