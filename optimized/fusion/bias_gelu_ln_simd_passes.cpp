// bias_gelu_ln, fusion lever, rung 1 (CPU): rung 0's five passes, SIMD math.
//
// Change from rung 0: nothing about the memory traffic. Every pass still
// sweeps a full-size temporary (8 sweeps of rows*hidden*4 bytes), but each
// pass now runs 16-wide (AVX-512; 8-wide AVX2 fallback) and GELU uses the
// polynomial 2^y of simd.hpp (exp2_n) instead of a scalar libm tanh per
// element.
// Expected effect: the same bytes as rung 0 at a fraction of its compute
// time, so this rung sits where the passes are DRAM-bound: ~8 x 32 MiB at
// ~19 GB/s ≈ 14 ms at 2048 x 4096. It exists so that the step to rung 2
// measures fusion alone (bytes: 8 sweeps -> 2), not fusion plus SIMD.
#include <omp.h>

#include <memory>
#include <vector>

#include "kernels/fusion/bias_gelu_ln.hpp"
#include "kernels/fusion/simd.hpp"
#include "reference/fusion/fusion.hpp"

namespace mw::fusion {
namespace {

struct Args {
    const float *x, *bias, *gamma, *beta;
    float *t1, *t2, *mean, *rstd, *y;
    long H;
};

// Pass `pass` (1..5) on row r; each pass reads and writes whole rows of the
// temporaries, exactly as rung 0 does.
template <class V> MW_SIMD_INLINE void run_pass(int pass, const Args& a, long r) {
    constexpr int W = simd::width<V>;
    const long H = a.H, Hv = H - H % W;
    const float* x = a.x + r * H;
    float* t1 = a.t1 + r * H;
    float* t2 = a.t2 + r * H;
    if (pass == 1) {
        for (long j = 0; j < Hv; j += W) simd::store(t1 + j, simd::load<V>(x + j) + simd::load<V>(a.bias + j));
        for (long j = Hv; j < H; ++j) t1[j] = x[j] + a.bias[j];
    } else if (pass == 2) {
        for (long j = 0; j < Hv; j += W) simd::store(t2 + j, simd::gelu(simd::load<V>(t1 + j)));
        for (long j = Hv; j < H; ++j) t2[j] = simd::gelu_scalar(t1[j]);
    } else if (pass == 3) {
        V s{};
        for (long j = 0; j < Hv; j += W) s += simd::load<V>(t2 + j);
        float tail = 0;
        for (long j = Hv; j < H; ++j) tail += t2[j];
        a.mean[r] = (simd::hsum(s) + tail) / float(H);
    } else if (pass == 4) {
        const float m = a.mean[r];
        V q{};
        for (long j = 0; j < Hv; j += W) {
            const V d = simd::load<V>(t2 + j) - m;
            q += d * d;
        }
        float tail = 0;
        for (long j = Hv; j < H; ++j) tail += (t2[j] - m) * (t2[j] - m);
        a.rstd[r] = 1.0f / std::sqrt((simd::hsum(q) + tail) / float(H) + kLnEps);
    } else {
        const float m = a.mean[r], rs = a.rstd[r];
        float* y = a.y + r * H;
        for (long j = 0; j < Hv; j += W)
            simd::store(y + j, (simd::load<V>(t2 + j) - m) * rs * simd::load<V>(a.gamma + j) + simd::load<V>(a.beta + j));
        for (long j = Hv; j < H; ++j) y[j] = (t2[j] - m) * rs * a.gamma[j] + a.beta[j];
    }
}

Instance prepare(Problem& p) {
    const long R = p.shape["rows"], H = p.shape["hidden"];
    auto t1 = std::make_shared<std::vector<float>>(R * H);
    auto t2 = std::make_shared<std::vector<float>>(R * H);
    auto stats = std::make_shared<std::vector<float>>(2 * R);
    const float* x = p.in("x").as<float>();
    const float* bias = p.in("bias").as<float>();
    const float* gamma = p.in("gamma").as<float>();
    const float* beta = p.in("beta").as<float>();
    float* y = p.out("y").as<float>();
    Instance inst;
    inst.run = [=] { bias_gelu_ln_passes(x, bias, gamma, beta, t1->data(), t2->data(), stats->data(), y, R, H); };
    return inst;
}

}  // namespace

void bias_gelu_ln_passes(const float* x, const float* bias, const float* gamma, const float* beta, float* t1,
                         float* t2, float* stats, float* y, long R, long H) {
    const Args a{x, bias, gamma, beta, t1, t2, stats, stats + R, y, H};
    auto pass = isa::pick_kernel<run_pass<simd::f16>, run_pass<simd::f8>>();
    for (int k = 1; k <= 5; ++k) {
#pragma omp parallel for schedule(static)
        for (long r = 0; r < R; ++r) pass(k, a, r);
    }
}
}  // namespace mw::fusion

MW_REGISTER_VARIANT(bias_gelu_ln_simd_passes_cpu, {
    .name = "simd_passes", .op = "bias_gelu_ln", .lever = "fusion",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "the same five passes and temporaries as naive, each 16-wide, GELU by a polynomial 2^y: "
                 "compute shrinks, the 8 DRAM sweeps remain",
    .needs = {"avx2"},
    .bytes = mw::fusion::bias_gelu_ln_bytes_unfused,
    .prepare = mw::fusion::prepare });
