// The tolerance model (README.md, "How a variant is checked"): one dtype-aware check used by tests, `run`
// and `grade`.
//
//  1. element-wise  |out - ref| <= atol + rtol * |ref|, where
//        rtol = c * u(dtype) * sqrt(L) * scale     (u: unit roundoff, L: reduction length)
//        atol = rtol * rms(ref)                    (cancellation makes |ref| tiny;
//                                                   the error scales with the terms, not the sum)
//  2. a norm floor: ||out - ref||_F / ||ref||_F <= rtol, so an all-zero or
//     mostly-wrong output never passes, however loose the element test;
//  3. relative to the naive variant: rel_fro(candidate) <= k * max(rel_fro(naive), u*sqrt(L));
//  4. exact mode for integer outputs, token sequences and routing decisions.
// NaN and Inf are mismatches wherever the reference is finite (or disagrees).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "harness/registry.hpp"

namespace mw {

struct Tolerance {
    double rtol = 0;  // relative, already grown with sqrt(L) and scaled
    double atol = 0;  // absolute, set from the reference's RMS
};

// Unit roundoff of a storage dtype (f32: 2^-24, bf16: 2^-8, ...). Integers: 0.
double unit_roundoff(DType t);
// The element-wise tolerance for an output of dtype `t` after a reduction of
// length `L`, for a reference whose RMS is `ref_rms`.
Tolerance default_tolerance(DType t, double L, double ref_rms, double scale = 1.0);

struct Mismatch {
    std::size_t index = 0;
    double got = 0, want = 0, allowed = 0;
};

struct CheckResult {
    bool ok = true;
    double max_abs = 0, max_rel = 0, rel_fro = 0;
    std::size_t mismatches = 0, nonfinite = 0, count = 0;
    std::vector<Mismatch> worst;  // up to 5, worst first (by |diff| / allowed)
    std::string message;          // empty when ok; names the failing rule and the worst elements
};

// Compare one output buffer with its oracle (fp64). `name` and `dims` label
// elements in the message ("C[3][517]").
CheckResult check_close(const Buffer& out, const std::vector<double>& ref, DType dtype, double L, double scale = 1.0);
CheckResult check_exact(const Buffer& out, const std::vector<double>& ref);

// Rule 3: tighten `r` against the naive variant's error from the same run.
void apply_baseline_rule(CheckResult& r, double naive_rel_fro, double factor, DType dtype, double L);

// Check every output of a problem against the op's oracle with the op's spec.
CheckResult check_problem(const Op& op, const Problem& p, const std::vector<std::vector<double>>& oracle);

// "C[3][517]" from a flat index and dims.
std::string element_name(const Buffer& b, std::size_t index);

}  // namespace mw
