// `memwall report DIR --html`: one self-contained page (DIR/index.html) from
// a results folder — the machine and its measured ceilings, per lever the
// roofline, speedup and memory plots (gnuplot SVG, inlined), time and memory
// tables, correctness verdicts with their errors, the lever's claims with
// their verdicts, a link to its lesson; with a second folder, a noise-aware
// comparison of every variant both folders ran (compare_runs in results.hpp).
//
// A results folder: ceilings.json (memwall calibrate --out), any number of
// results files (memwall.results/1), optionally a claims report
// (memwall reproduce --out, memwall.claims-report/1) and job.json (written
// by scripts/main-job.sh: the files it made and how long each part took).
// Other JSON files without a memwall schema are listed and left alone.
//
// Everything is read and validated before anything is written: a missing
// file, JSON that does not parse (a truncated file), or a memwall schema of
// another version is a UsageError naming the file (exit 2, no page). The plots
// are drawn into a temporary folder that becomes DIR/plots/ and the page is
// written through a temporary file and a rename, so a failure leaves no
// partial page.
#pragma once

#include <filesystem>
#include <string>

namespace mw {

struct HtmlReportOptions {
    std::string dir;          // the results folder
    std::string compare_dir;  // optional: a second folder (another machine or commit), the baseline
    std::string out;          // default: DIR/index.html
    bool plots = true;        // false: no gnuplot needed, the page says where its plots went (the GPU kit)
};

// Writes the page; returns its path.
std::filesystem::path write_html_report(const HtmlReportOptions& opts);

}  // namespace mw
