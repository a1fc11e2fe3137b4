#include "harness/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "harness/inputs.hpp"
#include "harness/strings.hpp"

namespace mw {

double unit_roundoff(DType t) {
    switch (t) {
        case DType::f64: return 0x1.0p-53;
        case DType::f32: return 0x1.0p-24;
        case DType::f16: return 0x1.0p-11;
        case DType::bf16: return 0x1.0p-8;
        default: return 0;
    }
}

Tolerance default_tolerance(DType t, double L, double ref_rms, double scale) {
    // c = 16: typical accumulated error grows like u*sqrt(L); 16 leaves room
    // for a different (but sound) summation order without letting a wrong
    // term (error ~ |term| ~ rms/sqrt(L)) through at large L.
    const double c = 16.0;
    Tolerance tol;
    tol.rtol = c * unit_roundoff(t) * std::sqrt(std::max(1.0, L)) * scale;
    tol.atol = tol.rtol * ref_rms;
    return tol;
}

std::string element_name(const Buffer& b, std::size_t index) {
    std::ostringstream os;
    os << b.name;
    if (b.dims.empty()) {
        os << "[" << index << "]";
        return os.str();
    }
    std::vector<std::int64_t> idx(b.dims.size());
    std::size_t rest = index;
    for (std::size_t d = b.dims.size(); d-- > 0;) {
        idx[d] = static_cast<std::int64_t>(rest % b.dims[d]);
        rest /= b.dims[d];
    }
    for (auto i : idx) os << "[" << i << "]";
    return os.str();
}

namespace {

std::string describe_worst(const Buffer& out, const CheckResult& r) {
    std::ostringstream os;
    for (auto& m : r.worst) {
        char line[256];
        std::snprintf(line, sizeof line, "\n    %s = %.9g, expected %.9g (|diff| %.3g, allowed %.3g)",
                      element_name(out, m.index).c_str(), m.got, m.want, std::fabs(m.got - m.want), m.allowed);
        os << line;
    }
    return os.str();
}

void keep_worst(std::vector<std::pair<double, Mismatch>>& worst, double badness, Mismatch m) {
    constexpr std::size_t kKeep = 5;
    if (worst.size() < kKeep) {
        worst.emplace_back(badness, m);
    } else {
        auto it = std::min_element(worst.begin(), worst.end(), [](auto& a, auto& b) { return a.first < b.first; });
        if (badness > it->first) *it = {badness, m};
    }
}

void finish_worst(CheckResult& r, std::vector<std::pair<double, Mismatch>>& worst) {
    std::sort(worst.begin(), worst.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (auto& [b, m] : worst) r.worst.push_back(m);
}

}  // namespace

CheckResult check_close(const Buffer& out, const std::vector<double>& ref, DType dtype, double L, double scale) {
    CheckResult r;
    r.count = out.count;
    if (ref.size() != out.count) {
        r.ok = false;
        r.message = out.name + ": output has " + std::to_string(out.count) + " elements, oracle " +
                    std::to_string(ref.size());
        return r;
    }
    double ref_sq = 0;
    for (double v : ref)
        if (std::isfinite(v)) ref_sq += v * v;
    const double ref_rms = ref.empty() ? 0 : std::sqrt(ref_sq / static_cast<double>(ref.size()));
    const Tolerance tol = default_tolerance(dtype, L, ref_rms, scale);

    double diff_sq = 0;
    std::vector<std::pair<double, Mismatch>> worst;
    for (std::size_t i = 0; i < out.count; ++i) {
        const double got = load_as_double(out, i), want = ref[i];
        const double allowed = tol.atol + tol.rtol * std::fabs(want);
        const bool both_nonfinite_same =
            !std::isfinite(want) && ((std::isnan(want) && std::isnan(got)) || got == want);
        if (both_nonfinite_same) continue;
        if (!std::isfinite(got) || !std::isfinite(want)) {
            ++r.nonfinite;
            ++r.mismatches;
            keep_worst(worst, INFINITY, {i, got, want, allowed});
            continue;
        }
        const double d = std::fabs(got - want);
        diff_sq += d * d;
        r.max_abs = std::max(r.max_abs, d);
        if (want != 0) r.max_rel = std::max(r.max_rel, d / std::fabs(want));
        if (d > allowed) {
            ++r.mismatches;
            keep_worst(worst, allowed > 0 ? d / allowed : INFINITY, {i, got, want, allowed});
        }
    }
    r.rel_fro = ref_sq > 0 ? std::sqrt(diff_sq) / std::sqrt(ref_sq) : std::sqrt(diff_sq);
    if (r.nonfinite) r.rel_fro = INFINITY;
    finish_worst(r, worst);

    std::ostringstream msg;
    if (r.nonfinite) msg << out.name << ": " << r.nonfinite << " NaN/Inf element(s) where the reference is finite";
    else if (r.mismatches)
        msg << out.name << ": " << r.mismatches << " of " << r.count << " elements outside |diff| <= "
            << tol.atol << " + " << tol.rtol << "*|ref|";
    else if (r.rel_fro > tol.rtol && ref_sq > 0)
        msg << out.name << ": relative Frobenius error " << r.rel_fro << " exceeds " << tol.rtol;
    r.ok = msg.str().empty();
    if (!r.ok) r.message = msg.str() + describe_worst(out, r);
    return r;
}

CheckResult check_exact(const Buffer& out, const std::vector<double>& ref) {
    CheckResult r;
    r.count = out.count;
    std::vector<std::pair<double, Mismatch>> worst;
    for (std::size_t i = 0; i < out.count && i < ref.size(); ++i) {
        const double got = load_as_double(out, i);
        if (got != ref[i] && !(std::isnan(got) && std::isnan(ref[i]))) {
            ++r.mismatches;
            r.max_abs = std::max(r.max_abs, std::fabs(got - ref[i]));
            keep_worst(worst, static_cast<double>(out.count - i), {i, got, ref[i], 0});  // first ones first
        }
    }
    finish_worst(r, worst);
    r.ok = r.mismatches == 0 && ref.size() == out.count;
    if (!r.ok)
        r.message = out.name + ": " + std::to_string(r.mismatches) + " of " + std::to_string(r.count) +
                    " elements differ (exact match required)" + describe_worst(out, r);
    return r;
}

// ------------------------------------------------------------ token sequences

std::vector<double> token_oracle(std::vector<double> ids, const std::vector<double>& margins) {
    if (ids.size() != margins.size())
        throw std::invalid_argument("token_oracle: " + std::to_string(ids.size()) + " ids but " +
                                    std::to_string(margins.size()) + " margins");
    ids.insert(ids.end(), margins.begin(), margins.end());
    return ids;
}

double near_tie_threshold(const CheckSpec& spec, DType problem_dtype, double L) {
    // The logits are as accurate as the arithmetic that made them: at least
    // fp32's rounding, a wider dtype's if the problem is stored in one.
    const double u = std::max(unit_roundoff(DType::f32), unit_roundoff(problem_dtype));
    return 16.0 * u * std::sqrt(std::max(1.0, L)) * spec.tolerance_scale * spec.logit_scale;
}

namespace {

constexpr std::int32_t kPoisonI32 = 0x7F7F7F7F;  // what poison() leaves in an i32

}  // namespace

namespace {

// What one sequence did: where it left the oracle's path, if it did.
struct SequenceOutcome {
    bool diverged = false, near_tie = false;
    std::string what;        // the step, both tokens and the margin
    std::size_t unwritten = 0;
    std::string unwritten_at;
};

SequenceOutcome follow_sequence(const Buffer& out, const std::vector<double>& ref, std::size_t first,
                                std::size_t steps, double tie_threshold) {
    SequenceOutcome o;
    for (std::size_t t = 0; t < steps; ++t) {
        const std::size_t i = first + t;
        // Checked past a divergence too: a variant that stops writing is wrong on any path.
        if (out.dtype == DType::i32 && out.as<std::int32_t>()[i] == kPoisonI32) {
            if (o.unwritten++ == 0) o.unwritten_at = element_name(out, i);
            continue;
        }
        if (o.diverged) continue;
        const double got = load_as_double(out, i), want = ref[i], margin = ref[out.count + i];
        if (got == want) continue;
        o.diverged = true;
        o.near_tie = margin < tie_threshold;  // NaN margins are never ties
        // Token ids as written ("128001", never "1.28e+05").
        o.what = element_name(out, i) + ": token " + fmt(got, 17) + ", oracle " + fmt(want, 17) + " at step " +
                 std::to_string(t) + " where the fp64 top-2 margin is " + fmt(margin) + " (near-tie below " +
                 fmt(tie_threshold) + ")";
    }
    return o;
}

}  // namespace

CheckResult check_token_sequence(const Buffer& out, const std::vector<double>& ref, double tie_threshold) {
    CheckResult r;
    r.count = out.count;
    if (ref.size() != 2 * out.count) {
        r.ok = false;
        r.message = out.name + ": a token_sequence oracle holds the ids and then the top-2 margin of every step (" +
                    std::to_string(2 * out.count) + " values), got " + std::to_string(ref.size()) +
                    " (build it with mw::token_oracle)";
        return r;
    }
    const std::size_t steps = out.dims.empty() ? out.count : static_cast<std::size_t>(out.dims.back());
    const std::size_t rows = steps ? out.count / steps : 0;
    std::ostringstream fails, ties;
    std::size_t unwritten = 0;
    for (std::size_t row = 0; row < rows; ++row) {
        const SequenceOutcome o = follow_sequence(out, ref, row * steps, steps, tie_threshold);
        if (o.unwritten && unwritten < 3) fails << "\n    " << o.unwritten_at << " was never written (still poison)";
        unwritten += o.unwritten;
        if (!o.diverged) continue;
        if (o.near_tie && ++r.near_ties <= 5) ties << "\n    " << o.what;
        if (!o.near_tie && ++r.mismatches <= 5) fails << "\n    " << o.what << ": a real divergence";
    }
    if (r.near_ties)
        r.note = out.name + ": " + std::to_string(r.near_ties) + " sequence(s) diverged at a near-tie step and " +
                 "were compared only up to it" + ties.str();
    r.ok = r.mismatches == 0 && unwritten == 0;
    if (r.ok) return r;
    std::ostringstream msg;
    msg << out.name << ": ";
    if (r.mismatches)
        msg << r.mismatches << " of " << rows << " sequence(s) diverge from the oracle at a step that is not a near-tie";
    if (r.mismatches && unwritten) msg << "; ";
    if (unwritten) msg << unwritten << " token(s) never written";
    r.message = msg.str() + fails.str();
    return r;
}

// ------------------------------------------------------------ distributions

namespace {

// Lower regularized gamma P(a, x) by its series (converges for x < a + 1).
double gamma_p_series(double a, double x) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 1000000; ++n) {
        term *= x / (a + n);
        sum += term;
        if (std::fabs(term) < std::fabs(sum) * 1e-16) break;
    }
    return sum * std::exp(-x + a * std::log(x) - std::lgamma(a));
}

// Upper regularized gamma Q(a, x) by its continued fraction (modified
// Lentz), accurate in relative terms even for tiny Q (x >= a + 1).
double gamma_q_fraction(double a, double x) {
    constexpr double tiny = 1e-300;
    double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
    for (int i = 1; i < 1000000; ++i) {
        const double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (std::fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (std::fabs(c) < tiny) c = tiny;
        d = 1 / d;
        const double delta = d * c;
        h *= delta;
        if (std::fabs(delta - 1) < 1e-16) break;
    }
    return std::exp(-x + a * std::log(x) - std::lgamma(a)) * h;
}

}  // namespace

double gamma_q(double a, double x) {
    if (!(a > 0)) throw std::invalid_argument("gamma_q: a must be positive");
    if (!(x > 0)) return 1.0;
    if (x < a + 1) return std::clamp(1.0 - gamma_p_series(a, x), 0.0, 1.0);
    return std::clamp(gamma_q_fraction(a, x), 0.0, 1.0);
}

double chi_square_sf(double stat, double dof) {
    if (dof <= 0) return 1.0;
    return gamma_q(dof / 2, stat / 2);
}

// The lower tail directly (not 1 - Q): the "too good" test needs it accurate
// where it is tiny.
double chi_square_cdf(double stat, double dof) {
    if (dof <= 0) return 1.0;
    const double a = dof / 2, x = stat / 2;
    if (!(x > 0)) return 0.0;
    if (x < a + 1) return std::clamp(gamma_p_series(a, x), 0.0, 1.0);
    return std::clamp(1.0 - gamma_q_fraction(a, x), 0.0, 1.0);
}

namespace {

// Observed counts per category from counts or samples; empty + message on a bad one.
std::vector<double> observed_counts(const Buffer& out, std::size_t K, std::string& bad) {
    std::vector<double> obs(K, 0.0);
    const bool counts = out.count == K;
    for (std::size_t i = 0; i < out.count; ++i) {
        // Equal poison everywhere would look like a perfectly uniform sampler.
        if (out.dtype == DType::i32 && out.as<std::int32_t>()[i] == kPoisonI32) {
            bad = element_name(out, i) + " was never written (still poison)";
            return {};
        }
        const double v = load_as_double(out, i);
        const bool integral = std::isfinite(v) && v == std::floor(v);
        if (counts && (!integral || v < 0)) {
            bad = element_name(out, i) + " = " + fmt(v) + " is not a count";
            return {};
        }
        if (!counts && (!integral || v < 0 || v >= double(K))) {
            bad = element_name(out, i) + " = " + fmt(v) + " is not a category id in [0, " + std::to_string(K) + ")";
            return {};
        }
        if (counts) obs[i] = v;
        else obs[static_cast<std::size_t>(v)] += 1;
    }
    return obs;
}

struct Bin {
    double observed = 0, expected = 0;
    std::vector<std::size_t> categories;
};

// One bin per category expected at least `least` times (5: the chi-square
// approximation needs expected counts of about 5 or more); the rest pooled
// into one bin, itself merged into the smallest bin while it is still under
// `least`.
std::vector<Bin> pool(const std::vector<double>& obs, const std::vector<double>& expected, double least = 5) {
    std::vector<Bin> bins;
    Bin small;
    for (std::size_t c = 0; c < obs.size(); ++c) {
        if (expected[c] <= 0) continue;
        Bin& b = expected[c] >= least ? bins.emplace_back() : small;
        b.observed += obs[c];
        b.expected += expected[c];
        b.categories.push_back(c);
    }
    if (small.categories.empty()) return bins;
    if (small.expected < least && !bins.empty()) {
        auto it = std::min_element(bins.begin(), bins.end(),
                                   [](const Bin& a, const Bin& b) { return a.expected < b.expected; });
        it->observed += small.observed;
        it->expected += small.expected;
        it->categories.insert(it->categories.end(), small.categories.begin(), small.categories.end());
    } else {
        bins.push_back(small);
    }
    return bins;
}

double statistic(const std::vector<Bin>& bins) {
    double x = 0;
    for (const Bin& b : bins) x += (b.observed - b.expected) * (b.observed - b.expected) / b.expected;
    return x;
}

std::string bin_name(const Bin& b) {
    if (b.categories.size() == 1) return "category " + std::to_string(b.categories[0]);
    return "pooled categories (" + std::to_string(b.categories.size()) + ", from " +
           std::to_string(b.categories.front()) + ")";
}

// The failed test, and the three bins that pull its statistic most
// (largest standardized residuals).
std::string describe_misfit(const StatTest& t, const std::vector<Bin>& bins) {
    std::vector<const Bin*> order;
    for (const Bin& b : bins) order.push_back(&b);
    auto z = [](const Bin* b) { return (b->observed - b->expected) / std::sqrt(b->expected); };
    std::sort(order.begin(), order.end(), [&](auto* a, auto* b) { return std::fabs(z(a)) > std::fabs(z(b)); });
    std::ostringstream msg;
    msg << "chi-square " << fmt(t.statistic) << " with " << t.dof << " dof over " << fmt(t.samples)
        << " samples: p = " << fmt(t.p_value) << " < alpha / 2 = " << fmt(t.alpha / 2)
        << ", the samples do not follow the oracle's distribution";
    for (std::size_t i = 0; i < order.size() && i < 3; ++i) {
        char line[200];
        std::snprintf(line, sizeof line, "\n    %s: %.0f drawn, %.1f expected (%+.1f sigma)",
                      bin_name(*order[i]).c_str(), order[i]->observed, order[i]->expected, z(order[i]));
        msg << line;
    }
    return msg.str();
}

}  // namespace

constexpr int kMinDofForLowerTail = 8;
// ... over bins expected at least 20 times each (pooled afresh): the
// approximation's lower tail at alpha / 2 is far less sound than its upper
// one where bins hold about 5 (small user shapes), and an honest sampler
// must not fail there.
constexpr double kLeastExpectedForLowerTail = 20;

CheckResult check_distribution(const Buffer& out, const std::vector<double>& probs, double alpha, double samples) {
    CheckResult r;
    r.count = out.count;
    auto fail = [&](const std::string& why) {
        r.ok = false;
        r.message = out.name + ": " + why;
        return r;
    };
    const std::size_t K = probs.size();
    double total_p = 0;
    for (double p : probs) {
        if (!(p >= 0) || !std::isfinite(p)) return fail("the oracle gives a probability that is negative or not finite");
        total_p += p;
    }
    if (K == 0 || std::fabs(total_p - 1) > 1e-9)
        return fail("the oracle's probabilities sum to " + fmt(total_p) + ", not 1 (an oracle bug)");
    std::string bad;
    const std::vector<double> obs = observed_counts(out, K, bad);
    if (!bad.empty()) return fail(bad);
    const double N = std::accumulate(obs.begin(), obs.end(), 0.0);
    if (N <= 0) return fail("no samples");
    if (samples > 0 && N != samples)
        return fail("holds " + fmt(N, 15) + " samples; the shape asks for " + fmt(samples, 15) +
                    " (a sampler that stops early, or counts not drawn)");
    for (std::size_t c = 0; c < K; ++c)
        if (probs[c] == 0 && obs[c] > 0)
            return fail("category " + std::to_string(c) + " has probability 0 but was drawn " + fmt(obs[c]) +
                        " time(s)");

    std::vector<double> expected(K);
    for (std::size_t c = 0; c < K; ++c) expected[c] = N * probs[c] / total_p;
    const std::vector<Bin> bins = pool(obs, expected);
    StatTest t{.output = out.name, .alpha = alpha, .samples = N};
    t.categories = int(std::count_if(probs.begin(), probs.end(), [](double p) { return p > 0; }));
    t.bins = int(bins.size());
    t.dof = std::max(0, t.bins - 1);
    t.statistic = statistic(bins);
    t.p_value = chi_square_sf(t.statistic, t.dof);
    r.stat_tests.push_back(t);
    if (t.categories >= 2 && t.bins < 2)
        return fail(fmt(N, 15) + " samples over " + std::to_string(t.categories) +
                    " categories pool into one bin: too few to test the law");
    if (t.p_value < alpha / 2) {
        r.mismatches = 1;
        return fail(describe_misfit(t, bins));
    }
    // The lower tail, on bins of 20 or more, with 8 or more degrees of
    // freedom: below that, where the statistic lands on a few discrete
    // values or the approximation is loose, an honest sampler's counts can
    // sit close to the expected ones often enough to fail more than alpha / 2.
    const std::vector<Bin> wide = pool(obs, expected, kLeastExpectedForLowerTail);
    const int wide_dof = std::max(0, int(wide.size()) - 1);
    const double wide_statistic = statistic(wide);
    if (const double lower = chi_square_cdf(wide_statistic, wide_dof); wide_dof >= kMinDofForLowerTail && lower < alpha / 2) {
        r.mismatches = 1;
        return fail("chi-square " + fmt(wide_statistic) + " with " + std::to_string(wide_dof) + " dof over " + fmt(N) +
                    " samples: P(as close or closer) = " + fmt(lower) + " < alpha / 2 " + fmt(alpha / 2) +
                    ", the counts sit closer to the expected ones than drawing allows (written, not sampled)");
    }
    return r;
}

void apply_baseline_rule(CheckResult& r, double naive_rel_fro, double factor, DType dtype, double L) {
    if (factor <= 0 || !r.ok) return;
    const double floor = unit_roundoff(dtype) * std::sqrt(std::max(1.0, L));
    const double limit = factor * std::max(naive_rel_fro, floor);
    if (r.rel_fro > limit) {
        r.ok = false;
        std::ostringstream os;
        os << "relative Frobenius error " << r.rel_fro << " is more than " << factor
           << "x the naive variant's (" << naive_rel_fro << ")";
        r.message = os.str();
    }
}

namespace {

CheckResult check_output(const Op& op, const Problem& p, const Buffer& out, const std::vector<double>& ref, double L,
                         double scale) {
    switch (op.check.mode_for(out.name)) {
        case CheckMode::exact: return check_exact(out, ref);
        case CheckMode::token_sequence:
            return check_token_sequence(out, ref, scale * near_tie_threshold(op.check, p.dtype, L));
        case CheckMode::distribution:
            return check_distribution(out, ref, op.check.alpha,
                                      op.check.distribution_samples ? op.check.distribution_samples(p.shape) : 0);
        case CheckMode::tolerance: break;
    }
    return check_close(out, ref, out.dtype, L, op.check.tolerance_scale * scale);
}

// A per_output entry naming no output is a typo in the op: say so rather
// than check that output with the default mode.
std::string unknown_per_output(const Op& op, const Problem& p) {
    for (auto& [name, mode] : op.check.per_output) {
        bool found = false;
        for (auto& b : p.outputs) found = found || b.name == name;
        if (!found) {
            std::string names;
            for (auto& b : p.outputs) names += (names.empty() ? "" : ", ") + b.name;
            return "op " + op.name + ": check.per_output names '" + name + "', which is not an output (outputs: " +
                   names + ")";
        }
    }
    return {};
}

}  // namespace

CheckResult check_problem(const Op& op, const Problem& p, const std::vector<std::vector<double>>& oracle, double scale) {
    CheckResult total;
    if (auto err = unknown_per_output(op, p); !err.empty()) {
        total.ok = false;
        total.message = err;
        return total;
    }
    const double L = op.check.reduction_length ? op.check.reduction_length(p.shape) : 1.0;
    for (std::size_t k = 0; k < p.outputs.size(); ++k) {
        const Buffer& out = p.outputs[k];
        CheckResult r = check_output(op, p, out, oracle.at(k), L, scale);
        total.count += r.count;
        total.mismatches += r.mismatches;
        total.nonfinite += r.nonfinite;
        total.max_abs = std::max(total.max_abs, r.max_abs);
        total.max_rel = std::max(total.max_rel, r.max_rel);
        total.rel_fro = std::max(total.rel_fro, r.rel_fro);
        total.near_ties += r.near_ties;
        if (!r.note.empty()) total.note += (total.note.empty() ? "" : "\n") + r.note;
        total.stat_tests.insert(total.stat_tests.end(), r.stat_tests.begin(), r.stat_tests.end());
        if (!r.ok) {
            total.ok = false;
            total.message += (total.message.empty() ? "" : "\n") + r.message;
            if (total.worst.empty()) total.worst = r.worst;
        }
    }
    return total;
}

}  // namespace mw
