#include "harness/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "harness/inputs.hpp"

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

CheckResult check_problem(const Op& op, const Problem& p, const std::vector<std::vector<double>>& oracle) {
    CheckResult total;
    const double L = op.check.reduction_length ? op.check.reduction_length(p.shape) : 1.0;
    for (std::size_t k = 0; k < p.outputs.size(); ++k) {
        const Buffer& out = p.outputs[k];
        CheckResult r = op.check.mode == CheckMode::exact
                            ? check_exact(out, oracle.at(k))
                            : check_close(out, oracle.at(k), out.dtype, L, op.check.tolerance_scale);
        total.count += r.count;
        total.mismatches += r.mismatches;
        total.nonfinite += r.nonfinite;
        total.max_abs = std::max(total.max_abs, r.max_abs);
        total.max_rel = std::max(total.max_rel, r.max_rel);
        total.rel_fro = std::max(total.rel_fro, r.rel_fro);
        if (!r.ok) {
            total.ok = false;
            total.message += (total.message.empty() ? "" : "\n") + r.message;
            if (total.worst.empty()) total.worst = r.worst;
        }
    }
    return total;
}

}  // namespace mw
