// The back-of-envelope formulas of the seed texts, as code: roofline and
// ridge point, arithmetic intensity (GEMM, element-wise, decode at batch B),
// KV-cache bytes (MHA/GQA/MQA), block-quantization effective bits,
// FlashAttention HBM-visible state, fusion intermediate traffic, speculative
// decoding tokens per target pass, activation checkpointing, the iron law.
//
// `memwall calc` evaluates one formula from the command line; `memwall
// reproduce` evaluates the claims in experiments/claims.json with the same
// functions and compares with the published numbers. Every quantity is kept
// in base SI units (bytes, FLOP, seconds, watts) until it is printed, so a
// GB/GiB slip can only happen at the edge, where it is shown on purpose.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mw::calc {

// A parameter of a formula. Numeric unless `choices` is non-empty.
struct ParamSpec {
    std::string name;
    std::string unit;   // "FLOP/B", "bytes", "count", "TB/s", ... (for --list)
    std::string help;
    bool required = false;
    std::optional<double> def;          // default when not required
    std::vector<std::string> choices;   // a choice parameter (e.g. attention: mha|gqa|mqa)
    bool positive = true;               // numeric: must be > 0 (else >= 0)
    bool any_sign = false;              // numeric: any finite value (e.g. the smallest weight of a block)
};
// Units with a rule of their own, checked by resolve_params for every formula:
// "count" must be a whole number (--layers 32.5 is an error), "fraction" and
// "probability" lie in 0..1.

// Values given to a formula, already validated against its ParamSpecs
// (defaults filled in; optional parameters without default are absent).
struct Params {
    std::map<std::string, double> num;
    std::map<std::string, std::string> str;
    bool has(const std::string& k) const { return num.count(k) || str.count(k); }
    double at(const std::string& k) const { return num.at(k); }
};

// One result. `dim` is the canonical unit the value is in: "B", "FLOP",
// "FLOP/B", "FLOP/s", "B/s", "s", "bit", "W", "1" (dimensionless) or
// "text" (then `text` holds the value, e.g. "memory-bound").
struct Output {
    std::string name;
    double value = 0;
    std::string dim;
    std::string words;  // what it is, in the reader's vocabulary
    std::string text;
};

struct Formula {
    std::string name;
    std::string summary;  // one line
    std::string words;    // the formula in words, printed with every result
    std::vector<ParamSpec> params;
    std::function<std::vector<Output>(const Params&)> eval;  // throws UsageError on inconsistent input
};

const std::vector<Formula>& formulas();
const Formula* find_formula(const std::string& name);
std::vector<std::string> formula_names();

// Validates raw "name -> text" pairs against the formula: unknown name,
// non-numeric or out-of-range value (a fractional count, a fraction above 1),
// bad choice or missing required parameter throws mw::UsageError naming it
// and the valid choices.
Params resolve_params(const Formula& f, const std::map<std::string, std::string>& raw);

// resolve_params + eval.
std::vector<Output> evaluate(const Formula& f, const std::map<std::string, std::string>& raw);
// f's outputs at p; throws UsageError naming the output and the inputs when a
// number comes out infinite or NaN (an input too large or too small for it).
std::vector<Output> evaluate(const Formula& f, const Params& p);
const Output* find_output(const std::vector<Output>& outs, const std::string& name);

// ---- units -----------------------------------------------------------------
// A display unit: its dimension and how many canonical units one of it is
// ("GB" = 1e9 B, "GiB" = 2^30 B, "ms" = 1e-3 s, "%" = 0.01).
struct Unit {
    std::string name;
    std::string dim;
    double factor;
};
// nullptr when unknown.
const Unit* find_unit(const std::string& name);
std::vector<std::string> unit_names();
// The decimal/binary counterpart of a byte unit: "GB" <-> "GiB", "MB" <->
// "MiB", "KB" <-> "KiB", "TB" <-> "TiB"; empty when there is none.
std::string byte_unit_counterpart(const std::string& unit);
// Converts `value` (canonical units of `dim`) into `unit`; throws
// std::invalid_argument if the dimensions differ.
double to_unit(double value, const std::string& dim, const std::string& unit);
// Human form of a canonical value: bytes show decimal and binary units side
// by side ("1.342e+09 B = 1.342 GB = 1.250 GiB"), seconds pick ms/us/ns.
std::string pretty(const Output& o);
std::string fmt(double v, int sig = 4);

}  // namespace mw::calc
