// The model stack's element-wise layers (declared and explained in
// layers_cpu.hpp). The softmax rows reuse the fusion lever's row kernels
// (kernels/fusion/softmax_rows.hpp) and SIMD exp; SwiGLU's exp too. The rest
// are plain loops the compiler vectorizes.
#include "kernels/model/layers_cpu.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "kernels/fusion/softmax_rows.hpp"

namespace mw::model::cpu {

namespace sm = mw::fusion::softmax;
namespace simd = mw::fusion::simd;

// Decoding calls these with one row: no fork/join for work that small.
constexpr std::int64_t kParallelRows = 16;

void rmsnorm_forward(const float* x, const float* g, float* y, float* rstd, std::int64_t rows, int d, float eps) {
#pragma omp parallel for schedule(static) if (rows >= kParallelRows)
    for (std::int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * d;
        float ss = 0;
#pragma omp simd reduction(+ : ss)
        for (int i = 0; i < d; ++i) ss += xr[i] * xr[i];
        const float rs = 1.0f / std::sqrt(ss / float(d) + eps);
        rstd[r] = rs;
        float* yr = y + r * d;
#pragma omp simd
        for (int i = 0; i < d; ++i) yr[i] = xr[i] * rs * g[i];
    }
}

void rmsnorm_backward(const float* x, const float* g, const float* rstd, const float* dy, float* dx, float* dg,
                      std::int64_t rows, int d) {
    // Each thread sums its rows' share of dg privately; the shares are added
    // in thread order afterwards, so the result is the same on every run.
    std::vector<float> partial(std::size_t(omp_get_max_threads()) * d, 0.0f);
    int used = 1;
#pragma omp parallel if (rows >= kParallelRows)
    {
#pragma omp single
        used = omp_get_num_threads();
        float* dg_local = partial.data() + std::size_t(omp_get_thread_num()) * d;
#pragma omp for schedule(static)
        for (std::int64_t r = 0; r < rows; ++r) {
            const float *xr = x + r * d, *dyr = dy + r * d;
            const float rs = rstd[r];
            float dot = 0;
#pragma omp simd reduction(+ : dot)
            for (int i = 0; i < d; ++i) dot += dyr[i] * g[i] * xr[i];
            const float c = rs * rs * rs / float(d) * dot;
            float* dxr = dx + r * d;
#pragma omp simd
            for (int i = 0; i < d; ++i) {
                dxr[i] += rs * g[i] * dyr[i] - xr[i] * c;
                dg_local[i] += dyr[i] * xr[i] * rs;
            }
        }
    }
    for (int t = 0; t < used; ++t)
        for (int i = 0; i < d; ++i) dg[i] += partial[std::size_t(t) * d + i];
}

RopeTable::RopeTable(int hd_, int max_seq_, double base) : hd(hd_), max_seq(max_seq_) {
    const int half = hd / 2;
    cos.resize(std::size_t(max_seq) * half);
    sin.resize(cos.size());
    for (int p = 0; p < max_seq; ++p)
        for (int j = 0; j < half; ++j) {
            const double a = p * std::pow(base, -2.0 * j / hd);
            cos[std::size_t(p) * half + j] = float(std::cos(a));
            sin[std::size_t(p) * half + j] = float(std::sin(a));
        }
}

void rope(float* x, const int* pos, std::int64_t rows, int n_heads, const RopeTable& t, int sign) {
    const int half = t.hd / 2;
#pragma omp parallel for schedule(static) if (rows >= kParallelRows)
    for (std::int64_t r = 0; r < rows; ++r) {
        const float* cs = t.cos.data() + std::size_t(pos[r]) * half;
        const float* sn = t.sin.data() + std::size_t(pos[r]) * half;
        for (int h = 0; h < n_heads; ++h) {
            float* p = x + (r * n_heads + h) * t.hd;
#pragma omp simd
            for (int j = 0; j < half; ++j) {
                const float x0 = p[2 * j], x1 = p[2 * j + 1], s = float(sign) * sn[j];
                p[2 * j] = x0 * cs[j] - x1 * s;
                p[2 * j + 1] = x0 * s + x1 * cs[j];
            }
        }
    }
}

namespace {

// SwiGLU over one chunk, generic over the vector type (see simd.hpp).
template <class V> MW_SIMD_INLINE void swiglu_fwd_chunk(const float* a, const float* b, float* h, long n) {
    constexpr int W = simd::width<V>;
    const long nv = n - n % W;
    const V one = simd::splat<V>(1.0f);
    for (long i = 0; i < nv; i += W) {
        const V av = simd::load<V>(a + i);
        simd::store(h + i, av / (one + simd::exp(-av)) * simd::load<V>(b + i));
    }
    for (long i = nv; i < n; ++i) h[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
}
template <class V>
MW_SIMD_INLINE void swiglu_bwd_chunk(const float* a, const float* b, const float* dh, float* da, float* db, long n) {
    constexpr int W = simd::width<V>;
    const long nv = n - n % W;
    const V one = simd::splat<V>(1.0f);
    for (long i = 0; i < nv; i += W) {
        const V av = simd::load<V>(a + i), g = simd::load<V>(dh + i);
        const V s = one / (one + simd::exp(-av));
        simd::store(da + i, g * simd::load<V>(b + i) * s * (one + av * (one - s)));
        simd::store(db + i, g * av * s);
    }
    for (long i = nv; i < n; ++i) {
        const float s = 1.0f / (1.0f + std::exp(-a[i]));
        da[i] = dh[i] * b[i] * s * (1 + a[i] * (1 - s));
        db[i] = dh[i] * a[i] * s;
    }
}

// Chunks of 4096 elements dealt to the threads.
template <class F> void chunked(std::int64_t n, F f) {
    constexpr std::int64_t kChunk = 4096;
#pragma omp parallel for schedule(static) if (n > kChunk)
    for (std::int64_t i = 0; i < n; i += kChunk) f(i, std::min(kChunk, n - i));
}

template <class V> MW_SIMD_INLINE void softmax_prefix(float* s, long valid, long n, float scale) {
    for (long j = 0; j < valid; ++j) s[j] *= scale;
    const float m = sm::row_max<V>(s, valid);
    const float sum = sm::row_sum_exp<V>(s, valid, m);
    sm::row_normalize_into<V>(s, s, valid, m, 1.0f / sum);
    std::fill(s + valid, s + n, 0.0f);
}

// -log p[target] of one row, and dz = (p - onehot) * dscale.
template <class V> MW_SIMD_INLINE double xent_row(const float* z, int target, int V_, float* dz, float dscale) {
    const float m = sm::row_max<V>(z, V_);
    const float sum = sm::row_sum_exp<V>(z, V_, m);
    sm::row_normalize_into<V>(z, dz, V_, m, dscale / sum);
    dz[target] -= dscale;
    return double(m) + std::log(double(sum)) - double(z[target]);
}

}  // namespace

void swiglu_forward(const float* a, const float* b, float* h, std::int64_t n) {
    const auto fwd = isa::pick_kernel<swiglu_fwd_chunk<simd::f16>, swiglu_fwd_chunk<simd::f8>>();
    chunked(n, [&](std::int64_t i, std::int64_t len) { fwd(a + i, b + i, h + i, len); });
}

void swiglu_backward(const float* a, const float* b, const float* dh, float* da, float* db, std::int64_t n) {
    const auto bwd = isa::pick_kernel<swiglu_bwd_chunk<simd::f16>, swiglu_bwd_chunk<simd::f8>>();
    chunked(n, [&](std::int64_t i, std::int64_t len) { bwd(a + i, b + i, dh + i, da + i, db + i, len); });
}

void softmax_causal_row(float* s, long valid, long n, float scale) {
    isa::pick_kernel<softmax_prefix<simd::f16>, softmax_prefix<simd::f8>>()(s, valid, n, scale);
}

double cross_entropy(const float* z, const int* targets, std::int64_t rows, int V, float* dz, float dscale) {
    const auto xent = isa::pick_kernel<xent_row<simd::f16>, xent_row<simd::f8>>();
    double total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total) if (rows >= kParallelRows)
    for (std::int64_t r = 0; r < rows; ++r) total += xent(z + r * V, targets[r], V, dz + r * V, dscale);
    return total;
}

}  // namespace mw::model::cpu
