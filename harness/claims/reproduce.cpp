// `memwall reproduce`: every published claim of experiments/claims.json,
// recomputed and judged.
//
//   memwall reproduce                              all claims, markdown table
//   memwall reproduce --lever fusion --format json
//   memwall reproduce --claim precision.int4_g64_effective_bits
//   memwall reproduce --run-experiments --out results/claims/reproduce.json
//
// Verdicts: "reproduced" (ours within the claim's tolerance of the published
// value or range), "differs" (the recomputation and the reason are shown),
// "needs a GPU" (a wall-clock claim this machine cannot measure; no number
// is invented), "not run" (a CPU experiment without --run-experiments).
// The claims are data: a new lever adds entries to the file, not code here.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "harness/cli.hpp"
#include "harness/claims/formulas.hpp"
#include "harness/results.hpp"
#include "harness/runner.hpp"
#include "harness/strings.hpp"

namespace mw {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ReproduceOptions {
    std::string lever, claim, out, format = "md", claims_path;
    bool run_experiments = false;
};

// The claims file: --claims, else experiments/claims.json under the current
// folder or one of its parents, else the one in the source tree this binary
// was built from (so a build folder outside the repository still finds it).
fs::path find_claims(const std::string& given) {
    if (!given.empty()) {
        if (!fs::exists(given)) throw UsageError("claims file '" + given + "' does not exist");
        return given;
    }
    for (fs::path d = fs::current_path();; d = d.parent_path()) {
        if (fs::exists(d / "experiments" / "claims.json")) return d / "experiments" / "claims.json";
        if (d == d.parent_path()) break;
    }
    fs::path src = fs::path(__FILE__).parent_path().parent_path().parent_path() / "experiments" / "claims.json";
    if (fs::exists(src)) return src;
    throw UsageError("cannot find experiments/claims.json; run from the repository or pass --claims FILE");
}

// JSON parameters -> the "--name value" text form the formulas validate.
std::map<std::string, std::string> raw_params(const json& obj) {
    std::map<std::string, std::string> raw;
    for (auto& [k, v] : obj.items()) {
        if (v.is_string()) raw[k] = v.get<std::string>();
        else raw[k] = calc::fmt(v.get<double>(), 17);
    }
    return raw;
}

json patched(const json& base, const json& patch) {
    json p = base;
    for (auto& [k, v] : patch.items()) {
        if (v.is_null()) p.erase(k);
        else p[k] = v;
    }
    return p;
}

struct Value {
    double lo = 0, hi = 0;  // equal unless the check sweeps a parameter
    std::string dim;
    std::string text;       // categorical outputs
};

Value eval_output(const std::string& formula, const json& params, const std::string& output) {
    const calc::Formula* f = calc::find_formula(formula);
    if (!f) throw std::runtime_error("unknown formula '" + formula + "'");
    auto outs = calc::evaluate(*f, raw_params(params));
    const calc::Output* o = calc::find_output(outs, output);
    if (!o) {
        std::vector<std::string> names;
        for (auto& x : outs) names.push_back(x.name);
        throw std::runtime_error("formula " + formula + " has no output '" + output + "' for these parameters; it gives: " +
                                 join(names));
    }
    return {o->value, o->value, o->dim, o->text};
}

// A formula check: one value, a sweep over one parameter (a range), or a
// ratio of the output under two parameter sets (divide_by).
Value eval_formula_check(const json& check, const json& params_override = json()) {
    const std::string formula = check.at("formula");
    json params = check.value("params", json::object());
    if (!params_override.is_null()) params = patched(params, params_override);
    const std::string output = check.at("output");
    auto one = [&](const json& ps) {
        Value v = eval_output(formula, ps, output);
        if (check.contains("divide_by")) {
            const json& d = check["divide_by"];
            Value w = eval_output(d.value("formula", formula), patched(ps, d.value("params", json::object())),
                                  d.value("output", output));
            if (w.lo == 0) throw std::runtime_error("divide_by evaluates to 0");
            v = {v.lo / w.lo, v.lo / w.lo, v.dim == w.dim ? "1" : v.dim + "/" + w.dim, {}};
        }
        return v;
    };
    if (!check.contains("sweep")) return one(params);
    const json& sw = check["sweep"];
    Value r;
    bool first = true;
    for (auto& x : sw.at("values")) {
        json ps = params;
        ps[sw.at("param").get<std::string>()] = x;
        Value v = one(ps);
        if (first) r = v;
        r.lo = std::min(r.lo, v.lo);
        r.hi = std::max(r.hi, v.hi);
        first = false;
    }
    return r;
}

// A CPU experiment: run one of the project's own commands and read one field
// of its results file.
Value eval_cpu_experiment(const json& check, std::string* log) {
    char self[4096] = {};
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) throw std::runtime_error("cannot locate the memwall binary");
    const fs::path tmp = fs::temp_directory_path() / ("memwall-claim-" + std::to_string(getpid()) + ".json");
    const std::string cmd = std::string(self) + " " + check.at("command").get<std::string>() + " --out '" +
                            tmp.string() + "' > '" + tmp.string() + ".log' 2>&1";
    const int rc = std::system(cmd.c_str());
    if (log) *log = "memwall " + check.at("command").get<std::string>();
    if (rc != 0 || !fs::exists(tmp)) {
        std::ifstream f(tmp.string() + ".log");
        std::stringstream ss;
        ss << f.rdbuf();
        throw std::runtime_error("experiment failed (" + cmd + "): " + ss.str().substr(0, 400));
    }
    json doc = read_json_file(tmp);
    for (auto p : {tmp, fs::path(tmp.string() + ".log"), fs::path(tmp).replace_extension(".md"),
                   fs::path(tmp).replace_extension(".csv")})
        fs::remove(p);
    const json sel = check.value("select", json::object());
    const std::string field = check.at("field");
    std::vector<double> vals;
    for (auto& r : doc.at("runs")) {
        bool ok = true;
        for (auto& [k, v] : sel.items()) ok = ok && r.contains(k) && r[k] == v;
        if (ok && r.contains(field) && r[field].is_number()) vals.push_back(r[field].get<double>());
    }
    if (vals.empty()) throw std::runtime_error("no run matched " + sel.dump() + " with a numeric '" + field + "'");
    // Fraction of the measured peak of a dtype (all threads), e.g. "% of peak FLOPs".
    if (check.contains("per_peak_dtype")) {
        double peak = 0;
        for (auto& pk : doc.at("ceilings").at("peaks"))
            if (pk.at("dtype") == check["per_peak_dtype"]) peak = std::max(peak, pk.at("gflops").get<double>());
        if (peak <= 0) throw std::runtime_error("the results have no measured " + check["per_peak_dtype"].dump() + " peak");
        for (auto& v : vals) v /= peak;
    }
    const std::string reduce = check.value("reduce", "max");
    const double v = reduce == "min" ? *std::min_element(vals.begin(), vals.end()) : *std::max_element(vals.begin(), vals.end());
    return {v, v, check.value("dim", "1"), {}};
}

bool within(double ours, double pub, const json& tol) {
    const double slack = 1 + 1e-9;  // the boundary itself counts (a rounded 1.25 is "1.2")
    if (tol.contains("absolute")) return std::abs(ours - pub) <= tol["absolute"].get<double>() * slack;
    const double rel = tol.value("relative", 0.02);
    return std::abs(ours - pub) <= rel * std::abs(pub) * slack;
}

// Published value or range vs ours (a value or a range), in published units.
bool matches(double lo, double hi, const json& pub, const json& tol) {
    if (pub.contains("range")) {
        const double a = pub["range"][0].get<double>(), b = pub["range"][1].get<double>();
        if (lo == hi) return (lo >= a && lo <= b) || within(lo, a, tol) || within(lo, b, tol);
        return within(lo, a, tol) && within(hi, b, tol);
    }
    const double v = pub.at("value").get<double>();
    return within(lo, v, tol) && within(hi, v, tol);
}

std::string show_pub(const json& pub) {
    const std::string u = pub.value("unit", "");
    const std::string sep = u == "%" || u == "x" ? "" : " ";
    if (pub.contains("range"))
        return calc::fmt(pub["range"][0].get<double>()) + "–" + calc::fmt(pub["range"][1].get<double>()) + sep + u;
    if (pub.at("value").is_string()) return pub["value"].get<std::string>();
    return (pub.value("approx", false) ? "~" : "") + calc::fmt(pub["value"].get<double>()) + sep + u;
}

std::string show_ours(double lo, double hi, const std::string& unit) {
    const std::string sep = unit == "%" || unit == "x" ? "" : " ";
    return lo == hi ? calc::fmt(lo) + sep + unit : calc::fmt(lo) + "–" + calc::fmt(hi) + sep + unit;
}

struct Judged {
    json row;
    std::string verdict;
};

Judged judge(const json& c, bool run_experiments) {
    json row = {{"id", c.at("id")},           {"lever", c.at("lever")},
                {"source", c.at("source")},   {"statement", c.at("statement")},
                {"published", c.at("published")}, {"conditions", c.value("conditions", json::object())},
                {"check", c.at("check")}};
    const json& check = c.at("check");
    const json& pub = c.at("published");
    const std::string kind = check.at("kind");
    const std::string unit = pub.value("unit", "");
    row["published_text"] = show_pub(pub);
    std::string verdict, recomputation, why;
    try {
        if (kind == "gpu-only") {
            verdict = "needs a GPU";
            row["ours_text"] = "—";
            why = check.value("why", "a wall-clock measurement on a GPU");
            if (check.contains("command")) why += "; on a GPU: memwall " + check["command"].get<std::string>();
        } else if (kind == "cpu-experiment" && !run_experiments) {
            verdict = "not run";
            row["ours_text"] = "—";
            why = "a CPU experiment (memwall " + check.at("command").get<std::string>() +
                  "); pass --run-experiments to run it";
        } else {
            std::string log;
            Value v = kind == "formula" ? eval_formula_check(check) : eval_cpu_experiment(check, &log);
            if (v.dim == "text") {
                row["ours"] = v.text;
                row["ours_text"] = v.text;
                verdict = pub.at("value").get<std::string>() == v.text ? "reproduced" : "differs";
            } else {
                const double lo = calc::to_unit(v.lo, v.dim, unit), hi = calc::to_unit(v.hi, v.dim, unit);
                row["ours"] = lo == hi ? json(lo) : json::array({lo, hi});
                row["ours_unit"] = unit;
                std::string ours_text = show_ours(lo, hi, unit);
                // Bytes: show the other convention beside, so GB/GiB slips are visible.
                const std::string other = calc::byte_unit_counterpart(unit);
                if (!other.empty())
                    ours_text += " (" + show_ours(calc::to_unit(v.lo, v.dim, other), calc::to_unit(v.hi, v.dim, other), other) + ")";
                row["ours_text"] = ours_text;
                const json tol = c.value("tolerance", json{{"relative", 0.02}});
                verdict = matches(lo, hi, pub, tol) ? "reproduced" : "differs";
                if (verdict == "differs") {
                    recomputation = "ours " + show_ours(lo, hi, unit) + " vs published " + show_pub(pub);
                    if (!pub.contains("range") && pub.at("value").get<double>() != 0)
                        recomputation += " (" + calc::fmt(100 * (lo - pub["value"].get<double>()) / pub["value"].get<double>(), 3) + "%)";
                    if (!other.empty()) {
                        const double olo = calc::to_unit(v.lo, v.dim, other), ohi = calc::to_unit(v.hi, v.dim, other);
                        if (matches(olo, ohi, pub, tol))
                            recomputation += "; the published number matches " + show_ours(olo, ohi, other) +
                                             ": the seed mixed decimal and binary units (" + unit + " vs " + other + ")";
                    }
                }
            }
            if (!log.empty()) row["experiment"] = log;
            // Alternative accountings, shown beside the verdict (never used for it).
            json alts = json::array();
            for (auto& a : c.value("alternatives", json::array())) {
                json ch = check;
                if (a.contains("output")) ch["output"] = a["output"];
                Value w = eval_formula_check(ch, a.value("params", json::object()));
                std::string t = w.text;
                if (w.dim != "text") {
                    const calc::Unit* u = calc::find_unit(unit);
                    // Another output may have another dimension: then show it in its own units.
                    t = u && u->dim == w.dim
                            ? show_ours(calc::to_unit(w.lo, w.dim, unit), calc::to_unit(w.hi, w.dim, unit), unit)
                            : calc::pretty({"", w.lo, w.dim, "", ""});
                }
                alts.push_back({{"label", a.at("label")}, {"ours_text", t}});
            }
            if (!alts.empty()) row["alternatives"] = alts;
            if (verdict == "differs") why = c.value("on_difference", "");
        }
    } catch (const std::exception& e) {
        verdict = "error";
        row["ours_text"] = "—";
        why = e.what();
    }
    row["verdict"] = verdict;
    if (!recomputation.empty()) row["recomputation"] = recomputation;
    if (!why.empty()) row["explanation"] = why;
    if (c.contains("note")) row["note"] = c["note"];
    return {row, verdict};
}

void validate_claim(const json& c) {
    for (const char* k : {"id", "lever", "source", "statement", "published", "check"})
        if (!c.contains(k)) throw std::runtime_error("a claim lacks \"" + std::string(k) + "\": " + c.dump().substr(0, 120));
    const std::string id = c["id"];
    const json& pub = c["published"];
    if (!pub.contains("value") && !pub.contains("range")) throw std::runtime_error("claim " + id + ": published needs value or range");
    const std::string unit = pub.value("unit", "");
    if (!calc::find_unit(unit))
        throw std::runtime_error("claim " + id + ": unknown unit '" + unit + "'; known: " + join(calc::unit_names()));
    const std::string kind = c["check"].value("kind", "");
    if (kind != "formula" && kind != "cpu-experiment" && kind != "gpu-only")
        throw std::runtime_error("claim " + id + ": check.kind must be formula, cpu-experiment or gpu-only");
}

std::string md_escape(std::string s) {
    std::string o;
    for (char ch : s) o += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return o;
}

std::string markdown(const json& doc) {
    std::ostringstream m;
    m << "# Published claims, recomputed\n\n";
    m << "Claims: `" << doc["claims_file"].get<std::string>() << "`. Command: `" << doc["command"].get<std::string>()
      << "`.\n\n";
    m << "| verdict | claims |\n|---|---|\n";
    for (auto& [k, v] : doc["counts"].items()) m << "| " << k << " | " << v.get<int>() << " |\n";
    m << "\n| id | statement | published | ours | verdict |\n|---|---|---|---|---|\n";
    for (auto& r : doc["claims"])
        m << "| `" << r["id"].get<std::string>() << "` | " << md_escape(r["statement"]) << " | "
          << md_escape(r["published_text"]) << " | " << md_escape(r["ours_text"]) << " | " << r["verdict"].get<std::string>()
          << " |\n";
    auto section = [&](const std::string& verdict, const std::string& title) {
        bool any = false;
        for (auto& r : doc["claims"]) {
            if (r["verdict"] != verdict) continue;
            if (!any) m << "\n## " << title << "\n\n";
            any = true;
            const json& src = r["source"];
            m << "- **" << r["id"].get<std::string>() << "** (" << src.value("file", "") << ", " << src.value("section", "")
              << "): " << r["statement"].get<std::string>() << "\n";
            if (r.contains("recomputation")) m << "  - recomputation: " << r["recomputation"].get<std::string>() << "\n";
            if (r.contains("explanation")) m << "  - why: " << r["explanation"].get<std::string>() << "\n";
            for (auto& a : r.value("alternatives", json::array()))
                m << "  - " << a["label"].get<std::string>() << ": " << a["ours_text"].get<std::string>() << "\n";
        }
    };
    section("differs", "Differs: the recomputation");
    section("needs a GPU", "Needs a GPU");
    section("not run", "CPU experiments not run");
    section("error", "Errors");
    bool notes = false;
    for (auto& r : doc["claims"]) {
        if (r["verdict"] != "reproduced" || (!r.contains("note") && !r.contains("alternatives"))) continue;
        if (!notes) m << "\n## Notes on reproduced claims\n\n";
        notes = true;
        m << "- **" << r["id"].get<std::string>() << "**:";
        if (r.contains("note")) m << " " << r["note"].get<std::string>();
        for (auto& a : r.value("alternatives", json::array()))
            m << " " << a["label"].get<std::string>() << ": " << a["ours_text"].get<std::string>() << ".";
        m << "\n";
    }
    return m.str();
}

int run_reproduce(const ReproduceOptions& o, const std::string& command) {
    if (o.format != "md" && o.format != "json")
        throw UsageError("unknown format '" + o.format + "'; valid formats: md, json");
    if (!o.out.empty()) {
        fs::path p(o.out);
        if (fs::exists(p) && fs::is_directory(p)) throw UsageError("--out '" + o.out + "' is a directory; give a file name");
        if (p.extension() != ".json") throw UsageError("--out '" + o.out + "' must end in .json (the .md is written beside it)");
    }
    const fs::path path = find_claims(o.claims_path);
    json file = read_json_file(path);
    if (!file.contains("claims") || !file["claims"].is_array())
        throw std::runtime_error(path.string() + " has no \"claims\" array");
    std::vector<std::string> levers, ids;
    for (auto& c : file["claims"]) {
        validate_claim(c);
        const std::string l = c["lever"], id = c["id"];
        if (std::find(levers.begin(), levers.end(), l) == levers.end()) levers.push_back(l);
        if (std::find(ids.begin(), ids.end(), id) != ids.end()) throw std::runtime_error("duplicate claim id " + id);
        ids.push_back(id);
    }
    // Lever ids are spelled with underscores (kv_cache, like its ops and
    // folders); "kv-cache" is accepted too.
    std::string lever = o.lever;
    std::replace(lever.begin(), lever.end(), '-', '_');
    if (!lever.empty() && std::find(levers.begin(), levers.end(), lever) == levers.end())
        throw UsageError("no claims for lever '" + o.lever + "'; levers with claims: " + join(levers));
    if (!o.claim.empty() && std::find(ids.begin(), ids.end(), o.claim) == ids.end())
        throw UsageError("unknown claim '" + o.claim + "'; valid claims: " + join(ids));

    json rows = json::array();
    std::map<std::string, int> counts;
    for (auto& c : file["claims"]) {
        if (!lever.empty() && c["lever"] != lever) continue;
        if (!o.claim.empty() && c["id"] != o.claim) continue;
        Judged j = judge(c, o.run_experiments);
        counts[j.verdict]++;
        rows.push_back(j.row);
    }
    json doc = {{"schema", "memwall.claims-report/1"},
                {"claims_file", path_for_record(path.string())},
                {"claims_schema", file.value("schema", "")},
                {"command", command},
                {"run_experiments", o.run_experiments},
                {"counts", counts},
                {"claims", rows}};
    if (o.run_experiments) doc["machine"] = machine_info();
    const std::string md = markdown(doc);
    if (o.format == "json") std::cout << doc.dump(2) << "\n";
    else std::cout << md;
    if (!o.out.empty()) {
        write_json_atomic(o.out, doc);
        write_file_atomic(fs::path(o.out).replace_extension(".md"), md);
        std::cerr << "claims report: " << o.out << " (+ .md)\n";
    }
    return counts.count("error") ? 1 : 0;
}

}  // namespace

MW_REGISTER_COMMAND(reproduce, [](CLI::App& app) -> CommandAction {
    auto* sub = app.add_subcommand("reproduce", "Recompute the seed texts' published claims and judge each one");
    auto o = std::make_shared<ReproduceOptions>();
    sub->add_option("--lever", o->lever, "Only claims of this lever");
    sub->add_option("--claim", o->claim, "Only this claim id");
    sub->add_option("--out", o->out, "Write the report as JSON here and markdown beside it");
    sub->add_option("--format", o->format, "md or json (standard output)")->default_val("md");
    sub->add_option("--claims", o->claims_path, "Claims file (default: experiments/claims.json)");
    sub->add_flag("--run-experiments", o->run_experiments, "Also run the CPU-experiment claims (slow)");
    return [o, sub] {
        std::string cmd = "memwall reproduce";
        if (!o->lever.empty()) cmd += " --lever " + o->lever;
        if (!o->claim.empty()) cmd += " --claim " + o->claim;
        if (o->run_experiments) cmd += " --run-experiments";
        if (!o->out.empty()) cmd += " --out " + path_for_record(o->out);
        (void)sub;
        return run_reproduce(*o, cmd);
    };
});

}  // namespace mw
