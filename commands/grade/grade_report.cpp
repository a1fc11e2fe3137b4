// The reports of `memwall grade`, all made from its JSON document: a text
// report for people, and Gradescope's results.json
// ({"score", "output", "tests": [{"name", "score", "max_score", "status",
// "output", "visibility"}]}).
#include <cmath>
#include <cstdio>
#include <sstream>

#include "commands/grade/grade.hpp"
#include "harness/strings.hpp"

namespace mw::grade {

using nlohmann::json;

namespace {

std::string points(double v) { return fmt("%.1f", v); }

std::string seed_line(const json& doc) {
    const auto& s = doc["seed"];
    const std::string kind = s.value("kind", "");
    if (kind == "secret") return "secret (the instructor's, with a nonce of this grade's: inputs no other grade sees)";
    const std::string v = std::to_string(s.value("value", std::uint64_t{0}));
    if (kind == "random") return v + " (random; reproduce with --seed " + v + ")";
    return v + " (public practice seed)";
}

std::string indent(const std::string& text, const std::string& pad) {
    std::string out;
    std::stringstream ss(text);
    for (std::string line; std::getline(ss, line);) out += pad + line + "\n";
    return out;
}

std::string summary(const json& doc) {
    return "score " + points(doc["score"].get<double>()) + " / " + points(doc["max_score"].get<double>());
}

}  // namespace

std::string report_text(const json& doc) {
    std::string r;
    if (doc.contains("sandbox") && !doc["sandbox"].value("enabled", true))
        r += "NOT SANDBOXED: graded with --unsafe-no-sandbox, for local practice only; not a grade to trust\n";
    r += "memwall grade: level " + doc.value("level", "") + ", exercise " + doc.value("exercise", "") +
                    ", backend " + doc.value("backend", "") + "\n";
    r += "submission: " + doc.value("submission", "") + "\n";
    r += "seed: " + seed_line(doc) + "\n";
    r += "threads: " + std::to_string(doc.value("threads", 0));
    if (doc.contains("cpus")) {
        r += " (on CPUs " + doc.value("cpus", "") + ", the submission and the reference alike";
        if (doc.contains("cpu_busy") && doc["cpu_busy"].is_object()) {
            std::string loads;
            for (auto& [cpu, load] : doc["cpu_busy"].items())
                loads += (loads.empty() ? "" : ", ") + cpu + " " + std::to_string(std::lround(load.get<double>() * 100)) + "%";
            r += "; the least busy when timing began: " + loads;
        }
        r += ")";
    }
    r += "\n";
    if (doc.contains("cpu_confinement")) r += "cores: pinned with " + doc.value("cpu_confinement", "") + "\n";
    if (doc.contains("sandbox")) r += "sandbox: " + doc["sandbox"].value("description", "") + "\n";
    r += "\n";
    for (auto& t : doc["tests"]) {
        const bool graded = t["max_score"].get<double>() > 0;
        const std::string mark = t["passed"].get<bool>() ? "PASS" : (graded ? "FAIL" : "----");
        char head[160];
        std::snprintf(head, sizeof head, "%s  %-34s %6s / %s\n", mark.c_str(), t.value("name", "").c_str(),
                      points(t["score"].get<double>()).c_str(), points(t["max_score"].get<double>()).c_str());
        r += head;
        r += indent(t.value("output", ""), "      ");
    }
    for (auto& n : doc.value("notes", json::array())) r += "\nnote: " + n.get<std::string>() + "\n";
    r += "\n" + summary(doc) + "\n";
    return r;
}

json report_gradescope(const json& doc) {
    json tests = json::array();
    int number = 1;
    for (auto& t : doc["tests"]) {
        tests.push_back({{"name", t.value("name", "")},
                         {"number", std::to_string(number++)},
                         {"score", t["score"]},
                         {"max_score", t["max_score"]},
                         {"status", t["passed"].get<bool>() ? "passed" : "failed"},
                         {"output", t.value("output", "")},
                         {"visibility", "visible"}});
    }
    std::string out;
    if (doc.contains("sandbox") && !doc["sandbox"].value("enabled", true))
        out += "NOT SANDBOXED: graded with --unsafe-no-sandbox, for local practice only; not a grade to trust\n";
    out += "memwall grade: level " + doc.value("level", "") + ", exercise " +
                      doc.value("exercise", "") + ", backend " + doc.value("backend", "") + "; seed " +
                      seed_line(doc) + "; " + summary(doc);
    for (auto& n : doc.value("notes", json::array())) out += "\nnote: " + n.get<std::string>();
    return {{"score", doc["score"]}, {"max_score", doc["max_score"]}, {"output", out}, {"tests", tests}};
}

}  // namespace mw::grade
