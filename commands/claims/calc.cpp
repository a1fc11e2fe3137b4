// `memwall calc <formula> [--param value]...`: the seed texts' napkin math,
// evaluated with stated inputs, the formula in words, and units on every
// number (bytes in decimal and binary units side by side).
//
//   memwall calc --list
//   memwall calc kv_cache --layers 32 --kv_heads 8 --head_dim 128 --tokens 8000
//   memwall calc ridge --gpu H100 --dtype fp8 --json
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands/claims/formulas.hpp"
#include "harness/command.hpp"
#include "harness/strings.hpp"

namespace mw {

namespace {

struct CalcOptions {
    std::string formula;
    bool list = false;
    bool json = false;
    std::vector<std::string> extras;
};

// "--name value" or "--name=value" pairs, in order.
std::map<std::string, std::string> parse_pairs(const std::vector<std::string>& args) {
    std::map<std::string, std::string> raw;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a.rfind("--", 0) != 0 || a.size() < 3)
            throw UsageError("unexpected argument '" + a + "'; parameters are given as --name value");
        std::string name = a.substr(2), value;
        if (auto eq = name.find('='); eq != std::string::npos) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
        } else {
            if (i + 1 >= args.size()) throw UsageError("parameter --" + name + " has no value");
            value = args[++i];
        }
        if (raw.count(name)) throw UsageError("parameter --" + name + " given twice");
        raw[name] = value;
    }
    return raw;
}

int list_formulas(bool as_json) {
    nlohmann::json j = nlohmann::json::array();
    for (auto& f : calc::formulas()) {
        nlohmann::json ps = nlohmann::json::array();
        for (auto& p : f.params) {
            nlohmann::json e = {{"name", p.name}, {"unit", p.unit}, {"help", p.help}, {"required", p.required}};
            if (p.def) e["default"] = *p.def;
            if (!p.choices.empty()) e["choices"] = p.choices;
            ps.push_back(e);
        }
        j.push_back({{"formula", f.name}, {"summary", f.summary}, {"words", f.words}, {"params", ps}});
        if (as_json) continue;
        std::printf("%s: %s\n    %s\n", f.name.c_str(), f.summary.c_str(), f.words.c_str());
        for (auto& p : f.params) {
            std::string d = p.required ? "required" : p.def ? "default " + calc::fmt(*p.def) : "optional";
            if (!p.choices.empty()) d += "; one of " + join(p.choices);
            std::printf("      --%-16s %-10s %s (%s)\n", p.name.c_str(), p.unit.c_str(), p.help.c_str(), d.c_str());
        }
    }
    if (as_json) std::cout << j.dump(2) << "\n";
    return 0;
}

int run_calc(const CalcOptions& o) {
    if (o.list) return list_formulas(o.json);
    if (o.formula.empty())
        throw UsageError("name a formula; valid formulas: " + join(calc::formula_names()) + " (memwall calc --list)");
    const calc::Formula* f = calc::find_formula(o.formula);
    if (!f) throw UsageError("unknown formula '" + o.formula + "'; valid formulas: " + join(calc::formula_names()));
    const auto raw = parse_pairs(o.extras);
    const calc::Params p = calc::resolve_params(*f, raw);
    const auto outs = calc::evaluate(*f, p);

    if (o.json) {
        nlohmann::json in = nlohmann::json::object();
        for (auto& [k, v] : p.num) in[k] = v;
        for (auto& [k, v] : p.str) in[k] = v;
        nlohmann::json res = nlohmann::json::object();
        for (auto& x : outs) {
            if (x.dim == "text") res[x.name] = {{"value", x.text}, {"unit", "text"}, {"words", x.words}};
            else res[x.name] = {{"value", x.value}, {"unit", x.dim}, {"words", x.words}};
        }
        std::cout << nlohmann::json{{"formula", f->name}, {"words", f->words}, {"inputs", in}, {"outputs", res}}.dump(2)
                  << "\n";
        return 0;
    }
    std::printf("%s: %s\n  formula: %s\n  inputs:\n", f->name.c_str(), f->summary.c_str(), f->words.c_str());
    for (auto& s : f->params) {
        if (p.num.count(s.name)) {
            const bool given = raw.count(s.name);
            std::printf("    %-18s %s %s%s\n", s.name.c_str(), calc::fmt(p.num.at(s.name), 10).c_str(),
                        s.unit.c_str(), given ? "" : "  (default)");
        } else if (p.str.count(s.name)) {
            std::printf("    %-18s %s\n", s.name.c_str(), p.str.at(s.name).c_str());
        }
    }
    std::printf("  results:\n");
    for (auto& x : outs)
        std::printf("    %-28s %-40s %s\n", x.name.c_str(), calc::pretty(x).c_str(), x.words.c_str());
    return 0;
}

}  // namespace

MW_REGISTER_COMMAND(calc, [](CLI::App& app) -> CommandAction {
    auto* sub = app.add_subcommand("calc", "Evaluate a napkin-math formula (roofline, intensity, KV cache, ...) with units");
    auto o = std::make_shared<CalcOptions>();
    sub->add_option("formula", o->formula, "Formula name (see --list)");
    sub->add_flag("--list", o->list, "List formulas with their parameters and units");
    sub->add_flag("--json", o->json, "Machine-readable output");
    sub->allow_extras();
    sub->footer("Parameters: --name value (see memwall calc --list). Exit 2 on an unknown formula or parameter, "
                "a bad value, or a missing required parameter.");
    return [o, sub] {
        o->extras = sub->remaining();
        return run_calc(*o);
    };
});

}  // namespace mw
