#include "harness/results.hpp"

#include "harness/disturbance.hpp"
#include "harness/onednn.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "harness/gpu.hpp"
#include "harness/memtrack.hpp"
#include "harness/strings.hpp"

extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);

#ifndef MEMWALL_SOURCE_DIR
#define MEMWALL_SOURCE_DIR "."
#endif
#ifndef MEMWALL_CXX_FLAGS
#define MEMWALL_CXX_FLAGS ""
#endif
#ifndef MEMWALL_BUILD_TYPE
#define MEMWALL_BUILD_TYPE ""
#endif

namespace mw {

namespace {

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
    auto p = s.find_first_not_of(' ');
    return p == std::string::npos ? "" : s.substr(p);
}

std::string run_command(const std::string& cmd) {
    std::array<char, 256> buf{};
    std::string out;
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
    if (!pipe) return "";
    while (fgets(buf.data(), buf.size(), pipe.get())) out += buf.data();
    return trim(out);
}

std::string cpuinfo_field(const std::string& key) {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind(key, 0) == 0) {
            auto p = line.find(':');
            if (p != std::string::npos) return trim(line.substr(p + 1));
        }
    return "";
}

std::string read_first_line(const std::string& path) {
    std::ifstream f(path);
    std::string s;
    std::getline(f, s);
    return trim(s);
}

}  // namespace

nlohmann::json machine_info() {
    nlohmann::json m;
    m["cpu_model"] = cpuinfo_field("model name");
    // Vendor and family/model numbers: what decides the datapath (Intel
    // family 6 vs AMD family 25 = Zen 4 run the same AVX-512 code at different widths).
    m["cpu_vendor"] = cpuinfo_field("vendor_id");
    for (auto [field, key] : {std::pair{"cpu family", "cpu_family"}, std::pair{"model", "cpu_model_number"}}) {
        const std::string v = cpuinfo_field(field);
        if (!v.empty() && std::all_of(v.begin(), v.end(), [](unsigned char ch) { return std::isdigit(ch); }))
            m[key] = std::stoi(v);
    }
    // The flags that decide which rungs can run.
    std::istringstream flags(cpuinfo_field("flags"));
    std::vector<std::string> keep;
    for (std::string f; flags >> f;)
        if (f == "avx2" || f == "fma" || f.rfind("avx512", 0) == 0 || f == "avx_vnni" || f.rfind("amx", 0) == 0 ||
            f == "f16c")
            keep.push_back(f);
    m["cpu_flags"] = keep;
    m["cores"] = std::thread::hardware_concurrency();
    nlohmann::json caches = nlohmann::json::object();
    for (int i = 0; i < 8; ++i) {
        std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
        std::string level = read_first_line(dir + "level");
        if (level.empty()) break;
        std::string type = read_first_line(dir + "type");
        if (type == "Instruction") continue;
        caches["L" + level + (type == "Data" ? "d" : "")] = read_first_line(dir + "size");
    }
    m["caches"] = caches;
    m["hypervisor"] = cpuinfo_field("flags").find("hypervisor") != std::string::npos;
    m["compiler"] = std::string("g++ ") + __VERSION__;
    m["compiler_flags"] = MEMWALL_CXX_FLAGS;
    m["build_type"] = MEMWALL_BUILD_TYPE;
    std::string src = MEMWALL_SOURCE_DIR;
    m["git_commit"] = run_command("git -C '" + src + "' rev-parse --short=12 HEAD 2>/dev/null");
    m["git_dirty"] = !run_command("git -C '" + src + "' status --porcelain --untracked-files=no 2>/dev/null").empty();
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    m["hostname"] = host;
    // The vendor rung's own view of the CPU (see commands/main.cpp).
    m["openblas"] = {{"core", openblas_get_corename()}, {"config", openblas_get_config()},
                     {"coretype_env", std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : ""}};
    // The other CPU vendor library: its version, or why it did not load.
    std::string onednn_why;
    m["onednn"] = onednn::available(&onednn_why) ? onednn::version() : "not loaded: " + onednn_why;
    // How OpenMP's idle threads wait (spinning or sleeping) changes the time
    // of short parallel regions, a cached decode step's for one; record it,
    // so that runs are compared under the same policy.
    const char* wait = std::getenv("OMP_WAIT_POLICY");
    m["omp_wait_policy"] = wait && *wait ? std::string(wait) : std::string("default");
    // Buffers of 2 MiB and more are advised as huge pages; whether the
    // kernel grants them ("never" refuses) moves a DRAM stream's rate.
    m["transparent_hugepages"] = memtrack::transparent_hugepages();
    m["huge_pages_advised"] = memtrack::huge_pages_advised();
    m["gpu"] = gpu_machine_info();
    return m;
}

void write_file_atomic(const std::filesystem::path& path, const std::string& text) {
    namespace fs = std::filesystem;
    if (path.has_parent_path()) fs::create_directories(path.parent_path());
    std::random_device rd;
    fs::path tmp = path;
    tmp += ".tmp." + std::to_string(getpid()) + "." + std::to_string(rd());
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) throw std::runtime_error("cannot write " + tmp.string());
        f << text;
        f.flush();
        if (!f) {
            f.close();
            fs::remove(tmp);
            throw std::runtime_error("error while writing " + tmp.string());
        }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) {
        fs::remove(tmp);
        throw std::runtime_error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
    }
}

// Indented by one space: results files travel in the repository (and in the
// GPU kit's tree), where a second space per level is a tenth of their bytes.
void write_json_atomic(const std::filesystem::path& path, const nlohmann::json& doc) {
    write_file_atomic(path, doc.dump(1) + "\n");
}

std::string path_for_record(const std::string& path, const std::filesystem::path& root) {
    namespace fs = std::filesystem;
    if (path.find('/') == std::string::npos) return path;  // a plain name or value
    std::error_code ec;
    const fs::path p = fs::path(path).is_absolute() ? fs::path(path) : fs::current_path(ec) / path;
    const fs::path abs = p.lexically_normal(), base = fs::weakly_canonical(root, ec).lexically_normal();
    const fs::path canon = fs::weakly_canonical(abs, ec);
    for (const fs::path& candidate : {abs, canon}) {
        const fs::path rel = candidate.lexically_relative(base);
        if (!rel.empty() && *rel.begin() != "..") return rel == "." ? "." : rel.string();
    }
    if (fs::path(path).is_absolute()) return abs.filename().string();
    return path;
}

std::filesystem::path source_root() {
    const char* env = std::getenv("MEMWALL_SOURCE_DIR");
    return env && *env ? env : MEMWALL_SOURCE_DIR;
}

std::string path_for_record(const std::string& path) { return path_for_record(path, source_root()); }

std::string command_for_record(int argc, char** argv) {
    std::string s = "memwall";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const auto eq = a.find('=');
        if (a.rfind("--", 0) == 0 && eq != std::string::npos)
            s += " " + a.substr(0, eq + 1) + path_for_record(a.substr(eq + 1));
        else
            s += " " + path_for_record(a);
    }
    return s;
}

nlohmann::json read_json_file(const std::filesystem::path& path) {
    std::ifstream f(path);
    if (!f) throw std::runtime_error("cannot open '" + path.string() + "'");
    try {
        return nlohmann::json::parse(f);
    } catch (const nlohmann::json::parse_error& e) {
        throw std::runtime_error("'" + path.string() + "' is not valid JSON: " + e.what());
    }
}

void validate_results(const nlohmann::json& doc) {
    if (!doc.is_object() || !doc.contains("schema"))
        throw std::runtime_error("not a memwall results document (no \"schema\" field)");
    if (doc["schema"] != kResultsSchema)
        throw std::runtime_error("unsupported schema " + doc["schema"].dump() + " (this memwall reads " +
                                 kResultsSchema + ")");
    for (const char* k : {"machine", "ceilings", "runs"})
        if (!doc.contains(k)) throw std::runtime_error(std::string("results document has no \"") + k + "\" field");
    static const char* kRunFields[] = {"lever", "op",    "variant", "role",    "backend",   "rung",
                                       "dtype", "shape", "flops",   "bytes",   "intensity", "time_s",
                                       "gflops", "gbps", "correct", "error"};
    for (auto& r : doc["runs"])
        for (const char* k : kRunFields)
            if (!r.contains(k)) throw std::runtime_error(std::string("a run has no \"") + k + "\" field");
}

namespace {

std::string fmt_opt(const nlohmann::json& v, int prec = 3, const char* suffix = "") {
    if (v.is_null()) return "—";
    return fmt(v.get<double>(), prec) + suffix;
}

// " (lo–hi)": the speedup's range over paired rounds (speedup_vs_naive_range), or "".
std::string range_str(const nlohmann::json& r) {
    auto it = r.find("speedup_vs_naive_range");
    if (it == r.end() || !it->is_object() || !it->value("lo", nlohmann::json()).is_number() ||
        !it->value("hi", nlohmann::json()).is_number())
        return "";
    return " (" + fmt((*it)["lo"].get<double>(), 3) + "–" + fmt((*it)["hi"].get<double>(), 3) + ")";
}

std::string group_key(const nlohmann::json& r) {
    return r["lever"].get<std::string>() + " / " + r["op"].get<std::string>() + " / " +
           r["backend"].get<std::string>() + " / " + r["dtype"].get<std::string>() + " / " +
           r.value("shape_str", r["shape"].dump());
}


// Columns a group shows only when one of its runs has the field: results
// files from before these fields existed keep their old tables.
struct Column {
    std::string header;
    std::function<std::string(const nlohmann::json&)> cell;
};

bool any_run(const std::vector<const nlohmann::json*>& rows, const std::function<bool(const nlohmann::json&)>& f) {
    return std::any_of(rows.begin(), rows.end(), [&](const nlohmann::json* r) { return f(*r); });
}

bool has_number(const nlohmann::json& r, const char* key) { return r.contains(key) && r[key].is_number(); }

// A shape timed beside the read probe (a read-dominated op, --cold or
// --rounds): the roof it was judged by, what it is the best of (the probe's
// passes, and the read before each round where there were rounds), and the
// range of the probe's figures where the memory ran at more than one speed
// (the slowest under 80% of the fastest).
void write_read_probe_line(std::ostream& os, const std::vector<const nlohmann::json*>& rows) {
    double lo = 0, hi = 0, roof = 0;
    long passes = 0;
    int rounds = 1;
    for (const auto* r : rows) {
        if (!r->contains("read_probe_gbps")) continue;
        for (const auto& g : (*r)["read_probe_gbps"]) {
            const double v = g.get<double>();
            lo = lo == 0 ? v : std::min(lo, v);
            hi = std::max(hi, v);
        }
        passes += r->value("read_probe_passes", 0L);
        roof = std::max(roof, r->value("dram_read_roof_gbps", 0.0));
        rounds = std::max(rounds, r->value("rounds", 1));
    }
    if (passes == 0) return;
    os << "read roof: " << fmt("%.1f", roof) << " GB/s, the best of " << passes
       << " read-probe passes made beside this shape's timed calls";
    if (rounds > 1) os << " and of a read before each of its " << rounds << " rounds";
    if (lo < 0.8 * hi)
        os << " (the probe read " << fmt("%.1f", lo) << "-" << fmt("%.1f", hi)
           << " GB/s by variant and round: the memory ran at more than one speed during the run)";
    os << "\n\n";
}

std::vector<Column> optional_columns(const std::vector<const nlohmann::json*>& rows) {
    std::vector<Column> cols;
    auto opt = [](const nlohmann::json& r, const char* key, int prec, const char* suffix) {
        return fmt_opt(r.value(key, nlohmann::json()), prec, suffix);
    };
    if (any_run(rows, [](auto& r) { return has_number(r, "units_per_s"); })) {
        std::string unit = "units";
        for (auto* r : rows)
            if (r->contains("unit")) unit = (*r)["unit"].get<std::string>();
        cols.push_back({unit + "/s", [=](auto& r) { return r.value("timing_meaningful", true) ? opt(r, "units_per_s", 4, "") : "—"; }});
    }
    if (any_run(rows, [](auto& r) { return has_number(r, "mfu"); }))
        cols.push_back({"MFU", [=](auto& r) { return opt(r, "mfu", 2, ""); }});
    // HFU only where some variant executes more than the useful FLOPs.
    if (any_run(rows, [](auto& r) {
            return has_number(r, "hfu") && has_number(r, "executed_flops") &&
                   r["executed_flops"].template get<double>() != r["flops"].template get<double>();
        }))
        cols.push_back({"HFU", [=](auto& r) { return opt(r, "hfu", 2, ""); }});
    if (any_run(rows, [](auto& r) { return has_number(r, "peak_bytes"); })) {
        cols.push_back({"peak memory", [](auto& r) {
                            return has_number(r, "peak_bytes") ? bytes_str(r["peak_bytes"].template get<double>()) : "—";
                        }});
        if (any_run(rows, [](auto& r) { return has_number(r, "rss_growth_bytes"); }))
            cols.push_back({"RSS growth", [](auto& r) {
                                return has_number(r, "rss_growth_bytes")
                                           ? bytes_str(r["rss_growth_bytes"].template get<double>())
                                           : "—";
                            }});
        cols.push_back({"memory vs naive", [=](auto& r) { return opt(r, "memory_vs_naive", 3, "x"); }});
    }
    if (any_run(rows, [](auto& r) { return r.contains("near_ties"); }))
        cols.push_back({"near-ties", [](auto& r) { return r.contains("near_ties") ? r["near_ties"].dump() : "—"; }});
    return cols;
}

// Counters, one column per name any run of the group reports.
std::string counters_table(const std::vector<const nlohmann::json*>& rows) {
    std::set<std::string> names;
    for (auto* r : rows)
        if (r->contains("counters"))
            for (auto& [k, v] : (*r)["counters"].items()) names.insert(k);
    if (names.empty()) return "";
    std::ostringstream os;
    os << "\nCounters:\n\n| variant |";
    for (auto& n : names) os << " " << n << " |";
    os << "\n|---|";
    for (std::size_t i = 0; i < names.size(); ++i) os << "---:|";
    os << "\n";
    for (auto* r : rows) {
        if (!r->contains("counters")) continue;
        os << "| " << (*r)["variant"].get<std::string>() << " |";
        for (auto& n : names) os << " " << fmt_opt((*r)["counters"].value(n, nlohmann::json()), 6) << " |";
        os << "\n";
    }
    return os.str();
}

// Goodness-of-fit tests and near-tie notes, one line each.
std::string check_details(const std::vector<const nlohmann::json*>& rows) {
    std::ostringstream os;
    for (auto* r : rows) {
        const std::string v = (*r)["variant"].get<std::string>();
        if (r->contains("distribution"))
            for (auto& [out, t] : (*r)["distribution"].items())
                os << "- " << v << ", " << out << ": " << t.value("test", "chi-square") << " "
                   << fmt(t.value("statistic", 0.0)) << " with " << t.value("dof", 0) << " dof over "
                   << fmt(t.value("samples", 0.0), 6) << " samples, p = " << fmt(t.value("p_value", 0.0))
                   << " (fails below alpha = " << fmt(t.value("alpha", 0.0)) << ")\n";
        if (r->value("near_ties", 0) > 0)
            os << "- " << v << ": " << (*r)["near_ties"] << " sequence(s) diverged from the oracle at a near-tie step "
               << "(accepted; see check_message)\n";
    }
    const std::string s = os.str();
    return s.empty() ? s : "\nChecks:\n\n" + s;
}

}  // namespace

std::string report_markdown(const nlohmann::json& doc) {
    validate_results(doc);
    std::ostringstream os;
    const auto& m = doc["machine"];
    os << "# memwall results\n\n";
    os << "- machine: " << m.value("cpu_model", "?") << ", " << m.value("cores", 0) << " cores";
    if (m.contains("gpu") && m["gpu"].contains("name")) os << "; GPU " << m["gpu"]["name"].get<std::string>();
    os << "\n- compiler: " << m.value("compiler", "?") << " (" << m.value("build_type", "") << ")\n";
    os << "- commit: " << m.value("git_commit", "?") << (m.value("git_dirty", false) ? " (with local changes)" : "")
       << "\n";
    if (m.contains("omp_wait_policy")) os << "- OMP_WAIT_POLICY: " << m["omp_wait_policy"].get<std::string>() << "\n";
    if (m.contains("transparent_hugepages"))
        os << "- transparent huge pages: " << m["transparent_hugepages"].get<std::string>()
           << (m.value("huge_pages_advised", true) ? "" : " (not advised: MEMWALL_HUGEPAGES=0)") << "\n";
    const auto& c = doc["ceilings"];
    if (c.contains("dram_triad_gbps") && !c["dram_triad_gbps"].empty())
        os << "- ceilings (" << c.value("source", "?") << "): DRAM triad " << fmt(c["dram_triad_gbps"].back().get<double>())
           << " GB/s, fp32 peak " << fmt(c.value("peak_fp32_gflops", 0.0)) << " GFLOP/s (all threads)\n";
    if (doc.contains("command")) os << "- command: `" << doc["command"].get<std::string>() << "`\n";
    os << "\nTimes are per call: best of N samples (median in brackets). Speedups are ratios of best-of-N "
          "times measured in this run";
    const bool ranges = std::any_of(doc["runs"].begin(), doc["runs"].end(),
                                    [](const nlohmann::json& r) { return r.contains("speedup_vs_naive_range"); });
    if (ranges)
        os << "; in parentheses, the range of the speedup over the run's interleaved rounds, each round's best "
              "against the naive rung's best of the same round";
    os << ".\n";

    std::map<std::string, std::vector<const nlohmann::json*>> groups;
    std::vector<std::string> order;
    for (auto& r : doc["runs"]) {
        auto k = group_key(r);
        if (!groups.count(k)) order.push_back(k);
        groups[k].push_back(&r);
    }
    bool any_disturbed = false;
    for (auto& k : order) {
        const auto& rows = groups[k];
        os << "\n## " << k << "\n\n";
        os << "threads: " << rows.front()->value("threads", 1) << "\n\n";
        write_read_probe_line(os, rows);
        const auto extra = optional_columns(rows);
        os << "| rung | variant | role | time best [median] | samples | GFLOP/s | GB/s | FLOP/B | vs naive | vs vendor | of roof";
        for (auto& c : extra) os << " | " << c.header;
        os << " | correct |\n|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:";
        for (std::size_t i = 0; i < extra.size(); ++i) os << "|---:";
        os << "|---|\n";
        for (auto* rp : rows) {
            auto& r = *rp;
            const auto& t = r["time_s"];
            const bool meaningful = r.value("timing_meaningful", true);
            os << "| " << r["rung"] << " | " << r["variant"].get<std::string>() << " | "
               << r["role"].get<std::string>() << " | ";
            if (!r.value("ran", true)) {
                os << "not run: " << r.value("skip_reason", "") << " | | | | | | | |";
                for (std::size_t i = 0; i < extra.size(); ++i) os << " |";
                os << " |\n";
                continue;
            }
            const bool disturbed =
                meaningful && r.contains("disturbance") && r["disturbance"].value("disturbed", false);
            any_disturbed = any_disturbed || disturbed;
            os << (meaningful ? "" : "(emulated, not meaningful) ") << time_str(t.value("best", t["min"].get<double>()))
               << " [" << time_str(t["median"].get<double>()) << "]" << (disturbed ? " (disturbed*)" : "") << " | "
               << t["samples"] << " | "
               << (meaningful ? fmt(r["gflops"].get<double>()) : "—") << " | "
               << (meaningful ? fmt(r["gbps"].get<double>()) : "—") << " | " << fmt(r["intensity"].get<double>())
               << " | " << fmt_opt(r.value("speedup_vs_naive", nlohmann::json()), 3, "x") << range_str(r) << " | "
               << fmt_opt(r.value("speedup_vs_vendor", nlohmann::json()), 3, "x") << " | "
               << fmt_opt(r.value("fraction_of_roof", nlohmann::json()), 2);
            for (auto& c : extra) os << " | " << c.cell(r);
            os << " | " << (r["correct"].get<bool>() ? "yes" : "**NO**") << " |\n";
        }
        os << counters_table(rows) << check_details(rows);
    }
    if (any_disturbed) {
        os << "\n\\* disturbed: while this variant was timed, other processes or the hypervisor took more than "
           << fmt(kDisturbedShare * 100, 2) << "% of its cores (the row's `disturbance` says which). Its time is "
           << "slower than this machine can do, and a speedup against it is not this machine's.\n";
        for (auto& r : doc["runs"])
            if (r.value("timing_meaningful", true) && r.contains("disturbance") &&
                r["disturbance"].value("disturbed", false))
                os << "- " << group_key(r) << " / " << r["variant"].get<std::string>() << ": "
                   << r["disturbance"].value("why", std::string("?")) << "\n";
    }
    return os.str();
}

namespace {

// The distribution test with the lowest p-value of a run (null when none).
nlohmann::json worst_stat_test(const nlohmann::json& r) {
    nlohmann::json worst;
    if (!r.contains("distribution")) return worst;
    for (auto& [out, t] : r["distribution"].items())
        if (worst.is_null() || t.value("p_value", 1.0) < worst.value("p_value", 1.0)) worst = t;
    return worst;
}

}  // namespace

std::string report_csv(const nlohmann::json& doc) {
    validate_results(doc);
    std::set<std::string> counters;
    for (auto& r : doc["runs"])
        if (r.contains("counters"))
            for (auto& [k, v] : r["counters"].items()) counters.insert(k);
    std::ostringstream os;
    os << "lever,op,variant,role,backend,rung,dtype,shape,threads,flops,bytes,intensity,time_best_s,time_median_s,"
          "time_min_s,time_max_s,samples,gflops,gbps,correct,max_abs,max_rel,rel_fro,speedup_vs_naive,"
          "speedup_vs_vendor,fraction_of_roof,timing_meaningful,unit,units_per_s,executed_flops,mfu,hfu,"
          "peak_bytes,peak_extra_bytes,rss_growth_bytes,memory_vs_naive,near_ties,dist_statistic,dist_dof,dist_p_value";
    for (auto& c : counters) os << ",counter:" << c;
    os << "\n";
    auto num = [](const nlohmann::json& v) { return v.is_number() ? fmt(v.get<double>(), 6) : std::string(); };
    auto field = [&](const nlohmann::json& r, const char* key) {
        return r.is_object() ? num(r.value(key, nlohmann::json())) : std::string();
    };
    for (auto& r : doc["runs"]) {
        const auto& t = r["time_s"];
        os << r["lever"].get<std::string>() << "," << r["op"].get<std::string>() << ","
           << r["variant"].get<std::string>() << "," << r["role"].get<std::string>() << ","
           << r["backend"].get<std::string>() << "," << r["rung"] << "," << r["dtype"].get<std::string>() << ",\""
           << r.value("shape_str", "") << "\"," << r.value("threads", 1) << "," << num(r["flops"]) << ","
           << num(r["bytes"]) << "," << num(r["intensity"]) << "," << num(t.value("best", t["min"])) << ","
           << num(t["median"]) << "," << num(t["min"]) << "," << num(t["max"]) << "," << t["samples"] << ","
           << num(r["gflops"]) << "," << num(r["gbps"]) << "," << (r["correct"].get<bool>() ? "true" : "false")
           << "," << num(r["error"]["max_abs"]) << "," << num(r["error"]["max_rel"]) << ","
           << num(r["error"]["rel_fro"]) << "," << field(r, "speedup_vs_naive") << ","
           << field(r, "speedup_vs_vendor") << "," << field(r, "fraction_of_roof") << ","
           << (r.value("timing_meaningful", true) ? "true" : "false");
        const nlohmann::json dist = worst_stat_test(r);
        os << "," << r.value("unit", "") << "," << field(r, "units_per_s") << "," << field(r, "executed_flops") << ","
           << field(r, "mfu") << "," << field(r, "hfu") << "," << field(r, "peak_bytes") << ","
           << field(r, "peak_extra_bytes") << "," << field(r, "rss_growth_bytes") << "," << field(r, "memory_vs_naive") << "," << field(r, "near_ties")
           << "," << field(dist, "statistic") << "," << field(dist, "dof") << "," << field(dist, "p_value");
        for (auto& c : counters)
            os << "," << (r.contains("counters") ? num(r["counters"].value(c, nlohmann::json())) : std::string());
        os << "\n";
    }
    return os.str();
}

std::optional<std::pair<double, double>> paired_ratio_range(const nlohmann::json& a, const nlohmann::json& b) {
    if (!a.is_array() || !b.is_array() || a.size() != b.size() || a.size() < 2) return std::nullopt;
    double lo = 0, hi = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_number() || !b[i].is_number()) return std::nullopt;
        const double x = a[i].get<double>(), y = b[i].get<double>();
        if (!(x > 0 && y > 0)) return std::nullopt;
        lo = i == 0 ? x / y : std::min(lo, x / y);
        hi = i == 0 ? x / y : std::max(hi, x / y);
    }
    return std::pair{lo, hi};
}

std::string run_key(const nlohmann::json& r) { return group_key(r) + " / " + r["variant"].get<std::string>(); }

RunComparison compare_runs(const nlohmann::json& base, const nlohmann::json& now) {
    RunComparison c;
    auto timed = [](const nlohmann::json& r) {
        return r.value("ran", true) && r.value("timing_meaningful", true) && r["backend"] != "cuda-emu" &&
               r["time_s"].value("samples", 0) > 0;
    };
    auto best = [](const nlohmann::json& r) { return r["time_s"].value("best", r["time_s"].value("min", 0.0)); };
    auto spread = [&](const nlohmann::json& r) {
        const double b = best(r), m = r["time_s"].value("median", b);
        return b > 0 ? std::max(0.0, m / b - 1) : 0.0;
    };
    const bool cb = base.value("correct", false), cn = now.value("correct", false);
    if (timed(base) && timed(now) && best(now) > 0) {
        c.ratio = best(base) / best(now);
        c.noise = std::max(0.05, 2 * std::max(spread(base), spread(now)));
        c.verdict = c.ratio > 1 + c.noise ? "faster" : c.ratio < 1 / (1 + c.noise) ? "slower" : "within noise";
        // A disturbed side's time is the machine's load as much as the code's.
        auto disturbed = [](const nlohmann::json& r) {
            return r.contains("disturbance") && r["disturbance"].value("disturbed", false);
        };
        const bool db = disturbed(base), dn = disturbed(now);
        if (db || dn)
            c.verdict = std::string("not judged: ") +
                        (db && dn ? "both runs were" : db ? "the base run was" : "the new run was") +
                        " disturbed while timed";
    } else {
        c.verdict = "not timed";
    }
    if (cb && !cn) c.verdict = "now INCORRECT";
    if (!cb && cn && base.value("ran", true)) c.verdict = "now correct";
    return c;
}

std::string compare_markdown(const nlohmann::json& base, const nlohmann::json& now) {
    validate_results(base);
    validate_results(now);
    auto key = [](const nlohmann::json& r) { return run_key(r); };
    std::map<std::string, const nlohmann::json*> b;
    for (auto& r : base["runs"]) b[key(r)] = &r;
    std::ostringstream os;
    os << "# memwall compare\n\n";
    os << "- base: " << base["machine"].value("cpu_model", "?") << " @ " << base["machine"].value("git_commit", "?")
       << "\n- new:  " << now["machine"].value("cpu_model", "?") << " @ " << now["machine"].value("git_commit", "?")
       << "\n\nRatio = base best time / new best time (above 1: the new run is faster). Times from different runs "
          "are not a measured speedup: read large ratios only, and re-run both in one session to confirm. "
          "Verdict: faster or slower only beyond the noise, twice the larger spread (median / best) of the "
          "two runs and at least 5%; not judged where either run was disturbed while timed (other processes or "
          "the hypervisor held its cores: the row's `disturbance`). Beside it, each run's own speedup over its "
          "naive rung, measured within that run (with --rounds, the range over its interleaved rounds in "
          "parentheses): two runs' speedups compare where their times do not.\n\n";
    const std::string wb = base["machine"].value("omp_wait_policy", "unrecorded"),
                      wn = now["machine"].value("omp_wait_policy", "unrecorded");
    if (wb != wn)
        os << "**OMP_WAIT_POLICY differs: base " << wb << ", new " << wn
           << ".** It alone moves the times of short parallel regions; re-run one side with the other's.\n\n";
    auto pages = [](const nlohmann::json& m) {
        return m.value("transparent_hugepages", std::string("unrecorded")) +
               (m.value("huge_pages_advised", true) ? "" : " (not advised)");
    };
    const std::string hb = pages(base["machine"]), hn = pages(now["machine"]);
    if (hb != hn)
        os << "**Transparent huge pages differ: base " << hb << ", new " << hn
           << ".** A DRAM stream through 4 KiB pages can be much slower than through 2 MiB ones.\n\n";
    os << "| op / backend / dtype / shape / variant | base | new | ratio | verdict (noise) | vs naive: base | vs naive: "
          "new |\n|---|---:|---:|---:|---|---:|---:|\n";
    auto speedup = [](const nlohmann::json& r) {
        return fmt_opt(r.value("speedup_vs_naive", nlohmann::json()), 3, "x") + range_str(r);
    };
    int matched = 0;
    for (auto& r : now["runs"]) {
        auto it = b.find(key(r));
        if (it == b.end()) continue;
        const auto& tb = it->second->at("time_s");
        const auto& tn = r["time_s"];
        const double xb = tb.value("best", tb["min"].get<double>()), xn = tn.value("best", tn["min"].get<double>());
        const RunComparison v = compare_runs(*it->second, r);
        os << "| " << key(r) << " | " << time_str(xb) << " | " << time_str(xn) << " | "
           << (xn > 0 ? fmt(xb / xn) + "x" : "—") << " | " << v.verdict
           << (v.noise > 0 ? " (±" + fmt(100 * v.noise, 2) + "%)" : "") << " | " << speedup(*it->second) << " | "
           << speedup(r) << " |\n";
        ++matched;
    }
    if (matched == 0) os << "| (no run appears in both files) | | | | | | |\n";
    return os.str();
}

}  // namespace mw
