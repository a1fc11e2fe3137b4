// The small core commands: `memwall list`, `calibrate`, `plot`, `report` and
// `compare`. Each is a few lines over the engine (registry, calibration,
// results, plots) or the report page (commands/report_html.hpp).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands/cli.hpp"
#include "commands/report_html.hpp"
#include "harness/ceilings.hpp"
#include "harness/command.hpp"
#include "harness/gpu.hpp"
#include "harness/plot.hpp"
#include "harness/registry.hpp"
#include "harness/results.hpp"

namespace mw {
namespace {

namespace fs = std::filesystem;

int list_json() {
    nlohmann::json j = nlohmann::json::array();
    for (auto& v : variants()) {
        std::string why;
        const bool ok = runnable_here(v, &why);
        j.push_back({{"lever", v.lever}, {"op", v.op}, {"variant", v.name}, {"role", to_string(v.role)},
                     {"backend", to_string(v.backend)}, {"rung", v.rung}, {"rationale", v.rationale},
                     {"requires", v.needs}, {"source", v.source}, {"runnable_here", ok}, {"why_not", why}});
    }
    std::cout << j.dump(2) << "\n";
    return 0;
}

int list_text() {
    for (auto& lever : lever_names()) {
        std::cout << lever << "\n";
        for (auto& op : ops()) {
            if (op.lever != lever) continue;
            std::cout << "  " << op.name << ": " << op.summary << "  (default " << op.default_shape.str() << ")\n";
            for (auto* v : variants_of(op.name)) {
                std::string why;
                const bool ok = runnable_here(*v, &why);
                std::printf("    %-9s rung %d  %-16s %-9s %s%s\n        %s\n", to_string(v->backend).c_str(), v->rung,
                            v->name.c_str(), to_string(v->role).c_str(), v->source.c_str(),
                            ok ? "" : ("  [not here: " + why + "]").c_str(), v->rationale.c_str());
            }
        }
    }
    return 0;
}

void print_bandwidths(const Ceilings& c) {
    std::printf("DRAM triad bandwidth (STREAM convention, 24 B/element):\n");
    for (std::size_t i = 0; i < c.dram_triad_gbps.size(); ++i)
        std::printf("  %zu thread%s  %7.2f GB/s\n", i + 1, i ? "s" : " ", c.dram_triad_gbps[i]);
    std::printf("DRAM read-only bandwidth (a streaming sum%s%s):\n", c.dram_read_method.empty() ? "" : ", best pattern: ",
                c.dram_read_method.c_str());
    for (std::size_t i = 0; i < c.dram_read_by_threads_gbps.size(); ++i)
        std::printf("  %zu thread%s  %7.2f GB/s\n", i + 1, i ? "s" : " ", c.dram_read_by_threads_gbps[i]);
    if (!c.dram_pages.empty()) std::printf("DRAM arrays' pages: %s\n", c.dram_pages.c_str());
    std::printf("Cache plateaus (all threads): L1 %.1f GB/s, L2 %.1f GB/s, L3 %.1f GB/s\n", c.l1_gbps, c.l2_gbps,
                c.l3_gbps);
}

void print_peaks(const Ceilings& c) {
    if (c.clock_ghz > 0) {
        std::printf("Core clock (one thread, dependent integer adds): %.2f GHz\n", c.clock_ghz);
        double peak1 = 0;
        for (auto& p : c.peaks)
            if (p.dtype == "fp32" && p.threads == 1) peak1 = std::max(peak1, p.gflops);
        if (peak1 > 0)
            std::printf("fp32 FLOP per cycle per core (one-thread peak / clock): %.1f = %s\n", peak1 / c.clock_ghz,
                        fma_datapath(c, peak1 / c.clock_ghz).c_str());
    }
    std::printf("Compute peaks:\n");
    for (auto& p : c.peaks)
        std::printf("  %-5s %-14s %d thread%s %8.1f G%s/s\n", p.dtype.c_str(), p.isa.c_str(), p.threads,
                    p.threads == 1 ? " " : "s", p.gflops, p.dtype == "int8" ? "OP" : "FLOP");
    if (!c.gpu_name.empty()) {
        std::printf("GPU %s: DRAM %.0f GB/s, L2 %.0f GB/s\n", c.gpu_name.c_str(), c.gpu_dram_gbps, c.gpu_l2_gbps);
        for (auto& p : c.gpu_peaks) std::printf("  %-5s %-8s %9.1f GFLOP/s\n", p.dtype.c_str(), p.isa.c_str(), p.gflops);
    }
}

struct CalibrateFlags {
    bool quick = false;
    std::string out;
    int threads = 0;
    bool threads_given = false;
};

int calibrate(const CalibrateFlags& f) {
    if (f.threads_given) check_threads("--threads", f.threads);
    check_output_path(f.out, "--out");
    std::cerr << "calibrating (" << (f.quick ? "quick" : "full") << ")...\n";
    Ceilings c = calibrate_cpu(f.threads > 0 ? f.threads : hardware_threads(), f.quick);
    calibrate_gpu(c, f.quick);
    print_bandwidths(c);
    print_peaks(c);
    if (!f.out.empty()) {
        nlohmann::json doc = {{"schema", kCeilingsSchema}, {"machine", machine_info()}, {"ceilings", to_json(c)}};
        write_json_atomic(f.out, doc);
        std::cout << "ceilings: " << f.out << "\n";
    }
    return 0;
}

int plot(const std::string& in, const std::string& out_dir) {
    auto doc = read_json_file(in);
    validate_results(doc);
    fs::path dir = out_dir.empty() ? fs::path(in).parent_path() : fs::path(out_dir);
    if (dir.empty()) dir = ".";
    std::vector<fs::path> written;
    plot_results(doc, dir, &written);
    for (auto& w : written) std::cout << "plot: " << w.string() << "\n";
    return 0;
}

struct ReportFlags {
    std::string in, format = "md", out, compare;
    bool html = false, no_plots = false;
};

int report(const ReportFlags& f) {
    if (f.html) {
        const auto page = write_html_report({f.in, f.compare, f.out, !f.no_plots});
        std::cout << "report: " << page.string() << "\n";
        return 0;
    }
    if (!f.compare.empty()) throw UsageError("--compare needs --html (or use: memwall compare BASE NEW)");
    if (f.no_plots) throw UsageError("--no-plots needs --html");
    if (f.format != "md" && f.format != "csv")
        throw UsageError("unknown report format '" + f.format + "'; valid formats: md, csv");
    auto doc = read_json_file(f.in);
    std::string text = f.format == "md" ? report_markdown(doc) : report_csv(doc);
    if (f.out.empty()) std::cout << text;
    else write_file_atomic(f.out, text);
    return 0;
}

}  // namespace

MW_REGISTER_COMMAND_AT(list, "list", 0, [](CLI::App& app) -> CommandAction {
    auto* sub = app.add_subcommand("list", "List levers, ops and variants (and whether each runs here)");
    auto as_json = std::make_shared<bool>(false);
    sub->add_flag("--json", *as_json, "Machine-readable listing");
    return [as_json] { return *as_json ? list_json() : list_text(); };
});

MW_REGISTER_COMMAND_AT(calibrate, "calibrate", 2, [](CLI::App& app) -> CommandAction {
    auto* sub = app.add_subcommand("calibrate", "Measure this machine's ceilings: bandwidths and compute peaks");
    auto f = std::make_shared<CalibrateFlags>();
    sub->add_flag("--quick", f->quick, "Shorter measurement (a few seconds)");
    sub->add_option("--out", f->out, "Write ceilings JSON here");
    sub->add_option("--threads", f->threads, "Up to this many threads (default: all)");
    return [f, sub] {
        f->threads_given = sub->count("--threads") > 0;
        return calibrate(*f);
    };
});

MW_REGISTER_COMMAND_AT(plot, "plot", 3, [](CLI::App& app) -> CommandAction {
    auto* sub = app.add_subcommand("plot", "Draw rooflines and speedup bars (SVG + PNG) from a results file");
    auto in = std::make_shared<std::string>(), dir = std::make_shared<std::string>();
    sub->add_option("results", *in, "Results JSON from `memwall run --out`")->required();
    sub->add_option("--out-dir", *dir, "Folder for the plots (default: beside the results file)");
    return [in, dir] { return plot(*in, *dir); };
});

MW_REGISTER_COMMAND_AT(report, "report", 4, [](CLI::App& app) -> CommandAction {
    auto* sub = app.add_subcommand(
        "report", "Summarize a results file as markdown or CSV, or a results folder as one HTML page (--html)");
    auto f = std::make_shared<ReportFlags>();
    sub->add_option("results", f->in, "Results JSON (with --html: a results folder)")->required();
    sub->add_option("--format", f->format, "md or csv")->default_val("md");
    sub->add_option("--out", f->out, "Write here instead of standard output (--html: instead of FOLDER/index.html)");
    sub->add_flag("--html", f->html,
                  "Write FOLDER/index.html: machine, ceilings, per lever plots, tables, verdicts and claims");
    sub->add_option("--compare", f->compare,
                    "With --html: a second results folder (another machine or commit) to compare against");
    sub->add_flag("--no-plots", f->no_plots,
                  "With --html: no plots, no gnuplot needed (the GPU kit's page; its import draws them)");
    return [f] { return report(*f); };
});

MW_REGISTER_COMMAND_AT(compare, "compare", 5, [](CLI::App& app) -> CommandAction {
    auto* sub = app.add_subcommand("compare", "Compare two results files variant by variant");
    auto base = std::make_shared<std::string>(), next = std::make_shared<std::string>();
    sub->add_option("base", *base, "Baseline results JSON")->required();
    sub->add_option("new", *next, "New results JSON")->required();
    return [base, next] {
        std::cout << compare_markdown(read_json_file(*base), read_json_file(*next));
        return 0;
    };
});

}  // namespace mw
