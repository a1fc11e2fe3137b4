// The tolerance model (docs/harness.md, "How a variant is checked"): one dtype-aware check used by tests, `run`
// and `grade`.
//
//  1. element-wise  |out - ref| <= atol + rtol * |ref|, where
//        rtol = c * u(dtype) * sqrt(L) * scale     (u: unit roundoff, L: reduction length)
//        atol = rtol * rms(ref)                    (cancellation makes |ref| tiny;
//                                                   the error scales with the terms, not the sum)
//  2. a norm floor: ||out - ref||_F / ||ref||_F <= rtol, so an all-zero or
//     mostly-wrong output never passes, however loose the element test;
//  3. relative to the naive variant: rel_fro(candidate) <= k * max(rel_fro(naive), u*sqrt(L));
//  4. exact mode for integer outputs and routing decisions;
//  5. token_sequence mode for generated token ids: exact, except that a
//     sequence may diverge at a near-tie step (the fp64 top-2 logit margin
//     below the tolerance), after which the rest of it is not compared;
//  6. distribution mode for samplers: a chi-square goodness-of-fit test of the
//     counts against the oracle's probabilities at false-failure rate alpha.
// NaN and Inf are mismatches wherever the reference is finite (or disagrees).
// Each output may have its own mode (CheckSpec::per_output).
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

// One goodness-of-fit test of a distribution output.
struct StatTest {
    std::string output;
    std::string test = "chi-square";
    double statistic = 0, p_value = 1, alpha = 0;
    int dof = 0;
    double samples = 0;
    int categories = 0;  // with non-zero probability
    int bins = 0;        // after pooling the categories expected fewer than 5 times
};

struct CheckResult {
    bool ok = true;
    double max_abs = 0, max_rel = 0, rel_fro = 0;
    std::size_t mismatches = 0, nonfinite = 0, count = 0;
    std::vector<Mismatch> worst;  // up to 5, worst first (by |diff| / allowed)
    std::string message;          // empty when ok; names the failing rule and the worst elements
    // token_sequence: sequences accepted although they diverged from the
    // oracle, each at a near-tie step; `note` names them (also when ok).
    std::size_t near_ties = 0;
    std::string note;
    std::vector<StatTest> stat_tests;  // distribution outputs
};

// Compare one output buffer with its oracle (fp64). `name` and `dims` label
// elements in the message ("C[3][517]").
CheckResult check_close(const Buffer& out, const std::vector<double>& ref, DType dtype, double L, double scale = 1.0);
CheckResult check_exact(const Buffer& out, const std::vector<double>& ref);

// token_sequence. `ref` holds the oracle's token ids (out.count of them)
// followed by the fp64 top-2 logit margin of each step (token_oracle builds
// it). A buffer with dims is [sequences...][steps] (the last dim is the
// step); without dims it is one sequence. A mismatch at a step whose margin is
// below `tie_threshold` is a near-tie: counted, and the rest of that sequence
// is not compared (it legitimately follows another path); a mismatch at any
// other step fails. A token still holding the poison value fails anywhere.
CheckResult check_token_sequence(const Buffer& out, const std::vector<double>& ref, double tie_threshold);
// The oracle vector of a token_sequence output: ids, then margins.
std::vector<double> token_oracle(std::vector<double> ids, const std::vector<double>& margins);
// The margin below which a step is a near-tie:
//   16 u(max(dtype, f32)) sqrt(L) * tolerance_scale * logit_scale.
double near_tie_threshold(const CheckSpec& spec, DType problem_dtype, double L);

// distribution. `probs` are the oracle's probabilities of K categories. The
// output holds counts per category (out.count == K) or samples (category ids,
// out.count != K). Pearson's chi-square over the categories, those expected
// fewer than 5 times pooled into one bin, two-sided: fails when the counts
// sit too far from the expected ones (upper tail) or too close (lower tail,
// on bins pooled to 20 or more expected, with 8 or more degrees of freedom
// there: counts written from the law rather than drawn), each tail at
// alpha / 2;
// when a category of probability 0 was drawn, or a sample is not a category
// id; when `samples` > 0 and the output holds another number of samples; and
// when the law has two or more categories but the samples are too few to
// fill two bins (a test with no power passes nothing).
CheckResult check_distribution(const Buffer& out, const std::vector<double>& probs, double alpha, double samples = 0);
// P(X <= stat) for X ~ chi-square with `dof` degrees of freedom.
double chi_square_cdf(double stat, double dof);
// P(X >= stat) for X ~ chi-square with `dof` degrees of freedom.
double chi_square_sf(double stat, double dof);
// The regularized upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a).
double gamma_q(double a, double x);

// Rule 3: tighten `r` against the naive variant's error from the same run.
void apply_baseline_rule(CheckResult& r, double naive_rel_fro, double factor, DType dtype, double L);

// Check every output of a problem against the op's oracle with the op's spec.
// `scale` multiplies the op's tolerance (Variant::tolerance_scale).
CheckResult check_problem(const Op& op, const Problem& p, const std::vector<std::vector<double>>& oracle,
                          double scale = 1.0);

// "C[3][517]" from a flat index and dims.
std::string element_name(const Buffer& b, std::size_t index);

}  // namespace mw
