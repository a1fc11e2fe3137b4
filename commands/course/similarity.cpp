// `memwall course similarity`: every pair of submissions, and every
// submission against the level's solutions and rungs, compared by winnowed
// fingerprints (fingerprint.hpp); the copies by the kit's rule first, each
// with the line regions the two files share, side by side.
#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands/course/course.hpp"
#include "commands/grade/sanitize.hpp"
#include "harness/command.hpp"
#include "harness/results.hpp"

namespace mw::course {

namespace fs = std::filesystem;

namespace {

bool is_source(const fs::path& p) {
    static const std::vector<std::string> ext = {".cpp", ".cu", ".cc", ".c", ".hpp", ".h", ".cuh"};
    return std::find(ext.begin(), ext.end(), p.extension().string()) != ext.end();
}

std::string read_prefix(const fs::path& p) {
    try {
        return read_source(p);
    } catch (const std::runtime_error&) {
        throw UsageError("course similarity: cannot read '" + p.string() + "'");
    }
}

std::vector<fs::path> gather(const std::vector<std::string>& inputs) {
    std::vector<fs::path> files;
    for (const std::string& in : inputs) {
        const fs::path p = in;
        if (fs::is_directory(p)) {
            std::vector<fs::path> here;
            for (auto& e : fs::directory_iterator(p))
                if (e.is_regular_file() && is_source(e.path())) here.push_back(e.path());
            std::sort(here.begin(), here.end());
            files.insert(files.end(), here.begin(), here.end());
        } else if (fs::is_regular_file(p)) {
            files.push_back(p);
        } else {
            throw UsageError("course similarity: '" + in + "' is neither a source file nor a folder");
        }
    }
    if (files.empty())
        throw UsageError("course similarity: no source files (.cpp .cu .cc .c .hpp .h .cuh) in the inputs");
    return files;
}

nlohmann::json pair_json(const std::string& a, const std::string& b, const std::string& kind, const Match& m) {
    return {{"a", a}, {"b", b}, {"kind", kind}, {"shared", m.shared}, {"a_in_b", m.a_in_b}, {"b_in_a", m.b_in_a},
            {"score", m.score()}, {"copy", is_copy(m)}, {"regions", regions_json(m)}};
}

std::string fixed2(double x) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(2) << x;
    return s.str();
}

std::string text_report(const nlohmann::json& doc) {
    std::ostringstream r;
    const auto& pairs = doc["pairs"];
    const auto copies = std::count_if(pairs.begin(), pairs.end(), [](auto& p) { return p["copy"].template get<bool>(); });
    r << "memwall course similarity: " << doc["files"].size() << " submissions";
    if (doc.contains("level")) r << ", level " << doc["level"].get<std::string>() << " (" << doc["secrets"].size()
                                 << " solution and rung sources compared, its stubs discounted)";
    r << "\nrule: a copy shares >= " << doc["rule"]["min_shared"].get<int>() << " fingerprints and has >= "
      << fixed2(doc["rule"]["min_score"].get<double>()) << " of one file in the other (k = " << doc["rule"]["k"].get<int>()
      << " tokens, window " << doc["rule"]["w"].get<int>() << ")\n\n";
    r << (copies ? std::to_string(copies) + " copies:\n" : std::string("no copies.\n"));
    int shown = 0;
    for (const auto& p : pairs) {
        const bool copy = p["copy"].get<bool>();
        if (!copy && shown == 0) r << "\nmost similar of the rest:\n";
        if (!copy && ++shown > 5) break;
        r << "  " << fixed2(p["score"].get<double>()) << "  " << p["a"].get<std::string>() << "  ~  "
          << p["b"].get<std::string>() << (p["kind"] == "project" ? " (the project's)" : "") << "  ("
          << p["shared"].get<int>() << " fingerprints; " << fixed2(p["a_in_b"].get<double>()) << " of the first in the second, "
          << fixed2(p["b_in_a"].get<double>()) << " the other way)\n";
        if (!copy) continue;
        for (const auto& g : p["regions"]) {
            if (g["fingerprints"].get<int>() < 2) continue;
            r << "      lines " << g["a_lines"][0].get<int>() << "-" << g["a_lines"][1].get<int>() << "  ~  lines "
              << g["b_lines"][0].get<int>() << "-" << g["b_lines"][1].get<int>() << "\n";
        }
    }
    return r.str();
}

}  // namespace

std::string read_source(const fs::path& p, std::size_t limit) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + p.string());
    std::string s;
    char buf[1 << 16];
    while (s.size() < limit) {
        in.read(buf, static_cast<std::streamsize>(std::min(sizeof buf, limit - s.size())));
        if (in.gcount() <= 0) break;
        s.append(buf, static_cast<std::size_t>(in.gcount()));
    }
    return s;
}

nlohmann::json regions_json(const Match& m) {
    nlohmann::json regions = nlohmann::json::array();
    for (const Region& r : m.regions)
        regions.push_back({{"a_lines", {r.a_first, r.a_last}}, {"b_lines", {r.b_first, r.b_last}}, {"fingerprints", r.prints}});
    return regions;
}

int run_similarity(const SimilarityOptions& o) {
    if (o.format != "text" && o.format != "json")
        throw UsageError("course similarity: --format '" + o.format + "': choose text or json");
    if (!o.out.empty()) check_output_path(o.out, "--out", o.format == "json" ? ".json" : ".txt");
    const std::vector<fs::path> files = gather(o.inputs);
    std::vector<Document> docs;
    for (const fs::path& f : files) docs.push_back(Document::of(grade::printable(f.string()), read_prefix(f)));
    Base base;
    std::vector<Secret> secrets;
    if (!o.level.empty()) {
        base = level_base(o.level);
        secrets = level_secrets(o.level);
    }
    nlohmann::json pairs = nlohmann::json::array();
    for (std::size_t i = 0; i < docs.size(); ++i) {
        for (std::size_t j = i + 1; j < docs.size(); ++j)
            if (const Match m = compare(docs[i], docs[j], base); m.shared > 0)
                pairs.push_back(pair_json(docs[i].name, docs[j].name, "submission", m));
        for (const Secret& s : secrets)
            if (const Match m = compare(docs[i], s.doc, base); m.shared > 0)
                pairs.push_back(pair_json(docs[i].name, s.path, "project", m));
    }
    std::stable_sort(pairs.begin(), pairs.end(), [](const nlohmann::json& x, const nlohmann::json& y) {
        if (x["copy"] != y["copy"]) return x["copy"].get<bool>();
        return x["score"].get<double>() > y["score"].get<double>();
    });
    const Winnow p;
    const CopyRule rule;
    nlohmann::json doc = {{"schema", "memwall.similarity/1"},
                          {"rule", {{"k", p.k}, {"w", p.w}, {"min_score", rule.min_score}, {"min_shared", rule.min_shared}}},
                          {"files", nlohmann::json::array()}, {"pairs", pairs}};
    for (const Document& d : docs) doc["files"].push_back(d.name);
    if (!o.level.empty()) {
        doc["level"] = o.level;
        doc["secrets"] = nlohmann::json::array();
        for (const Secret& s : secrets) doc["secrets"].push_back(s.path);
    }
    const std::string text = o.format == "json" ? doc.dump(2) + "\n" : text_report(doc);
    if (o.out.empty())
        std::cout << text;
    else
        write_file_atomic(o.out, text);
    return 0;
}

}  // namespace mw::course
