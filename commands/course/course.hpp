// `memwall course`: the instructor's kit around the grader.
//
//   memwall course handout 01 --out handout-01      a student's folder, proven free of answers
//   memwall course similarity a.cpp b.cpp ... --level 01
//                                                   copies among submissions and of the project
//   memwall course grade-all 01 submissions/ --out class/
//                                                   every submission graded, a table, a page
//   memwall course autograder 01 --out level01.zip  a Gradescope autograder
//
// handout.cpp builds the folder, similarity.cpp compares sources,
// grade_all.cpp grades a class, autograder.cpp packs a course platform's
// autograder; they judge "is this a copy" with the
// winnowed fingerprints of fingerprint.hpp.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands/course/fingerprint.hpp"

namespace mw::course {

// A file's first `limit` bytes (a submission past 4 MiB is a table, not
// code a student wrote, and a hostile one must not exhaust memory). Throws
// std::runtime_error naming a file it cannot open.
constexpr std::size_t kMaxSourceBytes = std::size_t(4) << 20;
std::string read_source(const std::filesystem::path& p, std::size_t limit = kMaxSourceBytes);

// Copies a file to `to`, making its folders and replacing what is there.
void copy_into(const std::filesystem::path& from, const std::filesystem::path& to);

// A match's regions as the reports write them: a_lines, b_lines, fingerprints.
nlohmann::json regions_json(const Match& m);

// A source of the project that answers a level's exercise: the instructor's
// solutions, and every rung of the exercise's op but its naive reference,
// with the files of optimized/ and kernels/ they include.
struct Secret {
    std::string path;  // relative to the source tree
    Document doc;
};
std::vector<Secret> level_secrets(const std::string& level);

// The stubs and adapters every student of the level is given: their
// fingerprints are no one's copy.
Base level_base(const std::string& level);

// What leaks: a file of `docs` that holds a run of a secret's code (a
// region of at least `min_prints` shared fingerprints: some 40 tokens, four
// or five lines of code; a shared declaration of the public API is one or
// two) or is a copy of it by the kit's rule. One line per leak, empty when
// none.
std::vector<std::string> leaks(const std::vector<Document>& docs, const std::vector<Secret>& secrets,
                               const Base& base, int min_prints = 4);

// Every pair of submissions, and every submission against the level's
// secrets, compared; copies (CopyRule) listed first with their regions.
struct SimilarityOptions {
    std::vector<std::string> inputs;
    std::string level, format = "text", out;
};
int run_similarity(const SimilarityOptions& o);

// Every submission in a folder graded (resumable), the class's table, the
// copies, and a page: grade_all.cpp.
struct GradeAllOptions {
    std::string level, dir, out;
    std::string seed_text, secret_seed_file, exercise, backend;  // passed to memwall grade
    int threads = 0;
};
int run_grade_all(const GradeAllOptions& o);

// A Gradescope autograder zip for one level: autograder.cpp.
struct AutograderOptions {
    std::string level, out, exercise, secret_seed_file;
};
int run_autograder_zip(const AutograderOptions& o);

struct HandoutOptions {
    std::string level, out;
};
int run_handout(const HandoutOptions& o);

}  // namespace mw::course
