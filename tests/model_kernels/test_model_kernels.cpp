// The model's element-wise kernels (kernels/model/elementwise.cuh): RMSNorm,
// RoPE, SwiGLU and the causal softmax of score rows, forward and backward;
// the residual add and the loss's dot product.
//
//   ModelKernelsMath   the backward formulas, written here in fp64, against
//                      central finite differences of the fp64 forward (so a
//                      wrong formula fails), plus negative controls: a
//                      plausible wrong formula must fail the same check;
//   ModelKernelsEmu    every kernel on the cuda-emu backend (Backend::cuda_emu:
//                      the .cu source run on the CPU) against those fp64
//                      references, odd shapes first, with the harness's
//                      tolerance model (harness/check.hpp);
//   ModelKernelsCuda   the same on the GPU; SKIPPED without one.
//
// The references below are this file's own code, written from the
// definitions in kernels/model/elementwise.hpp, not calls into the kernels'
// headers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "harness/check.hpp"
#include "harness/gpu.hpp"
#include "kernels/model/elementwise.hpp"

namespace {

using mw::Backend;
using mw::model::ElementwiseKernels;
using Vec = std::vector<double>;

constexpr double kEps = 1e-5;      // RMSNorm's epsilon
constexpr double kBase = 10000.0;  // RoPE's base

std::vector<float> random_floats(std::size_t n, unsigned seed, float lo, float hi) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(gen);
    return v;
}

Vec to_double(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

double rms(const Vec& v) {
    double s = 0;
    for (double x : v) s += x * x;
    return v.empty() ? 0.0 : std::sqrt(s / double(v.size()));
}

// --- fp64 references, from the definitions --------------------------------------------------

struct RmsNormFwd {
    Vec y, r;
};
RmsNormFwd rmsnorm_fwd(const Vec& x, const Vec& g, int rows, int d) {
    RmsNormFwd o{Vec(x.size()), Vec(rows)};
    for (int row = 0; row < rows; ++row) {
        const double* xr = &x[std::size_t(row) * d];
        double ms = 0;
        for (int i = 0; i < d; ++i) ms += xr[i] * xr[i];
        o.r[row] = 1.0 / std::sqrt(ms / d + kEps);
        for (int i = 0; i < d; ++i) o.y[std::size_t(row) * d + i] = xr[i] * o.r[row] * g[i];
    }
    return o;
}

// dx and dg (dg starting from dg0); `dx_terms`: |r g dy| + |x r^3/d S| per
// element, the size of what cancels in dx (for d = 1 nearly everything:
// x/|x| has no gradient); `drop_projection` is the negative control (forgets
// the second term).
struct RmsNormBwd {
    Vec dx, dg, dx_terms;
};
RmsNormBwd rmsnorm_bwd(const Vec& x, const Vec& g, const Vec& dy, const Vec& dg0, int rows, int d,
                       bool drop_projection = false) {
    RmsNormBwd o{Vec(x.size()), dg0, Vec(x.size())};
    const Vec r = rmsnorm_fwd(x, g, rows, d).r;
    for (int row = 0; row < rows; ++row) {
        const std::size_t b = std::size_t(row) * d;
        double S = 0;
        for (int j = 0; j < d; ++j) S += dy[b + j] * g[j] * x[b + j];
        const double c = drop_projection ? 0.0 : r[row] * r[row] * r[row] / d * S;
        for (int i = 0; i < d; ++i) {
            o.dx[b + i] = r[row] * g[i] * dy[b + i] - x[b + i] * c;
            o.dx_terms[b + i] = std::fabs(r[row] * g[i] * dy[b + i]) + std::fabs(x[b + i] * c);
            o.dg[i] += dy[b + i] * x[b + i] * r[row];
        }
    }
    return o;
}

// The fp32 angle of the definition: (float)p * inv_freq[j], inv_freq from double.
float rope_angle(std::int32_t p, int j, int hd) {
    const float inv_freq = static_cast<float>(std::pow(kBase, -2.0 * j / hd));
    return static_cast<float>(p) * inv_freq;
}

// Turns every pair by sign * theta; `terms`: |x0 cos| + |x1 sin| per output.
Vec rope_ref(const Vec& x, const std::vector<std::int32_t>& pos, int tokens, int heads, int hd, double sign,
             Vec* terms = nullptr) {
    Vec y(x.size());
    if (terms) terms->assign(x.size(), 0.0);
    for (int t = 0; t < tokens; ++t)
        for (int h = 0; h < heads; ++h)
            for (int j = 0; j < hd / 2; ++j) {
                const double th = rope_angle(pos[t], j, hd);
                const double c = std::cos(th), s = sign * std::sin(th);
                const std::size_t k = (std::size_t(t) * heads + h) * hd + 2 * j;
                y[k] = x[k] * c - x[k + 1] * s;
                y[k + 1] = x[k] * s + x[k + 1] * c;
                if (terms) {
                    (*terms)[k] = std::fabs(x[k] * c) + std::fabs(x[k + 1] * s);
                    (*terms)[k + 1] = std::fabs(x[k] * s) + std::fabs(x[k + 1] * c);
                }
            }
    return y;
}

double sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }
double silu(double a) { return a / (1.0 + std::exp(-a)); }

Vec swiglu_fwd(const Vec& a, const Vec& b) {
    Vec h(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) h[i] = silu(a[i]) * b[i];
    return h;
}

struct SwiGluBwd {
    Vec da, db, da_terms;
};
SwiGluBwd swiglu_bwd(const Vec& a, const Vec& b, const Vec& dh, bool wrong = false) {
    SwiGluBwd o{Vec(a.size()), Vec(a.size()), Vec(a.size())};
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double s = sigmoid(a[i]);
        // The negative control: the derivative of sigmoid, not of silu.
        const double dsilu = wrong ? s * (1 - s) : s * (1 + a[i] * (1 - s));
        o.da[i] = dh[i] * b[i] * dsilu;
        o.da_terms[i] = std::fabs(dh[i] * b[i] * s) * (1 + std::fabs(a[i] * (1 - s)));
        o.db[i] = dh[i] * silu(a[i]);
    }
    return o;
}

// Causal softmax of `mats` [n, n] matrices of scores, row i of each over
// s[0..i] scaled; zeros above the diagonal.
Vec softmax_causal_fwd(const Vec& s, int mats, int n, double scale) {
    Vec p(s.size(), 0.0);
    for (int r = 0; r < mats * n; ++r) {
        const std::size_t b = std::size_t(r) * n;
        const int valid = r % n + 1;
        double m = -INFINITY, sum = 0;
        for (int j = 0; j < valid; ++j) m = std::max(m, s[b + j] * scale);
        for (int j = 0; j < valid; ++j) sum += std::exp(s[b + j] * scale - m);
        for (int j = 0; j < valid; ++j) p[b + j] = std::exp(s[b + j] * scale - m) / sum;
    }
    return p;
}

// dS from P and dP; `terms`: |p dP| + |p rowsum(dP p)| scaled, what cancels;
// `wrong` (the negative control) forgets the row sum.
Vec softmax_causal_bwd(const Vec& p, const Vec& dp, int mats, int n, double scale, Vec* terms = nullptr,
                       bool wrong = false) {
    Vec ds(p.size(), 0.0);
    if (terms) terms->assign(p.size(), 0.0);
    for (int r = 0; r < mats * n; ++r) {
        const std::size_t b = std::size_t(r) * n;
        const int valid = r % n + 1;
        double dot = 0;
        for (int j = 0; j < valid; ++j) dot += dp[b + j] * p[b + j];
        if (wrong) dot = 0;
        for (int j = 0; j < valid; ++j) {
            ds[b + j] = p[b + j] * (dp[b + j] - dot) * scale;
            if (terms) (*terms)[b + j] = (std::fabs(p[b + j] * dp[b + j]) + std::fabs(p[b + j] * dot)) * scale;
        }
    }
    return ds;
}

// --- finite differences ----------------------------------------------------------------------

// The largest |analytic - numeric| / (|analytic| + rms(analytic) + 1e-12)
// over all k, where numeric is the central difference of loss() in x[k].
double fd_error(Vec& x, const Vec& analytic, const std::function<double()>& loss) {
    const double scale = rms(analytic) + 1e-12;
    double worst = 0;
    for (std::size_t k = 0; k < x.size(); ++k) {
        const double keep = x[k], h = 1e-5 * std::max(1.0, std::fabs(keep));
        x[k] = keep + h;
        const double up = loss();
        x[k] = keep - h;
        const double down = loss();
        x[k] = keep;
        const double numeric = (up - down) / (2 * h);
        worst = std::max(worst, std::fabs(analytic[k] - numeric) / (std::fabs(analytic[k]) + scale));
    }
    return worst;
}

double dot(const Vec& a, const Vec& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

// Central differences in fp64 agree with a right formula to ~1e-9 here; a
// wrong one is off by O(1).
constexpr double kFdTol = 1e-6;

TEST(ModelKernelsMath, RmsNormBackwardMatchesFiniteDifferences) {
    for (auto [rows, d] : {std::pair{1, 1}, {3, 1}, {2, 7}, {3, 33}}) {
        Vec x = to_double(random_floats(std::size_t(rows) * d, 1, -1, 1));
        Vec g = to_double(random_floats(d, 2, -1.5f, 1.5f));
        const Vec w = to_double(random_floats(x.size(), 3, -1, 1));  // dL/dy
        auto loss = [&] { return dot(w, rmsnorm_fwd(x, g, rows, d).y); };
        const RmsNormBwd b = rmsnorm_bwd(x, g, w, Vec(d, 0.0), rows, d);
        EXPECT_LT(fd_error(x, b.dx, loss), kFdTol) << "dx, rows " << rows << " d " << d;
        EXPECT_LT(fd_error(g, b.dg, loss), kFdTol) << "dg, rows " << rows << " d " << d;
        // Negative control: without the projection term dx is wrong.
        const RmsNormBwd wrong = rmsnorm_bwd(x, g, w, Vec(d, 0.0), rows, d, /*drop_projection=*/true);
        EXPECT_GT(fd_error(x, wrong.dx, loss), 1e-3) << "the check cannot tell a wrong dx, rows " << rows << " d " << d;
    }
}

TEST(ModelKernelsMath, RopeBackwardMatchesFiniteDifferences) {
    const int tokens = 3, heads = 2, hd = 8;
    const std::vector<std::int32_t> pos = {0, 5, 1234};
    Vec x = to_double(random_floats(std::size_t(tokens) * heads * hd, 4, -1, 1));
    const Vec w = to_double(random_floats(x.size(), 5, -1, 1));
    auto loss = [&] { return dot(w, rope_ref(x, pos, tokens, heads, hd, +1)); };
    const Vec dx = rope_ref(w, pos, tokens, heads, hd, -1);  // the backward: turn dy by -theta
    EXPECT_LT(fd_error(x, dx, loss), kFdTol);
    // Negative control: turning dy by +theta again is wrong.
    EXPECT_GT(fd_error(x, rope_ref(w, pos, tokens, heads, hd, +1), loss), 1e-3);
}

TEST(ModelKernelsMath, SwiGluBackwardMatchesFiniteDifferences) {
    Vec a = to_double(random_floats(64, 6, -8, 8));
    Vec b = to_double(random_floats(64, 7, -1, 1));
    const Vec w = to_double(random_floats(64, 8, -1, 1));
    auto loss = [&] { return dot(w, swiglu_fwd(a, b)); };
    const SwiGluBwd g = swiglu_bwd(a, b, w);
    EXPECT_LT(fd_error(a, g.da, loss), kFdTol);
    EXPECT_LT(fd_error(b, g.db, loss), kFdTol);
    EXPECT_GT(fd_error(a, swiglu_bwd(a, b, w, /*wrong=*/true).da, loss), 1e-3);
}

TEST(ModelKernelsMath, SoftmaxCausalBackwardMatchesFiniteDifferences) {
    const int mats = 2, n = 5;
    const double scale = 0.35;
    Vec s = to_double(random_floats(std::size_t(mats) * n * n, 9, -3, 3));
    const Vec w = to_double(random_floats(s.size(), 10, -1, 1));  // dL/dP
    auto loss = [&] { return dot(w, softmax_causal_fwd(s, mats, n, scale)); };
    const Vec p = softmax_causal_fwd(s, mats, n, scale);
    EXPECT_LT(fd_error(s, softmax_causal_bwd(p, w, mats, n, scale), loss), kFdTol);
    // Negative control: without the row sum dS is wrong.
    EXPECT_GT(fd_error(s, softmax_causal_bwd(p, w, mats, n, scale, nullptr, /*wrong=*/true), loss), 1e-3);
}

TEST(ModelKernelsMath, InvFreqTableIsTheDefinition) {
    for (int hd : {2, 8, 34, 128}) {
        const std::vector<float> f = mw::model::rope_inv_freq(hd);
        ASSERT_EQ(f.size(), std::size_t(hd / 2));
        EXPECT_EQ(f[0], 1.0f);
        for (int j = 0; j < hd / 2; ++j)
            EXPECT_EQ(f[j], static_cast<float>(std::pow(10000.0, -2.0 * j / hd))) << "hd " << hd << " j " << j;
    }
}

// --- the kernels, on a backend ---------------------------------------------------------------

// A device array of the backend, freed on scope exit. Outputs start as NaN,
// so an element a kernel never writes fails the check.
template <class T>
class DeviceArray {
public:
    DeviceArray(const ElementwiseKernels* k, const std::vector<T>& host) : k_(k), n_(host.size()) {
        p_ = static_cast<T*>(k_->alloc(bytes()));
        k_->copy_to_device(p_, host.data(), bytes());
    }
    static DeviceArray poisoned(const ElementwiseKernels* k, std::size_t n) {
        return DeviceArray(k, std::vector<T>(n, std::numeric_limits<T>::quiet_NaN()));
    }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray(DeviceArray&& o) noexcept : k_(o.k_), n_(o.n_), p_(o.p_) { o.p_ = nullptr; }
    ~DeviceArray() {
        if (p_) k_->free(p_);
    }
    T* get() const { return p_; }
    std::vector<T> host() const {
        std::vector<T> v(n_);
        k_->synchronize();
        k_->copy_to_host(v.data(), p_, bytes());
        return v;
    }

private:
    std::size_t bytes() const { return n_ * sizeof(T); }
    const ElementwiseKernels* k_;
    std::size_t n_;
    T* p_ = nullptr;
};

// The check of the harness (harness/check.hpp) with reduction length L, its
// absolute part grown from the rms of the reference to the rms of the terms
// that cancel in it (where they are larger): the error scales with the terms.
void expect_close(const std::string& name, const std::vector<float>& got, const Vec& ref, const Vec& terms, double L,
                  const std::string& where) {
    mw::Buffer out = mw::Buffer::make(name, mw::DType::f32, got.size());
    std::memcpy(out.as<float>(), got.data(), got.size() * sizeof(float));
    const double rr = rms(ref), rt = rms(terms);
    const double scale = rr > 0 ? std::max(1.0, rt / rr) : 1.0;
    const mw::CheckResult r = mw::check_close(out, ref, mw::DType::f32, L, scale);
    EXPECT_TRUE(r.ok) << name << " at " << where << ": " << r.message;
}

// The backend's kernels, or SKIPPED: not built, or (cuda) no GPU here.
#define MW_KERNELS_OR_SKIP(backend, k)                                                                   \
    const ElementwiseKernels* k = mw::model::elementwise_kernels(backend);                               \
    if (!k) GTEST_SKIP() << mw::to_string(backend) << " backend not built";                             \
    if ((backend) == Backend::cuda && mw::gpu_count() == 0) GTEST_SKIP() << mw::gpu_absent_reason()

const int kRows[] = {1, 7, 33};
const int kDims[] = {1, 7, 33, 127, 129, 300};  // 129, 300: past one and two strides of a 128-thread block

void rmsnorm_on(Backend be, const ElementwiseKernels* k) {
    unsigned seed = 10;
    for (int rows : kRows)
        for (int d : kDims) {
            const std::string where = mw::to_string(be) + " rows " + std::to_string(rows) + " d " + std::to_string(d);
            const std::size_t n = std::size_t(rows) * d;
            const auto x = random_floats(n, ++seed, -1, 1), g = random_floats(d, ++seed, -1.5f, 1.5f);
            const auto dy = random_floats(n, ++seed, -1, 1), dg0 = random_floats(d, ++seed, -1, 1);

            DeviceArray<float> x_d(k, x), g_d(k, g), dy_d(k, dy), dg_d(k, dg0);
            auto y_d = DeviceArray<float>::poisoned(k, n), rstd_d = DeviceArray<float>::poisoned(k, rows);
            auto dx_d = DeviceArray<float>::poisoned(k, n);
            k->rmsnorm_forward(x_d.get(), g_d.get(), y_d.get(), rstd_d.get(), rows, d, mw::model::kRmsNormEps,
                               nullptr);
            k->rmsnorm_backward(x_d.get(), g_d.get(), rstd_d.get(), dy_d.get(), dx_d.get(), dg_d.get(), rows, d,
                                nullptr);

            const RmsNormFwd f = rmsnorm_fwd(to_double(x), to_double(g), rows, d);
            const RmsNormBwd b = rmsnorm_bwd(to_double(x), to_double(g), to_double(dy), to_double(dg0), rows, d);
            expect_close("y", y_d.host(), f.y, f.y, d, where);
            expect_close("rstd", rstd_d.host(), f.r, f.r, d, where);
            expect_close("dx", dx_d.host(), b.dx, b.dx_terms, d, where);
            expect_close("dg", dg_d.host(), b.dg, b.dg, rows, where);  // a plain reduction over rows
        }
}

void rope_on(Backend be, const ElementwiseKernels* k) {
    unsigned seed = 100;
    for (int tokens : kRows)
        for (int heads : {1, 3})
            for (int hd : {2, 8, 34}) {
                const std::string where = mw::to_string(be) + " tokens " + std::to_string(tokens) + " heads " +
                                          std::to_string(heads) + " hd " + std::to_string(hd);
                const std::size_t n = std::size_t(tokens) * heads * hd;
                const auto x = random_floats(n, ++seed, -1, 1), dy = random_floats(n, ++seed, -1, 1);
                // Positions 0 (no turn) and far ones (angles of thousands of radians) included.
                std::vector<std::int32_t> pos(tokens);
                std::mt19937 gen(++seed);
                for (auto& p : pos) p = std::int32_t(gen() % 8192);
                pos[0] = 0;
                if (tokens > 1) pos.back() = 100000;

                DeviceArray<float> x_d(k, x), dy_d(k, dy), inv_freq_d(k, mw::model::rope_inv_freq(hd));
                DeviceArray<std::int32_t> pos_d(k, pos);
                auto y_d = DeviceArray<float>::poisoned(k, n), dx_d = DeviceArray<float>::poisoned(k, n);
                k->rope_forward(x_d.get(), y_d.get(), pos_d.get(), inv_freq_d.get(), tokens, heads, hd, nullptr);
                k->rope_backward(dy_d.get(), dx_d.get(), pos_d.get(), inv_freq_d.get(), tokens, heads, hd, nullptr);

                Vec fwd_terms, bwd_terms;
                const Vec y = rope_ref(to_double(x), pos, tokens, heads, hd, +1, &fwd_terms);
                const Vec dxr = rope_ref(to_double(dy), pos, tokens, heads, hd, -1, &bwd_terms);
                const auto got_y = y_d.host();
                expect_close("y", got_y, y, fwd_terms, 1, where);
                expect_close("dx", dx_d.host(), dxr, bwd_terms, 1, where);

                // In place (y == x) gives the same bits.
                DeviceArray<float> inplace(k, x);
                k->rope_forward(inplace.get(), inplace.get(), pos_d.get(), inv_freq_d.get(), tokens, heads, hd, nullptr);
                const auto got_inplace = inplace.host();
                EXPECT_EQ(std::memcmp(got_inplace.data(), got_y.data(), n * sizeof(float)), 0) << "in place, " << where;
            }
}

void swiglu_on(Backend be, const ElementwiseKernels* k) {
    unsigned seed = 1000;
    for (int rows : kRows)
        for (int f : kDims) {
            const std::string where = mw::to_string(be) + " rows " + std::to_string(rows) + " f " + std::to_string(f);
            const std::size_t n = std::size_t(rows) * f;
            // a spans silu's curved part and both saturated ends.
            const auto a = random_floats(n, ++seed, -12, 12), b = random_floats(n, ++seed, -1, 1);
            const auto dh = random_floats(n, ++seed, -1, 1);
            DeviceArray<float> a_d(k, a), b_d(k, b), dh_d(k, dh);
            auto h_d = DeviceArray<float>::poisoned(k, n), da_d = DeviceArray<float>::poisoned(k, n);
            auto db_d = DeviceArray<float>::poisoned(k, n);
            k->swiglu_forward(a_d.get(), b_d.get(), h_d.get(), std::int64_t(n), nullptr);
            k->swiglu_backward(a_d.get(), b_d.get(), dh_d.get(), da_d.get(), db_d.get(), std::int64_t(n), nullptr);

            const Vec h = swiglu_fwd(to_double(a), to_double(b));
            const SwiGluBwd g = swiglu_bwd(to_double(a), to_double(b), to_double(dh));
            expect_close("h", h_d.host(), h, h, 1, where);
            expect_close("da", da_d.host(), g.da, g.da_terms, 1, where);
            expect_close("db", db_d.host(), g.db, g.db, 1, where);
        }
}

// dg's summation order is fixed (no atomics): the same inputs give the same bits.
void rmsnorm_dg_deterministic_on(const ElementwiseKernels* k) {
    const int rows = 300, d = 70;
    const std::size_t n = std::size_t(rows) * d;
    DeviceArray<float> x(k, random_floats(n, 1, -1, 1)), g(k, random_floats(d, 2, -1, 1)), dy(k, random_floats(n, 3, -1, 1));
    auto y = DeviceArray<float>::poisoned(k, n), rstd = DeviceArray<float>::poisoned(k, rows);
    auto dx = DeviceArray<float>::poisoned(k, n);
    k->rmsnorm_forward(x.get(), g.get(), y.get(), rstd.get(), rows, d, mw::model::kRmsNormEps, nullptr);
    std::vector<std::vector<float>> runs;
    for (int run = 0; run < 3; ++run) {
        DeviceArray<float> dg(k, std::vector<float>(d, 0.0f));
        k->rmsnorm_backward(x.get(), g.get(), rstd.get(), dy.get(), dx.get(), dg.get(), rows, d, nullptr);
        runs.push_back(dg.host());
    }
    for (int run = 1; run < 3; ++run)
        EXPECT_EQ(std::memcmp(runs[run].data(), runs[0].data(), d * sizeof(float)), 0) << "run " << run;
}

const int kSeqs[] = {1, 7, 33, 127, 129};  // 129: past one stride of a 128-thread block

void softmax_causal_on(Backend be, const ElementwiseKernels* k) {
    unsigned seed = 2000;
    for (int mats : {1, 3})
        for (int n : kSeqs) {
            const std::string where = mw::to_string(be) + " matrices " + std::to_string(mats) + " n " + std::to_string(n);
            const int rows = mats * n;
            const std::size_t count = std::size_t(rows) * n;
            const double scale = 1.0 / std::sqrt(double(n + 3));
            // Scores spread wide enough that exp would overflow without the max.
            auto s = random_floats(count, ++seed, -200, 200);
            const auto dp = random_floats(count, ++seed, -1, 1);
            DeviceArray<float> s_d(k, s), dp_d(k, dp);
            k->softmax_causal_forward(s_d.get(), rows, n, float(scale), nullptr);
            const auto p = s_d.host();
            // The backward of the kernel's own P, so only the backward is judged here.
            k->softmax_causal_backward(s_d.get(), dp_d.get(), rows, n, float(scale), nullptr);

            const Vec p_ref = softmax_causal_fwd(to_double(s), mats, n, scale);
            Vec terms;
            const Vec ds_ref = softmax_causal_bwd(to_double(p), to_double(dp), mats, n, scale, &terms);
            expect_close("p", p, p_ref, p_ref, n, where);
            expect_close("ds", dp_d.host(), ds_ref, terms, n, where);
            for (int r = 0; r < rows; ++r)
                for (int j = r % n + 1; j < n; ++j)
                    ASSERT_EQ(p[std::size_t(r) * n + j], 0.0f) << "above the diagonal, row " << r << " col " << j << ", " << where;
        }
}

void add_on(Backend be, const ElementwiseKernels* k) {
    unsigned seed = 3000;
    for (int n : {1, 7, 33, 127, 129, 70001}) {
        const std::string where = mw::to_string(be) + " n " + std::to_string(n);
        const auto a = random_floats(std::size_t(n), ++seed, -1, 1), b = random_floats(std::size_t(n), ++seed, -1, 1);
        Vec y(a.size()), terms(a.size());
        for (std::size_t i = 0; i < a.size(); ++i) y[i] = double(a[i]) + b[i], terms[i] = std::fabs(a[i]) + std::fabs(b[i]);
        DeviceArray<float> a_d(k, a), b_d(k, b);
        auto y_d = DeviceArray<float>::poisoned(k, std::size_t(n));
        k->add(a_d.get(), b_d.get(), y_d.get(), n, nullptr);
        const auto got = y_d.host();
        expect_close("y", got, y, terms, 1, where);
        // In place into either operand: the same bits.
        k->add(a_d.get(), b_d.get(), b_d.get(), n, nullptr);
        k->add(a_d.get(), a_d.get(), a_d.get(), n, nullptr);  // a + a
        const auto in_b = b_d.host(), twice_a = a_d.host();
        EXPECT_EQ(std::memcmp(in_b.data(), got.data(), got.size() * sizeof(float)), 0) << "in place, " << where;
        for (int i = 0; i < n; ++i) ASSERT_EQ(twice_a[std::size_t(i)], 2 * a[std::size_t(i)]) << where;
    }
}

void dot_on(Backend be, const ElementwiseKernels* k) {
    unsigned seed = 4000;
    for (int n : {0, 1, 7, 33, 127, 129, 70001}) {
        const std::string where = mw::to_string(be) + " n " + std::to_string(n);
        const auto a = random_floats(std::size_t(n), ++seed, -1, 1), b = random_floats(std::size_t(n), ++seed, -1, 1);
        double want = 0, terms = 0;
        for (int i = 0; i < n; ++i) want += double(a[std::size_t(i)]) * b[std::size_t(i)], terms += std::fabs(a[std::size_t(i)] * b[std::size_t(i)]);
        DeviceArray<float> a_d(k, a.empty() ? std::vector<float>{0.0f} : a), b_d(k, b.empty() ? std::vector<float>{0.0f} : b);
        std::vector<float> runs;
        for (int run = 0; run < 2; ++run) {
            auto out = DeviceArray<float>::poisoned(k, 1);
            k->dot(a_d.get(), b_d.get(), out.get(), n, nullptr);
            runs.push_back(out.host()[0]);
        }
        if (n == 0) {
            EXPECT_EQ(runs[0], 0.0f) << where;
            continue;
        }
        expect_close("dot", {runs[0]}, {want}, {terms}, 1, where);  // summed in double: one rounding
        EXPECT_EQ(std::memcmp(&runs[0], &runs[1], sizeof(float)), 0) << "two runs differ, " << where;
    }
}

void bad_sizes_on(const ElementwiseKernels* k) {
    EXPECT_THROW(k->rope_forward(nullptr, nullptr, nullptr, nullptr, 1, 1, 7, nullptr), std::invalid_argument);
    EXPECT_THROW(k->rmsnorm_forward(nullptr, nullptr, nullptr, nullptr, 1, 0, 1e-5f, nullptr), std::invalid_argument);
    EXPECT_THROW(k->swiglu_forward(nullptr, nullptr, nullptr, -1, nullptr), std::invalid_argument);
    EXPECT_THROW(k->softmax_causal_forward(nullptr, 10, 7, 1.0f, nullptr), std::invalid_argument);  // not whole matrices
    EXPECT_THROW(k->softmax_causal_backward(nullptr, nullptr, 7, 0, 1.0f, nullptr), std::invalid_argument);
    EXPECT_THROW(k->add(nullptr, nullptr, nullptr, -1, nullptr), std::invalid_argument);
    EXPECT_THROW(k->dot(nullptr, nullptr, nullptr, -1, nullptr), std::invalid_argument);
    // Nothing to do is not an error, and touches no memory.
    k->rmsnorm_forward(nullptr, nullptr, nullptr, nullptr, 0, 16, 1e-5f, nullptr);
    k->rope_forward(nullptr, nullptr, nullptr, nullptr, 0, 2, 8, nullptr);
    k->swiglu_backward(nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr);
    k->softmax_causal_forward(nullptr, 0, 7, 1.0f, nullptr);
    k->add(nullptr, nullptr, nullptr, 0, nullptr);
}

// One suite per backend; "Emu" in the name puts the cuda-emu suite in the
// AddressSanitizer twin (tests/CMakeLists.txt: ctest runs it as asan:<test>).
#define MW_MODEL_KERNEL_SUITE(Suite, backend)                                              \
    TEST(Suite, RmsNormForwardBackward) {                                                  \
        MW_KERNELS_OR_SKIP(backend, k);                                                    \
        rmsnorm_on(backend, k);                                                            \
    }                                                                                      \
    TEST(Suite, RopeForwardBackward) {                                                     \
        MW_KERNELS_OR_SKIP(backend, k);                                                    \
        rope_on(backend, k);                                                               \
    }                                                                                      \
    TEST(Suite, SwiGluForwardBackward) {                                                   \
        MW_KERNELS_OR_SKIP(backend, k);                                                    \
        swiglu_on(backend, k);                                                             \
    }                                                                                      \
    TEST(Suite, SoftmaxCausalForwardBackward) {                                            \
        MW_KERNELS_OR_SKIP(backend, k);                                                    \
        softmax_causal_on(backend, k);                                                     \
    }                                                                                      \
    TEST(Suite, ResidualAdd) {                                                             \
        MW_KERNELS_OR_SKIP(backend, k);                                                    \
        add_on(backend, k);                                                                \
    }                                                                                      \
    TEST(Suite, LossDot) {                                                                 \
        MW_KERNELS_OR_SKIP(backend, k);                                                    \
        dot_on(backend, k);                                                                \
    }                                                                                      \
    TEST(Suite, RmsNormDgIsDeterministic) {                                                \
        MW_KERNELS_OR_SKIP(backend, k);                                                    \
        rmsnorm_dg_deterministic_on(k);                                                    \
    }                                                                                      \
    TEST(Suite, RejectsBadSizes) {                                                         \
        MW_KERNELS_OR_SKIP(backend, k);                                                    \
        bad_sizes_on(k);                                                                   \
    }

MW_MODEL_KERNEL_SUITE(ModelKernelsEmu, Backend::cuda_emu)
MW_MODEL_KERNEL_SUITE(ModelKernelsCuda, Backend::cuda)

// A build with the emulator must have registered its table (a missing
// registration would otherwise read as a skip).
TEST(ModelKernelsRegistry, EmuTableIsRegistered) {
#ifdef MEMWALL_TEST_EXPECT_EMU
    EXPECT_NE(mw::model::elementwise_kernels(Backend::cuda_emu), nullptr);
#endif
    EXPECT_EQ(mw::model::elementwise_kernels(Backend::cpu), nullptr);
    EXPECT_EQ(mw::model::elementwise_kernels(Backend::cuda) != nullptr, mw::cuda_backend_built());
}

}  // namespace
