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
// is invented; with --run-experiments on a machine with a GPU, the claims
// that name a results field are run and the GPU is named), "not measurable
// here" (an open claim: a figure the seed states without what it would take
// to check it; the claim says what is missing and what would check it),
// "not run" (a CPU experiment without --run-experiments), "depends on an assumption" (the
// seed leaves an input open: under one reading its figure follows, under the
// project's own it does not; both are computed and shown). A "differs" gets a severity:
// wrong conclusion, error (with the factor) or rounding, and is listed worst
// first. Claims are also checked against each other (derived checks and
// shared quantities), and every numeric line of the seed texts must carry a
// claim (its quote, or one of its inputs) or a skip of a fixed kind in
// experiments/coverage.json; the closing note counts all
// of it. The claims are data: a new lever adds entries to the file, not code here.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "harness/command.hpp"
#include "commands/claims/formulas.hpp"
#include "harness/gpu.hpp"
#include "harness/results.hpp"
#include "harness/strings.hpp"

namespace mw {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct ReproduceOptions {
    std::string lever, claim, kind, out, format = "md", claims_path, seeds_dir;
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

// An experiment (a CPU one, or a GPU one on a machine with a GPU): run one of
// the project's own commands and read one field of its results file.
Value eval_experiment(const json& check, std::string* log) {
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

// The check under an alternative accounting or an assumption's reading:
// another output or formula of the same figure, another span of a swept
// input (or, null, none). Its params patch is applied by eval_formula_check.
json check_as(const json& check, const json& a) {
    json ch = check;
    if (a.contains("output")) ch["output"] = a["output"];
    if (a.contains("formula")) ch["formula"] = a["formula"];
    if (a.contains("sweep")) {
        if (a["sweep"].is_null()) ch.erase("sweep");
        else ch["sweep"] = a["sweep"];
    }
    return ch;
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

// The precision a published number states: one unit of its last significant
// digit (0.17 -> 0.01, 372 -> 1, 4000 -> 1000, 60 -> 10). A claim may state
// it instead ("precision": 0.05) where the text says more than the digits.
double stated_precision(double v, const json& claim) {
    if (claim.contains("precision")) return claim["precision"].get<double>();
    v = std::abs(v);
    if (v == 0) return 0;
    std::string t = fmt(v, 12);
    if (t.find('e') != std::string::npos) {  // 4.19e+09: mantissa digits after the point
        const auto e = t.find('e'), dot = t.find('.');
        const int decimals = dot == std::string::npos || dot > e ? 0 : static_cast<int>(e - dot - 1);
        return std::pow(10.0, std::stoi(t.substr(e + 1)) - decimals);
    }
    if (auto dot = t.find('.'); dot != std::string::npos) return std::pow(10.0, -static_cast<double>(t.size() - dot - 1));
    int zeros = 0;
    while (t.size() > 1 && t.back() == '0') t.pop_back(), ++zeros;
    return std::pow(10.0, zeros);
}

// How bad a "differs" is: a wrong conclusion (the claim is a conclusion the
// text draws, or a category), rounding (within the precision the text
// states, and within 10%; or within 1%), else a real error with the factor
// ours / published.
void classify(const json& c, const Value& v, const std::string& unit, json& row) {
    const json& pub = c.at("published");
    if (c.value("conclusion", false) || v.dim == "text") {
        row["severity"] = "wrong conclusion";
        return;
    }
    const double lo = calc::to_unit(v.lo, v.dim, unit), hi = calc::to_unit(v.hi, v.dim, unit);
    const double ours = (lo + hi) / 2;
    double target = 0;
    if (pub.contains("range")) {
        const double a = pub["range"][0].get<double>(), b = pub["range"][1].get<double>();
        target = std::abs(ours - a) < std::abs(ours - b) ? a : b;
    } else {
        target = pub.at("value").get<double>();
    }
    // Rounding: within one unit of the last stated digit and within 10%, or
    // within 1% whatever the digits ("100x" does not make 15x a rounding).
    const double unit_digit = stated_precision(target, c), diff = std::abs(ours - target);
    const double rel = target != 0 ? diff / std::abs(target) : 0;
    if ((diff <= unit_digit * (1 + 1e-9) && rel <= 0.1) || rel <= 0.01) {
        row["severity"] = "rounding";
        row["severity_note"] = "within one unit (" + calc::fmt(unit_digit) + ") of the last digit the text states";
        return;
    }
    row["severity"] = "error";
    if (target != 0 && ours != 0) {
        row["factor"] = ours / target;
        row["severity_note"] = "ours / published = " + calc::fmt(ours / target, 3);
    }
}

int severity_rank(const json& r) {
    const std::string s = r.value("severity", "");
    return s == "wrong conclusion" ? 0 : s == "error" ? 1 : s == "rounding" ? 2 : 3;
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
        const bool gpu_run = kind == "gpu-only" && run_experiments && gpu_count() > 0 && check.contains("field");
        if (kind == "gpu-only" && !gpu_run) {
            verdict = "needs a GPU";
            row["ours_text"] = "—";
            why = check.value("why", "a wall-clock measurement on a GPU");
            if (check.contains("command")) why += "; on a GPU: memwall " + check["command"].get<std::string>();
            if (run_experiments && gpu_count() == 0) why += " (not run: " + gpu_absent_reason() + ")";
            else if (run_experiments) why += " (not run: the claim names no results field to read)";
        } else if (kind == "open") {
            verdict = "not measurable here";
            row["ours_text"] = "—";
            why = check.at("why").get<std::string>() + "; would check it: " + check.at("would_check").get<std::string>();
        } else if (kind == "cpu-experiment" && !run_experiments) {
            verdict = "not run";
            row["ours_text"] = "—";
            why = "a CPU experiment (memwall " + check.at("command").get<std::string>() +
                  "); pass --run-experiments to run it";
        } else {
            std::string log;
            Value v = kind == "formula" ? eval_formula_check(check) : eval_experiment(check, &log);
            if (v.dim == "text") {
                row["ours"] = v.text;
                row["ours_text"] = v.text;
                verdict = pub.at("value").get<std::string>() == v.text ? "reproduced" : "differs";
                if (verdict == "differs")
                    recomputation = "ours " + v.text + " vs published " + pub.at("value").get<std::string>();
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
                // How far ours lies from a single published value, whatever the verdict.
                if (!pub.contains("range") && pub.at("value").get<double>() != 0 && lo == hi)
                    row["relative_gap"] = (lo - pub["value"].get<double>()) / std::abs(pub["value"].get<double>());
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
            if (gpu_run) row["gpu"] = gpu_machine_info().value("name", "a GPU");
            // Alternative accountings, shown beside the verdict (never used for it).
            json alts = json::array();
            for (auto& a : c.value("alternatives", json::array())) {
                Value w = eval_formula_check(check_as(check, a), a.value("params", json::object()));
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
            if (c.contains("assumption")) {
                // The readings of an input the seed leaves open, each judged
                // like the claim's own: a figure that follows under one of
                // them is not an error, but it is not reproduced either.
                const json& as = c["assumption"];
                const json tol = c.value("tolerance", json{{"relative", 0.02}});
                // A reading's value as shown, and whether the published figure follows from it.
                auto judged = [&](const Value& w) -> std::pair<std::string, bool> {
                    const bool text_pub = pub.contains("value") && pub["value"].is_string();
                    if (w.dim == "text") return {w.text, text_pub && pub["value"] == w.text};
                    const double wlo = calc::to_unit(w.lo, w.dim, unit), whi = calc::to_unit(w.hi, w.dim, unit);
                    return {show_ours(wlo, whi, unit), !text_pub && matches(wlo, whi, pub, tol)};
                };
                json readings = json::array();
                readings.push_back({{"label", as.at("ours")}, {"ours_text", judged(v).first},
                                    {"holds", verdict == "reproduced"}});
                bool any = false;
                for (auto& a : as.at("readings")) {
                    std::pair<std::string, bool> r;
                    try {  // a reading that cannot be computed is shown so; the claim keeps its own verdict
                        r = judged(eval_formula_check(check_as(check, a), a.value("params", json::object())));
                    } catch (const std::exception& e) {
                        r = {std::string("not computed: ") + e.what(), false};
                    }
                    any = any || r.second;
                    readings.push_back({{"label", a.at("label")}, {"ours_text", r.first}, {"holds", r.second}});
                }
                row["assumption"] = {{"open", as.at("open")}, {"readings", readings}};
                if (verdict == "differs" && any) {
                    verdict = "depends on an assumption";
                    recomputation.clear();
                    why = as.at("open").get<std::string>();
                }
            }
            if (verdict == "differs") {
                why = c.value("on_difference", "");
                classify(c, v, unit, row);
            }
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
    if (c.contains("cross")) row["cross"] = c["cross"];
    return {row, verdict};
}

void validate_claim(const json& c) {
    for (const char* k : {"id", "lever", "source", "statement", "published", "check"})
        if (!c.contains(k)) throw std::runtime_error("a claim lacks \"" + std::string(k) + "\": " + c.dump().substr(0, 120));
    const std::string id = c["id"];
    const json& src = c["source"];
    if (!src.contains("line") || !src["line"].is_number_unsigned() || src["line"].get<int>() < 1 ||
        !src.contains("quote") || !src["quote"].is_string())
        throw std::runtime_error("claim " + id + ": source needs \"line\" (a line number of the seed text, from 1) and "
                                 "\"quote\" (the number as the line writes it)");
    const json& pub = c["published"];
    if (!pub.contains("value") && !pub.contains("range")) throw std::runtime_error("claim " + id + ": published needs value or range");
    const std::string unit = pub.value("unit", "");
    if (!calc::find_unit(unit))
        throw std::runtime_error("claim " + id + ": unknown unit '" + unit + "'; known: " + join(calc::unit_names()));
    const std::string kind = c["check"].value("kind", "");
    if (kind != "formula" && kind != "cpu-experiment" && kind != "gpu-only" && kind != "open")
        throw std::runtime_error("claim " + id + ": check.kind '" + kind +
                                 "' is not one of: formula, cpu-experiment, gpu-only, open");
    if (kind == "open" && !(c["check"].contains("why") && c["check"]["why"].is_string() &&
                            c["check"].contains("would_check") && c["check"]["would_check"].is_string()))
        throw std::runtime_error("claim " + id + ": an open check needs \"why\" (what the seed leaves out) and "
                                 "\"would_check\" (the command or data that would check it)");
    for (auto& in : c.value("inputs", json::array()))
        if (!in.is_object() || !in.contains("file") || !in.contains("line") || !in["line"].is_number_unsigned() ||
            !in.contains("quote") || !in["quote"].is_string())
            throw std::runtime_error("claim " + id + ": every one of \"inputs\" needs \"file\", \"line\" and "
                                     "\"quote\" (the numbers of the seed its conditions come from)");
    if (c.contains("assumption")) {
        const json& a = c["assumption"];
        if (kind != "formula" || !a.is_object() || !a.contains("open") || !a["open"].is_string() ||
            !a.contains("ours") || !a["ours"].is_string() || !a.contains("readings") || !a["readings"].is_array() ||
            a["readings"].empty())
            throw std::runtime_error("claim " + id + ": \"assumption\" (formula claims only) needs \"open\" (what the "
                                     "seed leaves open), \"ours\" (the label of the check's own reading) and "
                                     "\"readings\" (each a \"label\" and a \"params\" patch)");
        const json& check = c["check"];
        for (auto& r : a["readings"]) {
            if (!r.is_object() || !r.contains("label") || !r["label"].is_string() || !r.contains("params") ||
                !r["params"].is_object())
                throw std::runtime_error("claim " + id + ": every assumption reading needs a \"label\" (text) and "
                                         "a \"params\" patch (an object)");
            // A swept input set without a sweep of its own would be overwritten by the sweep.
            if (check.contains("sweep") && !r.contains("sweep") &&
                r["params"].contains(check["sweep"].value("param", "")))
                throw std::runtime_error("claim " + id + ": the reading \"" + r["label"].get<std::string>() +
                                         "\" sets the swept input " + check["sweep"].value("param", "") +
                                         ": give it a \"sweep\" of its own, or null for none");
        }
    }
}

// ---- coverage: every numeric line of a seed text has a claim or a reason ----

// The seed texts: --seeds, else ../shared/seeds beside the repository that
// holds the claims file (experiments/claims.json -> <repo>/../shared/seeds).
fs::path find_seeds(const std::string& given, const fs::path& claims) {
    if (!given.empty()) {
        if (!fs::is_directory(given)) throw UsageError("--seeds '" + given + "' is not a folder");
        return given;
    }
    return fs::absolute(claims).parent_path().parent_path().parent_path() / "shared" / "seeds";
}

std::vector<std::string> read_lines(const fs::path& p) {
    std::ifstream f(p);
    std::vector<std::string> v;
    for (std::string l; std::getline(f, l);) v.push_back(l);
    return v;
}

// A quantitative statement, for coverage: a line with a digit in it.
bool is_numeric_line(const std::string& l) {
    return std::any_of(l.begin(), l.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// The numbers of a line, as [begin, end) spans: a run of digits (with
// thousands commas and one decimal point) not glued to a name before it
// ("H100", "FP16", "L2" are names; "70B", "8k", "3x" are numbers).
std::vector<std::pair<std::size_t, std::size_t>> numbers_in(const std::string& l) {
    auto digit = [&](std::size_t i) { return i < l.size() && l[i] >= '0' && l[i] <= '9'; };
    auto glued = [&](std::size_t i) {
        const unsigned char ch = static_cast<unsigned char>(l[i]);
        return std::isalnum(ch) || ch == '_' || ch == '.' || ch >= 0x80;
    };
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (std::size_t i = 0; i < l.size(); ++i) {
        if (!digit(i) || (i > 0 && glued(i - 1))) continue;
        std::size_t j = i;
        bool point = false;
        while (digit(j) || ((l[j] == ',' || (l[j] == '.' && !point)) && digit(j + 1) && digit(j - 1))) {
            point = point || l[j] == '.';
            ++j;
        }
        out.push_back({i, j});
        i = j;
    }
    return out;
}

// Every place a claim points into a seed text: its source, the lines its
// conditions come from ("inputs") and, for a cross-claim check, the lines its
// inputs come from.
std::vector<json> claim_sources(const json& c) {
    std::vector<json> v = {c["source"]};
    for (auto& f : c.value("inputs", json::array())) v.push_back(f);
    if (c.contains("cross"))
        for (auto& f : c["cross"].value("from", json::array())) v.push_back(f);
    return v;
}

// Why a number of a seed text carries no claim: one of these, and nothing
// else. A figure no claim checks is not skipped: it is an open claim
// ("not measurable here") that says what would check it.
const std::vector<std::string> kSkipKinds = {"code listing", "citation", "heading/numbering",
                                             "year", "format name", "quiz option restated"};

json coverage(const json& claims, const fs::path& claims_path, const fs::path& seeds) {
    json cov = {{"seeds", path_for_record(seeds.string())}};
    if (!fs::is_directory(seeds)) {
        cov["available"] = false;
        cov["why"] = "seed texts not found at " + path_for_record(seeds.string()) + "; pass --seeds DIR";
        return cov;
    }
    cov["available"] = true;
    std::map<std::string, std::vector<std::string>> text;
    for (auto& e : fs::directory_iterator(seeds))
        if (e.path().extension() == ".txt") text[e.path().filename().string()] = read_lines(e.path());
    std::map<std::string, std::set<int>> claimed, skipped;
    // A skip of some numbers of a line only ("tokens"): each listed number, as
    // written, skips one occurrence of it (in order, outside every quote).
    std::map<std::pair<std::string, int>, std::vector<std::pair<std::string, std::string>>> skipped_tokens;
    std::map<std::pair<std::string, int>, std::string> skipped_kind;  // a whole line's
    // Per line, the spans a claim quotes (as a claim's figure or a derived check's input).
    std::map<std::pair<std::string, int>, std::vector<std::pair<std::size_t, std::size_t>>> quoted;
    json misquoted = json::array();
    for (auto& c : claims)
        for (auto& src : claim_sources(c)) {
            const std::string file = src.value("file", "");
            const int line = src.value("line", 0);
            claimed[file].insert(line);
            const auto it = text.find(file);
            const std::string quote = src.value("quote", "");
            // A quote names one place: it occurs once on its line, or says
            // which occurrence ("occurrence", from 1) it means.
            std::vector<std::size_t> at;
            if (it != text.end() && line >= 1 && line <= static_cast<int>(it->second.size()) && !quote.empty())
                for (auto p = it->second[line - 1].find(quote); p != std::string::npos;
                     p = it->second[line - 1].find(quote, p + 1))
                    at.push_back(p);
            const int which = src.value("occurrence", 0);
            json bad = {{"id", c["id"]}, {"file", file}, {"line", line}, {"quote", quote}};
            const int n = static_cast<int>(at.size());
            if (n > 0 && (which == 0 ? n == 1 : which >= 1 && which <= n)) {
                const std::size_t a = at[which == 0 ? 0 : which - 1];
                quoted[{file, line}].push_back({a, a + quote.size()});
                continue;
            }
            if (n > 1 && which == 0)
                bad["why"] = "occurs " + std::to_string(n) + " times on its line; say which (\"occurrence\": 1.." +
                             std::to_string(n) + ") or quote more of it";
            else if (n > 0)
                bad["why"] = "occurrence " + std::to_string(which) + " of " + std::to_string(n);
            misquoted.push_back(bad);
        }
    const fs::path skips_path = claims_path.parent_path() / "coverage.json";
    const json skips = fs::exists(skips_path) ? read_json_file(skips_path) : json{{"skips", json::array()}};
    json skips_elsewhere = json::array();
    auto refuse = [](const std::string& why, const json& sk) {
        throw std::runtime_error("coverage.json: " + why + ": " + sk.dump().substr(0, 160));
    };
    for (auto& sk : skips.at("skips")) {
        const std::string kind = sk.value("kind", "");
        if (std::find(kSkipKinds.begin(), kSkipKinds.end(), kind) == kSkipKinds.end())
            refuse("skip kind '" + kind + "' is not one of: " + join(kSkipKinds) +
                       " (a figure no claim checks is an open claim, not a skip)",
                   sk);
        const std::string file = sk.value("file", "");
        if (!text.count(file)) {  // seeds elsewhere (--seeds), or a misspelt name: listed, not counted
            skips_elsewhere.push_back(sk);
            continue;
        }
        const int a = sk.contains("line") ? sk["line"].get<int>() : sk.value("from", 0);
        const int b = sk.contains("line") ? a : sk.value("to", 0);
        if (a < 1 || b < a || b > static_cast<int>(text[file].size()))
            refuse("lines " + std::to_string(a) + ".." + std::to_string(b) + " are not lines of " + file + " (1.." +
                       std::to_string(text[file].size()) + ")",
                   sk);
        if (sk.contains("tokens")) {
            if (!sk.contains("line")) refuse("\"tokens\" skip numbers of one \"line\"", sk);
            for (auto& t : sk["tokens"]) skipped_tokens[{file, a}].push_back({t.get<std::string>(), kind});
            continue;
        }
        // A line a claim quotes keeps its other numbers one by one: a whole
        // line skipped would hide a figure written beside the claimed one.
        for (int l = a; l <= b; ++l)
            if (claimed[file].count(l))
                refuse("line " + std::to_string(l) + " holds a claim's quote: skip its other numbers by \"tokens\"", sk);
        for (int l = a; l <= b; ++l) skipped[file].insert(l), skipped_kind[{file, l}] = kind;
    }
    int found = 0, covered = 0, skip = 0;
    int numbers = 0, in_quotes = 0, on_skipped = 0, unaccounted = 0;  // per number, not per line
    std::map<std::string, int> by_kind;
    // The numbers not yet accounted for, by file and line (compact: the report travels in the tree).
    json uncovered = json::array(), unaccounted_numbers = json::object();
    for (auto& [file, lines] : text)
        for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
            if (!is_numeric_line(lines[i])) continue;
            ++found;
            const bool is_claimed = claimed[file].count(i + 1), is_skipped = skipped[file].count(i + 1);
            auto tokens = skipped_tokens[{file, i + 1}];  // consumed one occurrence at a time
            if (is_claimed) ++covered;
            else if (is_skipped || !tokens.empty()) ++skip;
            else uncovered.push_back({{"file", file}, {"line", i + 1}, {"text", lines[i].substr(0, 100)}});
            for (auto [at, end] : numbers_in(lines[i])) {
                ++numbers;
                bool in_quote = false;
                for (auto [qa, qb] : quoted[{file, i + 1}]) in_quote = in_quote || (at >= qa && end <= qb);
                const std::string token = lines[i].substr(at, end - at);
                const auto t = in_quote ? tokens.end()
                                        : std::find_if(tokens.begin(), tokens.end(),
                                                       [&](const auto& tk) { return tk.first == token; });
                if (in_quote) ++in_quotes;
                else if (t != tokens.end()) ++on_skipped, ++by_kind[t->second], tokens.erase(t);
                else if (is_skipped) ++on_skipped, ++by_kind[skipped_kind[{file, i + 1}]];
                else {
                    ++unaccounted;
                    unaccounted_numbers[file][std::to_string(i + 1)].push_back(token);
                }
            }
            if (!tokens.empty())
                throw std::runtime_error("coverage.json: " + file + " line " + std::to_string(i + 1) + " skips '" +
                                         tokens.front().first +
                                         "', a number the line does not hold outside the claims' quotes (one listed "
                                         "token skips one occurrence)");
        }
    int open = 0;
    for (auto& c : claims) open += c["check"].value("kind", "") == "open";
    cov["numbers"] = {{"found", numbers},
                      {"in_claim_quotes_or_inputs", in_quotes},
                      {"skipped_with_a_reason", on_skipped},
                      {"skipped_by_kind", by_kind},
                      {"not_yet_accounted_for", unaccounted}};
    cov["unaccounted_numbers"] = unaccounted_numbers;
    cov["open_claims"] = open;
    cov["numeric_lines"] = found;
    cov["covered_by_claims"] = covered;
    cov["skipped_with_reason"] = skip;
    cov["uncovered"] = uncovered;
    cov["misquoted"] = misquoted;
    cov["skips_of_files_not_in_seeds"] = skips_elsewhere;
    return cov;
}

// ---- cross-claim consistency --------------------------------------------------

// Two kinds of link between claims: a derived check (a claim with "cross":
// its inputs come from other lines of the texts, its published value from
// its own line; a "differs" is an inconsistency between them), and shared
// quantities ("quantities": {"h100.hbm_tbs": 3.35}): every claim that names
// the same quantity must use the same value.
json cross_checks(const json& rows, const json& claims) {
    json found = json::array(), open = json::array();
    int derived = 0, pairs = 0;
    for (auto& r : rows) {
        if (!r.contains("cross")) continue;
        ++derived;
        // Consistent under one reading of an input the text leaves open, not under ours.
        if (r["verdict"] == "depends on an assumption")
            open.push_back({{"id", r["id"]}, {"stated", r["source"]}, {"from", r["cross"].value("from", json::array())},
                            {"open", r.value("explanation", "")}});
        if (r["verdict"] != "differs") continue;
        found.push_back({{"kind", "derived"}, {"id", r["id"]}, {"severity", r.value("severity", "")},
                         {"stated", r["source"]}, {"from", r["cross"].value("from", json::array())},
                         {"recomputation", r.value("recomputation", "")}, {"why", r.value("explanation", "")}});
    }
    std::map<std::string, std::vector<const json*>> by_key;
    for (auto& c : claims) {
        if (!c.contains("quantities")) continue;
        for (auto& [k, v] : c["quantities"].items()) by_key[k].push_back(&c);
    }
    for (auto& [k, cs] : by_key)
        for (std::size_t i = 0; i < cs.size(); ++i)
            for (std::size_t j = i + 1; j < cs.size(); ++j) {
                ++pairs;
                const double a = (*cs[i])["quantities"][k].get<double>(), b = (*cs[j])["quantities"][k].get<double>();
                if (std::abs(a - b) <= 0.01 * std::max(std::abs(a), std::abs(b))) continue;
                bool seen = false;  // one report per pair of distinct values
                for (auto& f : found)
                    seen = seen || (f["kind"] == "shared" && f["quantity"] == k &&
                                    ((f["a"]["value"] == a && f["b"]["value"] == b) || (f["a"]["value"] == b && f["b"]["value"] == a)));
                if (seen) continue;
                auto side = [&](const json& c, double v) {
                    return json{{"id", c["id"]}, {"value", v}, {"file", c["source"]["file"]}, {"line", c["source"]["line"]},
                                {"quote", c["source"]["quote"]}};
                };
                found.push_back({{"kind", "shared"}, {"quantity", k}, {"a", side(*cs[i], a)}, {"b", side(*cs[j], b)},
                                 {"factor", a / b}});
            }
    return {{"derived_checks", derived}, {"shared_pairs", pairs}, {"examined", derived + pairs},
            {"inconsistencies", found}, {"depend_on_an_assumption", open}};
}

// The ids closest to a mistyped one: those containing it, then by edit distance.
std::vector<std::string> closest_ids(const std::string& want, const std::vector<std::string>& ids, std::size_t n = 5) {
    auto dist = [](const std::string& a, const std::string& b) {
        std::vector<std::size_t> row(b.size() + 1);
        for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
        for (std::size_t i = 1; i <= a.size(); ++i) {
            std::size_t prev = row[0];
            row[0] = i;
            for (std::size_t j = 1; j <= b.size(); ++j) {
                const std::size_t cur = row[j];
                row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
                prev = cur;
            }
        }
        return row[b.size()];
    };
    std::vector<std::pair<std::size_t, std::string>> scored;
    for (auto& id : ids) scored.push_back({id.find(want) != std::string::npos ? 0 : 1 + dist(want, id), id});
    std::sort(scored.begin(), scored.end());
    std::vector<std::string> v;
    for (std::size_t i = 0; i < std::min(n, scored.size()); ++i) v.push_back(scored[i].second);
    return v;
}

// +0.08%, -12.5%: a relative gap as a reader scans it.
std::string signed_percent(double f) {
    const double p = 100 * f;
    if (std::abs(p) < 5e-7) return "0%";  // exact up to rounding (1 - 1e-16 is no gap)
    return (p >= 0 ? "+" : "") + calc::fmt(p, 3) + "%";
}

std::string md_escape(std::string s) {
    std::string o;
    for (char ch : s) o += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return o;
}

// The closing note: verdicts, severities, cross-claim checks, coverage.
std::string summary_text(const json& doc) {
    std::ostringstream m;
    m << "Claims: " << doc["claims"].size() << " (";
    bool first = true;
    for (auto& [k, v] : doc["counts"].items()) m << (first ? "" : ", ") << k << " " << v.get<int>(), first = false;
    m << ").";
    if (!doc["severity_counts"].empty()) {
        m << " Differs by severity:";
        first = true;
        for (const char* k : {"wrong conclusion", "error", "rounding"})
            if (doc["severity_counts"].contains(k))
                m << (first ? " " : ", ") << k << " " << doc["severity_counts"][k].get<int>(), first = false;
        m << ".";
    }
    const json& x = doc["cross_claim"];
    m << " Cross-claim checks: " << x["examined"].get<int>() << " examined (" << x["derived_checks"].get<int>()
      << " derived, " << x["shared_pairs"].get<int>() << " shared-quantity pairs), " << x["inconsistencies"].size()
      << " inconsistencies";
    if (x.contains("depend_on_an_assumption") && !x["depend_on_an_assumption"].empty())
        m << ", " << x["depend_on_an_assumption"].size() << " consistent only under an assumption";
    m << ".";
    const json& cov = doc["coverage"];
    if (cov.value("available", false)) {
        const json& n = cov["numbers"];
        m << " Seed statements (numeric lines): " << cov["numeric_lines"].get<int>() << " found, "
          << cov["covered_by_claims"].get<int>() << " covered by claims, " << cov["skipped_with_reason"].get<int>()
          << " skipped with a reason, " << cov["uncovered"].size() << " uncovered; " << cov["misquoted"].size()
          << " quotes name no single place on their line (absent, or repeated without its occurrence). Seed numbers: " << n["found"].get<int>() << " found, "
          << n["in_claim_quotes_or_inputs"].get<int>() << " in a claim's quote or inputs, " << n["skipped_with_a_reason"].get<int>()
          << " skipped (";
        bool first_kind = true;
        for (auto& [k, v] : n["skipped_by_kind"].items())
            m << (first_kind ? "" : ", ") << k << " " << v.get<int>(), first_kind = false;
        m << "), " << n["not_yet_accounted_for"].get<int>()
          << " on claimed lines in no quote (not yet accounted for one by one); " << cov["open_claims"].get<int>()
          << (cov["open_claims"].get<int>() == 1 ? " open claim" : " open claims") << " not measurable here.";
    } else {
        m << " Coverage not counted: " << cov.value("why", "") << ".";
    }
    return m.str();
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
          << (r.contains("relative_gap") ? " (" + signed_percent(r["relative_gap"].get<double>()) + ")" : "") << " |\n";
    auto where = [](const json& src) {
        return src.value("file", "") + ":" + std::to_string(src.value("line", 0)) + " \"" + src.value("quote", "") + "\"";
    };
    auto section = [&](const std::string& verdict, const std::string& title) {
        bool any = false;
        std::vector<const json*> rs;
        for (auto& r : doc["claims"])
            if (r["verdict"] == verdict) rs.push_back(&r);
        // Worst first: wrong conclusions, then errors by the size of the factor, then rounding.
        std::stable_sort(rs.begin(), rs.end(), [](const json* a, const json* b) {
            if (severity_rank(*a) != severity_rank(*b)) return severity_rank(*a) < severity_rank(*b);
            return std::abs(std::log(a->value("factor", 1.0))) > std::abs(std::log(b->value("factor", 1.0)));
        });
        for (const json* rp : rs) {
            const json& r = *rp;
            if (!any) m << "\n## " << title << "\n\n";
            any = true;
            const json& src = r["source"];
            m << "- **" << r["id"].get<std::string>() << "** (" << where(src) << ", " << src.value("section", "")
              << "): " << r["statement"].get<std::string>() << "\n";
            if (r.contains("severity"))
                m << "  - severity: **" << r["severity"].get<std::string>() << "**"
                  << (r.contains("severity_note") ? " (" + r["severity_note"].get<std::string>() + ")" : "") << "\n";
            if (r.contains("cross"))
                for (auto& f : r["cross"].value("from", json::array())) m << "  - inputs from " << where(f) << "\n";
            if (r.contains("gpu")) m << "  - measured on " << r["gpu"].get<std::string>() << "\n";
            if (r.contains("recomputation")) m << "  - recomputation: " << r["recomputation"].get<std::string>() << "\n";
            if (r.contains("explanation")) m << "  - why: " << r["explanation"].get<std::string>() << "\n";
            for (auto& a : r.value("alternatives", json::array()))
                m << "  - " << a["label"].get<std::string>() << ": " << a["ours_text"].get<std::string>() << "\n";
            if (r.contains("assumption"))
                for (auto& a : r["assumption"]["readings"])
                    m << "  - " << (a["holds"].get<bool>() ? "follows" : "does not follow") << " " << a["label"].get<std::string>()
                      << ": " << a["ours_text"].get<std::string>() << "\n";
        }
    };
    section("depends on an assumption", "Depends on an assumption: the seed's figure follows under one reading of an "
                                        "input it leaves open, not under another");
    section("differs", "Differs: the recomputation, worst first");
    section("needs a GPU", "Needs a GPU");
    section("not measurable here", "Not measurable here: figures the seed states without what checking them takes");
    section("not run", "CPU experiments not run");
    section("error", "Errors");
    const json& x = doc["cross_claim"];
    if (!x["inconsistencies"].empty()) {
        m << "\n## Cross-claim inconsistencies\n\n";
        for (auto& f : x["inconsistencies"]) {
            if (f["kind"] == "shared") {
                m << "- **" << f["quantity"].get<std::string>() << "**: " << calc::fmt(f["a"]["value"].get<double>()) << " at "
                  << where(f["a"]) << " (" << f["a"]["id"].get<std::string>() << ") but " << calc::fmt(f["b"]["value"].get<double>())
                  << " at " << where(f["b"]) << " (" << f["b"]["id"].get<std::string>() << ")\n";
                continue;
            }
            m << "- **" << f["id"].get<std::string>() << "** (" << f["severity"].get<std::string>() << "): stated at "
              << where(f["stated"]) << "; recomputed from";
            for (auto& s2 : f["from"]) m << " " << where(s2) << ";";
            m << " " << f["recomputation"].get<std::string>() << "\n";
        }
    }
    if (x.contains("depend_on_an_assumption") && !x["depend_on_an_assumption"].empty()) {
        m << "\n## Cross-claim checks consistent only under an assumption\n\n";
        for (auto& f : x["depend_on_an_assumption"]) {
            m << "- **" << f["id"].get<std::string>() << "**: stated at " << where(f["stated"]) << "; from";
            for (auto& s2 : f["from"]) m << " " << where(s2) << ";";
            m << " open: " << f["open"].get<std::string>() << "\n";
        }
    }
    const json& cov = doc["coverage"];
    if (cov.value("available", false) && (!cov["uncovered"].empty() || !cov["misquoted"].empty())) {
        m << "\n## Coverage gaps\n\n";
        for (auto& u : cov["uncovered"])
            m << "- no claim and no reason: " << u["file"].get<std::string>() << ":" << u["line"].get<int>() << " "
              << md_escape(u["text"]) << "\n";
        for (auto& u : cov["misquoted"])
            m << "- claim " << u["id"].get<std::string>() << ": \"" << u["quote"].get<std::string>() << "\" "
              << u.value("why", "is not") << " on " << u["file"].get<std::string>() << ":" << u["line"].get<int>() << "\n";
    }
    bool notes = false;
    for (auto& r : doc["claims"]) {
        if (r["verdict"] != "reproduced" || (!r.contains("note") && !r.contains("alternatives") && !r.contains("assumption")))
            continue;
        if (!notes) m << "\n## Notes on reproduced claims\n\n";
        notes = true;
        m << "- **" << r["id"].get<std::string>() << "**:";
        if (r.contains("note")) m << " " << r["note"].get<std::string>();
        for (auto& a : r.value("alternatives", json::array()))
            m << " " << a["label"].get<std::string>() << ": " << a["ours_text"].get<std::string>() << ".";
        if (r.contains("assumption"))
            for (auto& a : r["assumption"]["readings"])
                m << " " << a["label"].get<std::string>() << ": " << a["ours_text"].get<std::string>()
                  << (a["holds"].get<bool>() ? "" : " (does not follow)") << ".";
        m << "\n";
    }
    m << "\n## Summary\n\n" << summary_text(doc) << "\n";
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
        throw UsageError("unknown claim '" + o.claim + "'; closest: " + join(closest_ids(o.claim, ids)) +
                         " (all " + std::to_string(ids.size()) + ": memwall reproduce --format json)");
    const std::vector<std::string> kinds = {"formula", "cpu-experiment", "gpu-only", "open"};
    if (!o.kind.empty() && std::find(kinds.begin(), kinds.end(), o.kind) == kinds.end())
        throw UsageError("unknown --kind '" + o.kind + "'; valid: " + join(kinds));
    const fs::path seeds = find_seeds(o.seeds_dir, path);

    json rows = json::array(), chosen = json::array();
    std::map<std::string, int> counts, severities;
    for (auto& c : file["claims"]) {
        if (!lever.empty() && c["lever"] != lever) continue;
        if (!o.claim.empty() && c["id"] != o.claim) continue;
        if (!o.kind.empty() && c["check"].value("kind", "") != o.kind) continue;
        Judged j = judge(c, o.run_experiments);
        counts[j.verdict]++;
        if (j.row.contains("severity")) severities[j.row["severity"].get<std::string>()]++;
        rows.push_back(j.row);
        chosen.push_back(c);
    }
    json doc = {{"schema", "memwall.claims-report/1"},
                {"claims_file", path_for_record(path.string())},
                {"claims_schema", file.value("schema", "")},
                {"command", command},
                {"run_experiments", o.run_experiments},
                {"counts", counts},
                {"severity_counts", severities},
                {"claims", rows}};
    doc["cross_claim"] = cross_checks(rows, chosen);
    // Coverage is a property of the whole file: counted only when no filter is given.
    doc["coverage"] = lever.empty() && o.claim.empty() && o.kind.empty()
                          ? coverage(file["claims"], path, seeds)
                          : json{{"available", false}, {"why", "a --lever, --claim or --kind filter is set"}};
    doc["summary"] = summary_text(doc);
    if (o.run_experiments) doc["machine"] = machine_info();
    const std::string md = markdown(doc);
    if (o.format == "json") std::cout << doc.dump(2) << "\n";
    else std::cout << md;
    if (!o.out.empty()) {
        write_file_atomic(o.out, doc.dump(1) + "\n");  // one space a level: the report travels in the tree
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
    sub->add_option("--kind", o->kind,
                    "Only claims checked this way: formula, cpu-experiment, gpu-only (the GPU kit runs these) "
                    "or open");
    sub->add_option("--out", o->out, "Write the report as JSON here and markdown beside it");
    sub->add_option("--format", o->format, "md or json (standard output)")->default_val("md");
    sub->add_option("--claims", o->claims_path, "Claims file (default: experiments/claims.json)");
    sub->add_option("--seeds", o->seeds_dir, "Folder of the seed texts (default: ../shared/seeds beside the repository)");
    sub->add_flag("--run-experiments", o->run_experiments,
                  "Also run the CPU-experiment claims (slow), and on a machine with a GPU the GPU claims");
    return [o, sub] {
        std::string cmd = "memwall reproduce";
        if (!o->lever.empty()) cmd += " --lever " + o->lever;
        if (!o->claim.empty()) cmd += " --claim " + o->claim;
        if (!o->kind.empty()) cmd += " --kind " + o->kind;
        if (o->run_experiments) cmd += " --run-experiments";
        if (!o->out.empty()) cmd += " --out " + path_for_record(o->out);
        (void)sub;
        return run_reproduce(*o, cmd);
    };
});

}  // namespace mw
