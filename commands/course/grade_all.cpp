// `memwall course grade-all LEVEL DIR --out OUT`: every submission in DIR
// graded by `memwall grade` in its sandbox, one at a time, each report kept
// in OUT/grades/ as it finishes (written atomically by the grader, so a kill
// or Ctrl-C loses only the grade in flight, and a second run grades only
// what has no report for the same bytes); then the class's table
// (OUT/scores.csv, OUT/summary.json), the copies among the submissions and
// of the project's own answers, and a page (OUT/index.html) with the score
// distribution, a leaderboard by speed among fully correct submissions and
// each copy's shared regions side by side.
#include <openssl/evp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands/course/course.hpp"
#include "commands/grade/grade.hpp"
#include "commands/grade/sanitize.hpp"
#include "harness/command.hpp"
#include "harness/results.hpp"
#include "harness/strings.hpp"

namespace mw::course {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool is_source(const fs::path& p) {
    static const std::vector<std::string> ext = {".cpp", ".cu", ".cc"};
    return std::find(ext.begin(), ext.end(), p.extension().string()) != ext.end();
}

// A file's first bytes, or "" when it cannot be read (a stamp not yet written).
std::string read_prefix(const fs::path& p, std::size_t limit = kMaxSourceBytes) {
    try {
        return read_source(p, limit);
    } catch (const std::runtime_error&) {
        return "";
    }
}

std::string sha256_hex(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
    char buf[1 << 16];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) EVP_DigestUpdate(ctx, buf, static_cast<std::size_t>(in.gcount()));
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx, md, &n);
    EVP_MD_CTX_free(ctx);
    std::string hex;
    for (unsigned i = 0; i < n; ++i) hex += fmt("%02x", md[i]);
    return hex;
}

// A submission's name in reports and file names: letters, digits, '.', '-'
// and '_' only (a student may name a file anything).
std::string safe_id(const std::string& name) {
    std::string id;
    for (unsigned char c : name)
        id += std::isalnum(c) || c == '.' || c == '-' || c == '_' ? static_cast<char>(c) : '_';
    if (id.empty() || id[0] == '.') id = "_" + id;
    return id.substr(0, 96);
}

struct Submission {
    std::string id;
    fs::path file;     // empty: the folder held no source file
    std::string note;  // why there is no grade, when there is none
};

// DIR's entries, sorted: a source file is one submission; a folder is one
// student's (a course platform's export), graded on its first source file.
std::vector<Submission> gather(const fs::path& dir) {
    std::vector<fs::path> entries;
    for (auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
    std::sort(entries.begin(), entries.end());
    std::vector<Submission> out;
    std::map<std::string, int> used;
    for (const fs::path& p : entries) {
        Submission s;
        if (fs::is_regular_file(fs::symlink_status(p)) && is_source(p)) {
            s.file = p;
        } else if (fs::is_directory(fs::symlink_status(p))) {
            std::vector<fs::path> inside;
            for (auto& e : fs::directory_iterator(p))
                if (fs::is_regular_file(fs::symlink_status(e.path())) && is_source(e.path())) inside.push_back(e.path());
            std::sort(inside.begin(), inside.end());
            if (inside.empty()) s.note = "no .cpp, .cu or .cc file in the folder";
            else s.file = inside.front();
            if (inside.size() > 1) s.note = "graded " + inside.front().filename().string() + ", the first of " +
                                            std::to_string(inside.size()) + " source files";
        } else {
            continue;
        }
        s.id = safe_id(p.filename().string());
        if (int n = used[s.id]++; n > 0) s.id += "-" + std::to_string(n + 1);
        out.push_back(std::move(s));
    }
    return out;
}

// memwall grade, as a child process of this one (the grader's own guard
// cleans up after it); its exit status.
int run_grade_child(const std::vector<std::string>& args) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    std::vector<std::string> argv = {self.string(), "grade"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::cout.flush();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("course grade-all: fork failed");
    if (pid == 0) {
        ::execv(self.c_str(), cargv.data());
        ::_exit(127);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

json read_json(const fs::path& p) {
    std::ifstream in(p);
    return json::parse(in, nullptr, false);
}

// One row of the class table, from a grade report.
json row_of(const Submission& s, const json& doc) {
    json r = {{"id", s.id}, {"file", s.file.empty() ? "" : s.file.filename().string()}, {"note", s.note}};
    if (doc.is_discarded() || !doc.is_object()) {
        r.update({{"graded", false}, {"score", 0.0}, {"max_score", 0.0}, {"fully_correct", false}});
        return r;
    }
    double correctness = 0, speed = 0;
    bool all_correct = true;
    int checks = 0;
    json verdicts = json::object();
    json ratio = nullptr;
    for (const auto& t : doc.value("tests", json::array())) {
        const std::string kind = t.value("kind", "");
        verdicts[t.value("name", "?")] = t.value("passed", false);
        if (kind == "correctness") {
            correctness += t.value("score", 0.0);
            all_correct = all_correct && t.value("passed", false);
            ++checks;
        } else if (kind == "speed") {
            speed += t.value("score", 0.0);
            if (t.contains("speed") && t["speed"].contains("ratio")) ratio = t["speed"]["ratio"];
        }
    }
    r.update({{"graded", true}, {"score", doc.value("score", 0.0)}, {"max_score", doc.value("max_score", 0.0)},
              {"correctness", correctness}, {"speed", speed}, {"ratio", ratio},
              {"fully_correct", all_correct && checks > 0}, {"grader_error", doc.value("grader_error", false)},
              {"tests", verdicts}});
    return r;
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string o = "\"";
    for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
}

std::string scores_csv(const json& rows) {
    std::vector<std::string> tests;
    for (const auto& r : rows) {
        if (!r.contains("tests")) continue;
        for (auto it = r["tests"].begin(); it != r["tests"].end(); ++it)
            if (std::find(tests.begin(), tests.end(), it.key()) == tests.end()) tests.push_back(it.key());
    }
    std::ostringstream c;
    c << "id,file,score,max_score,correctness,speed,ratio,fully_correct";
    for (const auto& t : tests) c << "," << csv_field(t);
    c << ",note\n";
    for (const auto& r : rows) {
        c << r["id"].get<std::string>() << "," << csv_field(r["file"].get<std::string>()) << "," << r["score"].get<double>()
          << "," << r["max_score"].get<double>() << "," << r.value("correctness", 0.0) << "," << r.value("speed", 0.0)
          << "," << (r.contains("ratio") && r["ratio"].is_number() ? fmt("%.4g", r["ratio"].get<double>()) : "")
          << "," << (r["fully_correct"].get<bool>() ? "yes" : "no");
        for (const auto& t : tests) {
            const json v = r.contains("tests") && r["tests"].contains(t) ? r["tests"][t] : json(nullptr);
            c << "," << (v.is_boolean() ? (v.get<bool>() ? "pass" : "fail") : "");
        }
        c << "," << csv_field(r["note"].get<std::string>()) << "\n";
    }
    return c.str();
}

// The lines first..last of a source, numbered, for the page.
std::string excerpt(const std::string& source, int first, int last) {
    std::istringstream in(source);
    std::string line, out;
    for (int n = 1; std::getline(in, line); ++n)
        if (n >= first && n <= last) out += fmt("%4d  ", n) + grade::printable(line) + "\n";
    return out;
}

std::string histogram_svg(const json& rows, double max_score) {
    constexpr int kBins = 10, kW = 520, kH = 180, kPad = 30;
    int counts[kBins] = {};
    for (const auto& r : rows) {
        const double s = r["score"].get<double>();
        const int b = max_score > 0 ? std::clamp(static_cast<int>(s / max_score * kBins), 0, kBins - 1) : 0;
        ++counts[b];
    }
    const int top = std::max(1, *std::max_element(counts, counts + kBins));
    std::ostringstream h;
    h << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH + 2 * kPad
      << "\" role=\"img\" aria-label=\"score distribution\">";
    const double bw = double(kW - 2 * kPad) / kBins;
    for (int b = 0; b < kBins; ++b) {
        const double bh = double(kH) * counts[b] / top, x = kPad + b * bw, y = kPad + kH - bh;
        h << "<rect x=\"" << x + 2 << "\" y=\"" << y << "\" width=\"" << bw - 4 << "\" height=\"" << bh
          << "\" fill=\"#4a78b5\"/>";
        if (counts[b]) h << "<text x=\"" << x + bw / 2 << "\" y=\"" << y - 4 << "\" text-anchor=\"middle\" font-size=\"12\">"
                         << counts[b] << "</text>";
        h << "<text x=\"" << x + bw / 2 << "\" y=\"" << kPad + kH + 16 << "\" text-anchor=\"middle\" font-size=\"11\">"
          << fmt("%.0f", max_score * b / kBins) << "-" << fmt("%.0f", max_score * (b + 1) / kBins) << "</text>";
    }
    h << "<line x1=\"" << kPad << "\" y1=\"" << kPad + kH << "\" x2=\"" << kW - kPad << "\" y2=\"" << kPad + kH
      << "\" stroke=\"#333\"/></svg>";
    return h.str();
}

// The grader's note, and what the submission was flagged a copy of.
std::string note_of(const json& r) {
    std::string note = r["note"].get<std::string>();
    if (r.contains("copy_of"))
        for (const auto& other : r["copy_of"]) note += (note.empty() ? "" : "; ") + ("copy of " + other.get<std::string>());
    return note;
}

std::string page(const std::string& level, const json& rows, const json& copies,
                 const std::map<std::string, std::string>& sources) {
    double max_score = 0;
    for (const auto& r : rows) max_score = std::max(max_score, r["max_score"].get<double>());
    std::vector<const json*> board;
    for (const auto& r : rows)
        if (r["fully_correct"].get<bool>() && r.contains("ratio") && r["ratio"].is_number()) board.push_back(&r);
    std::stable_sort(board.begin(), board.end(),
                     [](const json* a, const json* b) { return (*a)["ratio"].get<double>() > (*b)["ratio"].get<double>(); });
    std::ostringstream h;
    h << "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>memwall grade-all: level "
      << html_escape(level) << "</title><style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
      << "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
      << "th{background:#f0f0f0}.n{text-align:right;white-space:nowrap}.copy{background:#fde8e8}pre{background:#f7f7f7;padding:6px;"
      << "font-size:12px;overflow-x:auto;margin:0}.pair{display:grid;grid-template-columns:1fr 1fr;gap:8px;"
      << "margin:.5em 0 1.5em}</style></head><body>\n";
    h << "<h1>Level " << html_escape(level) << ": " << rows.size() << " submissions</h1>\n";
    int correct = 0;
    for (const auto& r : rows) correct += r["fully_correct"].get<bool>();
    h << "<p>" << correct << " fully correct; " << copies.size() << " flagged as copies.</p>\n";
    h << "<h2>Score distribution</h2>\n" << histogram_svg(rows, max_score) << "\n";
    h << "<h2 id=\"leaderboard\">Leaderboard</h2><p>Fully correct submissions by speed, as the ratio of the "
         "reference's best time to theirs (higher is faster); flagged copies are shaded.</p>\n<table><tr><th>#</th><th>submission</th>"
         "<th class=\"n\">speed ratio</th><th class=\"n\">score</th></tr>\n";
    int rank = 0;
    for (const json* r : board)
        h << "<tr" << (r->contains("copy_of") ? " class=\"copy\"" : "") << "><td class=\"n\">" << ++rank
          << "</td><td>" << html_escape((*r)["id"].get<std::string>()) << (r->contains("copy_of") ? " (a copy)" : "")
          << "</td><td class=\"n\">" << fmt("%.3g", (*r)["ratio"].get<double>()) << "</td><td class=\"n\">"
          << fmt("%.1f", (*r)["score"].get<double>()) << "</td></tr>\n";
    h << "</table>\n<h2>Every submission</h2>\n<table><tr><th>submission</th><th class=\"n\">score</th>"
         "<th class=\"n\">correctness</th><th class=\"n\">speed</th><th>note</th></tr>\n";
    std::map<std::string, bool> flagged;
    for (const auto& c : copies) flagged[c["a"].get<std::string>()] = flagged[c["b"].get<std::string>()] = true;
    for (const auto& r : rows)
        h << "<tr" << (flagged.count(r["id"].get<std::string>()) ? " class=\"copy\"" : "") << "><td>"
          << html_escape(r["id"].get<std::string>()) << "</td><td class=\"n\">" << fmt("%.1f", r["score"].get<double>())
          << " / " << fmt("%.0f", r["max_score"].get<double>()) << "</td><td class=\"n\">"
          << fmt("%.1f", r.value("correctness", 0.0)) << "</td><td class=\"n\">" << fmt("%.1f", r.value("speed", 0.0))
          << "</td><td>" << html_escape(note_of(r)) << "</td></tr>\n";
    h << "</table>\n<h2 id=\"copies\">Copies</h2>\n";
    if (copies.empty()) h << "<p>None.</p>\n";
    for (const auto& c : copies) {
        const std::string a = c["a"].get<std::string>(), b = c["b"].get<std::string>();
        h << "<h3>" << html_escape(a) << " ~ " << html_escape(b) << (c["kind"] == "project" ? " (the project's)" : "")
          << ": " << fmt("%.0f", 100 * c["score"].get<double>()) << "%, " << c["shared"].get<int>()
          << " fingerprints</h3>\n";
        for (const auto& g : c["regions"]) {
            if (g["fingerprints"].get<int>() < 2) continue;
            h << "<div class=\"pair\"><pre>" << html_escape(excerpt(sources.at(a), g["a_lines"][0].get<int>(), g["a_lines"][1].get<int>()))
              << "</pre><pre>" << html_escape(excerpt(sources.at(b), g["b_lines"][0].get<int>(), g["b_lines"][1].get<int>())) << "</pre></div>\n";
        }
    }
    h << "</body></html>\n";
    return h.str();
}

}  // namespace

int run_grade_all(const GradeAllOptions& o) {
    const std::vector<grade::Exercise> xs = grade::load_level(o.level);  // a bad level: UsageError first
    const fs::path dir = o.dir, out = o.out;
    if (!fs::is_directory(dir)) throw UsageError("course grade-all: '" + o.dir + "' is not a folder of submissions");
    if (o.out.empty()) throw UsageError("course grade-all: --out FOLDER is required");
    if (fs::exists(out) && !fs::is_directory(out)) throw UsageError("course grade-all: --out '" + o.out + "' is a file");
    const std::vector<Submission> subs = gather(dir);
    if (subs.empty()) throw UsageError("course grade-all: no submissions (source files or folders) in '" + o.dir + "'");
    fs::create_directories(out / "grades");

    std::vector<std::string> common = {xs.front().level_id, "--format", "json"};
    for (const auto& [flag, value] : {std::pair{"--seed", o.seed_text}, {"--secret-seed-file", o.secret_seed_file},
                                      {"--exercise", o.exercise}, {"--backend", o.backend}})
        if (!value.empty()) common.insert(common.end(), {flag, value});
    if (o.threads) common.insert(common.end(), {"--threads", std::to_string(o.threads)});

    json rows = json::array();
    int graded = 0, kept = 0;
    for (std::size_t i = 0; i < subs.size(); ++i) {
        const Submission& s = subs[i];
        const fs::path report = out / "grades" / (s.id + ".json"), stamp = out / "grades" / (s.id + ".sha256");
        json doc = json(json::value_t::discarded);
        const std::string label = "[" + std::to_string(i + 1) + "/" + std::to_string(subs.size()) + "] " + s.id;
        if (!s.file.empty()) {
            const std::string sha = sha256_hex(s.file);
            // The bytes' digest is written before the grade starts and the
            // report atomically when it ends: a report beside its digest is
            // a finished grade of these very bytes.
            if (fs::exists(report) && read_prefix(stamp, 128) == sha) {
                doc = read_json(report);
                if (!doc.is_discarded()) {
                    ++kept;
                    std::cout << label << ": kept (graded before)\n";
                }
            }
            if (doc.is_discarded()) {
                write_file_atomic(stamp, sha);
                std::vector<std::string> args = common;
                args.insert(args.end(), {"--submission", s.file.string(), "--out", report.string()});
                const auto t0 = std::chrono::steady_clock::now();
                const int status = run_grade_child(args);
                const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                doc = read_json(report);
                ++graded;
                std::cout << label << ": "
                          << (doc.is_discarded() ? "no report (memwall grade exit " + std::to_string(status) + ")"
                                                 : fmt("%.1f / %.0f", doc.value("score", 0.0), doc.value("max_score", 0.0)))
                          << fmt(" (%.0f s)", secs) << std::endl;
            }
        } else {
            std::cout << label << ": " << s.note << "\n";
        }
        json r = row_of(s, doc);
        if (!s.file.empty() && doc.is_discarded()) r["note"] = "the grader wrote no report";
        rows.push_back(r);
    }

    // Copies: every pair of submissions and each against the level's answers.
    const Base base = level_base(o.level);
    const std::vector<Secret> secrets = level_secrets(o.level);
    std::vector<Document> docs;
    std::map<std::string, std::string> sources;
    for (const Submission& s : subs)
        if (!s.file.empty()) {
            sources[s.id] = read_prefix(s.file);
            docs.push_back(Document::of(s.id, sources[s.id]));
        }
    for (const Secret& s : secrets) sources[s.path] = read_prefix(grade::source_dir() / s.path);
    json copies = json::array();
    auto flag = [&](const Document& a, const Document& b, const std::string& b_name, const char* kind) {
        const Match m = compare(a, b, base);
        if (!is_copy(m)) return;
        copies.push_back({{"a", a.name}, {"b", b_name}, {"kind", kind}, {"score", m.score()}, {"shared", m.shared},
                          {"regions", regions_json(m)}});
    };
    for (std::size_t i = 0; i < docs.size(); ++i) {
        for (std::size_t j = i + 1; j < docs.size(); ++j) flag(docs[i], docs[j], docs[j].name, "submission");
        for (const Secret& s : secrets) flag(docs[i], s.doc, s.path, "project");
    }
    std::stable_sort(copies.begin(), copies.end(),
                     [](const json& a, const json& b) { return a["score"].get<double>() > b["score"].get<double>(); });
    for (const auto& c : copies)
        for (auto& r : rows)
            if (r["id"] == c["a"] || r["id"] == c["b"])
                r["copy_of"].push_back(r["id"] == c["a"] ? c["b"] : c["a"]);

    const json summary = grade::printable_strings(
        {{"schema", "memwall.grade-all/1"}, {"level", xs.front().level_id}, {"submissions", rows}, {"copies", copies},
         {"graded_now", graded}, {"kept", kept}});
    write_file_atomic(out / "summary.json", summary.dump(2) + "\n");
    write_file_atomic(out / "scores.csv", scores_csv(summary["submissions"]));
    write_file_atomic(out / "index.html", page(xs.front().level_id, summary["submissions"], summary["copies"], sources));
    std::cout << "memwall course grade-all: " << subs.size() << " submissions (" << graded << " graded now, " << kept
              << " kept from an earlier run), " << copies.size() << " copies flagged; " << (out / "index.html").string()
              << ", scores.csv, summary.json\n";
    return 0;
}

}  // namespace mw::course
