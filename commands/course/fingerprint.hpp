// Copy detection for C, C++ and CUDA sources, as MOSS does it (Schleimer,
// Wilkerson and Aiken, "Winnowing", SIGMOD 2003): a source becomes a token
// stream in which every identifier is one token and every literal another,
// so renaming, reformatting and comments change nothing; every k tokens in a
// row hash to one number; and of each w consecutive hashes the smallest is
// kept. Two files that share any run of k + w - 1 tokens share a kept hash
// (the guarantee), and reordering functions only reorders the hashes.
//
// The instructor's kit uses it twice: `memwall course similarity` (and
// grade-all) flags submissions that copy each other or the project's own
// rungs and solutions; `memwall course handout` proves a student's folder
// holds none of them. A base file (the stub every student starts from)
// removes what everyone shares by construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace mw::course {

struct Token {
    std::uint64_t hash;  // of the normalized text: "I" for any identifier, "N" any number, "S" any string
    int line;            // 1-based, in the source
};

// The normalized token stream of a C/C++/CUDA source: comments and
// #include lines dropped,
// identifiers (not keywords), numbers and string or character literals each
// one token, operators by maximal munch. Never throws on any bytes.
std::vector<Token> tokenize(std::string_view source);

struct Fingerprint {
    std::uint64_t hash;
    int token;  // index of the k-gram's first token
};

struct Winnow {
    int k = 24;  // tokens per hashed k-gram: shorter runs are common idiom (a loop header is ~15)
    int w = 8;   // window: any shared run of k + w - 1 = 31 tokens is found
};

// The winnowed fingerprints of a token stream (empty when it is shorter than k).
std::vector<Fingerprint> winnow(const std::vector<Token>& tokens, Winnow p = {});

// One source, fingerprinted.
struct Document {
    std::string name;
    std::vector<Token> tokens;
    std::vector<Fingerprint> prints;
    static Document of(std::string name, std::string_view source, Winnow p = {});
};

// The hashes to ignore: those of the base files every student was given.
using Base = std::unordered_set<std::uint64_t>;
Base base_of(const std::vector<Document>& bases);

// Lines of a and of b that share fingerprints, grouped into regions in
// which both files advance together.
struct Region {
    int a_first, a_last;  // lines in a, inclusive
    int b_first, b_last;  // lines in b
    int prints;           // fingerprints matched inside
};

struct Match {
    int shared = 0;        // distinct fingerprint hashes in both (less the base)
    int a_prints = 0;      // distinct hashes of a, less the base
    int b_prints = 0;
    double a_in_b = 0;     // shared / a_prints: how much of a is found in b
    double b_in_a = 0;     // shared / b_prints
    std::vector<Region> regions;  // by line in a
    // The larger of the two containments: a copy of b padded with other code
    // still has most of b in it.
    double score() const { return a_in_b > b_in_a ? a_in_b : b_in_a; }
};

Match compare(const Document& a, const Document& b, const Base& base = {}, Winnow p = {});

// Whether a match is a copy by the kit's rule: at least `min_shared`
// fingerprints in common (a few k-grams are idiom, not copying) and one
// file at least `min_score` contained in the other. Three independent
// solutions of level 01 score at most 0.05 against each other and the
// project's GEMM sources, sharing at most 2; a renamed, reordered copy of
// rung 3's kernels with a driver of its own scores 0.48, sharing 102
// (tests/course/test_fingerprint.cpp).
struct CopyRule {
    double min_score = 0.25;
    int min_shared = 8;
};
bool is_copy(const Match& m, CopyRule rule = {});

}  // namespace mw::course
