#include "harness/cli.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include "harness/ceilings.hpp"
#include "harness/gpu.hpp"
#include "harness/plot.hpp"
#include "harness/registry.hpp"
#include "harness/report_html.hpp"
#include "harness/results.hpp"
#include "harness/runner.hpp"
#include "harness/strings.hpp"

namespace mw {

namespace {

namespace fs = std::filesystem;

// Output paths must be writable before any work starts, so a bad path fails
// fast and no time is wasted.
void check_output_path(const std::string& path, const char* what) {
    if (path.empty()) return;
    fs::path p(path);
    if (fs::exists(p) && fs::is_directory(p))
        throw UsageError(std::string(what) + " '" + path + "' is a directory; give a file name");
    if (p.extension() != ".json")
        throw UsageError(std::string(what) + " '" + path + "' must end in .json");
}

int cmd_list(bool as_json) {
    if (as_json) {
        nlohmann::json j = nlohmann::json::array();
        for (auto& v : variants()) {
            std::string why;
            const bool ok = runnable_here(v, &why);
            j.push_back({{"lever", v.lever}, {"op", v.op}, {"variant", v.name}, {"role", to_string(v.role)},
                         {"backend", to_string(v.backend)}, {"rung", v.rung}, {"rationale", v.rationale},
                         {"requires", v.needs}, {"source", v.source}, {"runnable_here", ok},
                         {"why_not", why}});
        }
        std::cout << j.dump(2) << "\n";
        return 0;
    }
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

Ceilings load_or_measure_ceilings(const std::string& path, int threads, bool quick) {
    if (!path.empty()) {
        auto doc = read_json_file(path);
        if (!doc.contains("ceilings"))
            throw UsageError("'" + path + "' has no \"ceilings\" field; make one with: memwall calibrate --out FILE.json");
        return ceilings_from_json(doc["ceilings"]);
    }
    std::cerr << "calibrating this machine (quick; pass --ceilings FILE from `memwall calibrate` to reuse a full one)...\n";
    Ceilings c = calibrate_cpu(threads, true);
    calibrate_gpu(c, true);
    return c;
}

void print_ceilings(const Ceilings& c) {
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

std::vector<std::pair<std::string, CommandSetup>>& command_modules() {
    static std::vector<std::pair<std::string, CommandSetup>> v;
    return v;
}

}  // namespace

void register_command(std::string name, CommandSetup setup) {
    command_modules().emplace_back(std::move(name), std::move(setup));
}

int cli_main(int argc, char** argv) {
    CLI::App app{"memwall: naive vs optimized transformer kernels, checked, timed and placed on a measured roofline"};
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "Show help for every subcommand");

    // list
    auto* list = app.add_subcommand("list", "List levers, ops and variants (and whether each runs here)");
    bool list_json = false;
    list->add_flag("--json", list_json, "Machine-readable listing");

    // run
    auto* run = app.add_subcommand("run", "Check, time and record variants of levers or ops");
    RunRequest req;
    std::string backend_s = "cpu", dtype_s, out_path, out_dir, ceilings_path;
    int threads = 0;
    run->add_option("targets", req.targets, "Levers or ops to run (see `memwall list`), or all")->required();
    run->add_option("--backend", backend_s, "cpu, cuda or cuda-emu")->default_val("cpu");
    run->add_option("--variant", req.variants, "Only these variants (the naive rung always runs too)");
    run->add_option("--shape", req.shapes,
                    "Shape override, axis=value[,axis=value...]; repeat for several; OP:axis=value,... applies to "
                    "that op only (with several targets)");
    run->add_option("--dtype", dtype_s, "Data type (default: the op's first)");
    run->add_option("--threads", threads, "CPU threads (default: all hardware threads)");
    run->add_flag("--quick", req.quick, "Small shapes and short timing (smoke runs)");
    run->add_flag("--cold", req.cold, "Evict caches before every timed call");
    run->add_flag("--skip-naive", req.skip_naive,
                  "Run the naive rung only if named with --variant (no 'vs naive' speedups then)");
    run->add_option("--seed", req.seed, "Seed of the generated inputs")->default_val(42);
    run->add_option("--budget", req.timing.budget_s, "Seconds of timed calls per variant")->default_val(3.0);
    run->add_option("--rounds", req.rounds,
                    "Time every variant this many times, round-robin per shape, with statistics over all rounds; on "
                    "the CPU the DRAM read roof is re-measured before each round (a noisy shared host)")
        ->default_val(1);
    run->add_option("--out", out_path, "Write results JSON here (and .md/.csv beside it)");
    run->add_option("--out-dir", out_dir,
                    "Write one results file per lever here, <lever>-<backend>.json (+ .md, .csv), each as soon as "
                    "its lever is done (e.g. `memwall run all --out-dir DIR`)")
        ->excludes("--out");
    run->add_option("--ceilings", ceilings_path, "Ceilings from `memwall calibrate --out` (default: quick calibration)");

    // calibrate
    auto* cal = app.add_subcommand("calibrate", "Measure this machine's ceilings: bandwidths and compute peaks");
    bool cal_quick = false;
    std::string cal_out;
    int cal_threads = 0;
    cal->add_flag("--quick", cal_quick, "Shorter measurement (a few seconds)");
    cal->add_option("--out", cal_out, "Write ceilings JSON here");
    cal->add_option("--threads", cal_threads, "Up to this many threads (default: all)");

    // plot
    auto* plot = app.add_subcommand("plot", "Draw rooflines and speedup bars (SVG + PNG) from a results file");
    std::string plot_in, plot_dir;
    plot->add_option("results", plot_in, "Results JSON from `memwall run --out`")->required();
    plot->add_option("--out-dir", plot_dir, "Folder for the plots (default: beside the results file)");

    // report
    auto* report = app.add_subcommand(
        "report", "Summarize a results file as markdown or CSV, or a results folder as one HTML page (--html)");
    std::string report_in, report_fmt = "md", report_out, report_compare;
    bool report_html = false;
    report->add_option("results", report_in, "Results JSON (with --html: a results folder)")->required();
    report->add_option("--format", report_fmt, "md or csv")->default_val("md");
    report->add_option("--out", report_out, "Write here instead of standard output (--html: instead of FOLDER/index.html)");
    report->add_flag("--html", report_html,
                     "Write FOLDER/index.html: machine, ceilings, per lever plots, tables, verdicts and claims");
    report->add_option("--compare", report_compare,
                       "With --html: a second results folder (another machine or commit) to compare against");

    // compare
    auto* cmp = app.add_subcommand("compare", "Compare two results files variant by variant");
    std::string cmp_base, cmp_new;
    cmp->add_option("base", cmp_base, "Baseline results JSON")->required();
    cmp->add_option("new", cmp_new, "New results JSON")->required();

    // Registered subcommands (lesson, grade, calc, reproduce, ...).
    std::vector<std::pair<CLI::App*, CommandAction>> modules;
    for (auto& [name, setup] : command_modules()) {
        CommandAction action = setup(app);
        modules.emplace_back(app.get_subcommand(name), std::move(action));
    }

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::cerr << "memwall: " << e.what() << "\n";
        if (app.get_subcommands().empty()) {
            std::string names = "list, run, calibrate, plot, report, compare";
            for (auto& [name, setup] : command_modules()) names += ", " + name;
            std::cerr << "valid commands: " << names << " (memwall --help)\n";
        }
        return 2;
    }

    try {
        if (*list) return cmd_list(list_json);

        if (*run) {
            auto b = parse_backend(backend_s);
            if (!b) throw UsageError("unknown backend '" + backend_s + "'; valid backends: " + join(all_backend_names()));
            req.backend = *b;
            if (!dtype_s.empty()) {
                req.dtype = parse_dtype(dtype_s);
                if (!req.dtype) throw UsageError("unknown dtype '" + dtype_s + "'; valid dtypes: " + join(all_dtype_names()));
            }
            const int hw = std::max(1u, std::thread::hardware_concurrency());
            if (run->count("--threads") && (threads < 1 || threads > 4 * hw))
                throw UsageError("--threads " + std::to_string(threads) + " is out of range; valid: 1.." +
                                 std::to_string(4 * hw) + " (this machine has " + std::to_string(hw) + ")");
            if (req.timing.budget_s < 0) throw UsageError("--budget must be >= 0 seconds");
            if (req.rounds < 1 || req.rounds > 100)
                throw UsageError("--rounds " + std::to_string(req.rounds) + " is out of range; valid: 1..100");
            req.threads = threads;
            if (req.quick) {
                req.timing.budget_s = std::min(req.timing.budget_s, 0.3);
                req.timing.min_samples = 3;
            }
            check_output_path(out_path, "--out");
            req.command_line = command_for_record(argc, argv);
            if (!out_dir.empty() && fs::exists(out_dir) && !fs::is_directory(out_dir))
                throw UsageError("--out-dir '" + out_dir + "' is a file; give a folder");
            auto plans = plan_runs(req);  // all validation happens before anything runs
            Ceilings c = load_or_measure_ceilings(ceilings_path, req.threads > 0 ? req.threads : hw, req.quick);
            auto failed = [](const nlohmann::json& doc) {
                for (auto& r : doc["runs"])
                    if (r.value("ran", false) && !r["correct"].get<bool>()) return true;
                return false;
            };
            // Under mpirun every rank runs the plan (collective variants need
            // them all); only rank 0 prints and writes.
            const bool reporter = launch_rank() == 0;
            std::ostream quiet(nullptr);
            if (!out_dir.empty()) {
                // One process, one file per lever, written when the lever is done.
                RunProgress job;
                job.total = count_variants(plans);
                std::vector<std::string> levers;
                for (auto& p : plans)
                    if (std::find(levers.begin(), levers.end(), p.op->lever) == levers.end()) levers.push_back(p.op->lever);
                bool any_failed = false;
                for (auto& lever : levers) {
                    std::vector<RunPlan> mine;
                    for (auto& p : plans)
                        if (p.op->lever == lever) mine.push_back(p);
                    auto doc = run_plans(mine, req, c, reporter ? std::cout : quiet, &job);
                    any_failed = any_failed || failed(doc);
                    if (!reporter) continue;
                    const fs::path out = fs::path(out_dir) / (lever + "-" + to_string(req.backend) + ".json");
                    write_json_atomic(out, doc);
                    write_file_atomic(fs::path(out).replace_extension(".md"), report_markdown(doc));
                    write_file_atomic(fs::path(out).replace_extension(".csv"), report_csv(doc));
                    std::cout << "results: " << out.string() << " (+ .md, .csv)\n";
                }
                if (any_failed && reporter) std::cerr << "memwall: at least one variant is INCORRECT (see check_message)\n";
                return any_failed ? 1 : 0;
            }
            auto doc = run_plans(plans, req, c, reporter ? std::cout : quiet);
            const bool all_ok = !failed(doc);
            if (!reporter) return all_ok ? 0 : 1;
            if (!out_path.empty()) {
                fs::path out(out_path);
                write_json_atomic(out, doc);
                write_file_atomic(fs::path(out).replace_extension(".md"), report_markdown(doc));
                write_file_atomic(fs::path(out).replace_extension(".csv"), report_csv(doc));
                std::cout << "results: " << out.string() << " (+ .md, .csv)\n";
            } else {
                std::cout << "\n" << report_markdown(doc);
            }
            if (!all_ok) std::cerr << "memwall: at least one variant is INCORRECT (see check_message)\n";
            return all_ok ? 0 : 1;
        }

        if (*cal) {
            const int hw = std::max(1u, std::thread::hardware_concurrency());
            if (cal->count("--threads") && (cal_threads < 1 || cal_threads > 4 * hw))
                throw UsageError("--threads " + std::to_string(cal_threads) + " is out of range; valid: 1.." +
                                 std::to_string(4 * hw));
            check_output_path(cal_out, "--out");
            std::cerr << "calibrating (" << (cal_quick ? "quick" : "full") << ")...\n";
            Ceilings c = calibrate_cpu(cal_threads > 0 ? cal_threads : hw, cal_quick);
            calibrate_gpu(c, cal_quick);
            print_ceilings(c);
            if (!cal_out.empty()) {
                nlohmann::json doc = {{"schema", kCeilingsSchema}, {"machine", machine_info()}, {"ceilings", to_json(c)}};
                write_json_atomic(cal_out, doc);
                std::cout << "ceilings: " << cal_out << "\n";
            }
            return 0;
        }

        if (*plot) {
            auto doc = read_json_file(plot_in);
            validate_results(doc);
            fs::path dir = plot_dir.empty() ? fs::path(plot_in).parent_path() : fs::path(plot_dir);
            if (dir.empty()) dir = ".";
            std::vector<fs::path> written;
            plot_results(doc, dir, &written);
            for (auto& w : written) std::cout << "plot: " << w.string() << "\n";
            return 0;
        }

        if (*report) {
            if (report_html) {
                const auto page = write_html_report({report_in, report_compare, report_out});
                std::cout << "report: " << page.string() << "\n";
                return 0;
            }
            if (!report_compare.empty()) throw UsageError("--compare needs --html (or use: memwall compare BASE NEW)");
            if (report_fmt != "md" && report_fmt != "csv")
                throw UsageError("unknown report format '" + report_fmt + "'; valid formats: md, csv");
            auto doc = read_json_file(report_in);
            std::string text = report_fmt == "md" ? report_markdown(doc) : report_csv(doc);
            if (report_out.empty()) std::cout << text;
            else write_file_atomic(report_out, text);
            return 0;
        }

        if (*cmp) {
            std::cout << compare_markdown(read_json_file(cmp_base), read_json_file(cmp_new));
            return 0;
        }

        for (auto& [sub, action] : modules)
            if (sub && sub->parsed()) return action();
    } catch (const UsageError& e) {
        std::cerr << "memwall: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "memwall: " << e.what() << "\n";
        return 1;
    }
    return 2;
}

}  // namespace mw
