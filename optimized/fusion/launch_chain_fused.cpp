// launch_chain, fusion lever, rung 1 (CPU): the whole chain in one loop.
//
// Change from rung 0: no dispatcher, no temporaries, one parallel region.
// Each thread takes a slice of x, and for every block of 256 floats (1 KiB,
// in L1) applies all `ops` maps one after the other with SIMD before
// writing the block to y. The op kind is chosen once per block and op, not
// per element, so the inner loops stay vector loops.
// Expected effect: bytes drop from 8n per op to 8n in all (read x once,
// write y once); the per-op fork/join and allocation disappear. The remaining
// cost is the arithmetic (2 FLOPs per element and op) plus one fork/join.
#include <omp.h>

#include <algorithm>

#include "kernels/fusion/simd.hpp"
#include "reference/fusion/fusion.hpp"

namespace mw::fusion {
namespace {

template <class V> MW_SIMD_INLINE V apply(int k, V v) {
    switch (k % 4) {
        case 0: return v * 0.75f + 0.25f;
        case 1: return v * v * 0.5f - 0.125f;
        case 2: return v < 0.0f ? v * 0.5f : v;
        default: return v * -1.25f + 0.0625f;
    }
}

template <class V> MW_SIMD_INLINE void chain_slice(const float* x, float* y, long n, int ops) {
    constexpr int W = simd::width<V>, kBlock = 256;
    alignas(64) float buf[kBlock];
    for (long i0 = 0; i0 < n; i0 += kBlock) {
        const long len = std::min<long>(kBlock, n - i0);
        const long lv = len - len % W;
        std::copy(x + i0, x + i0 + len, buf);
        for (int k = 0; k < ops; ++k) {
            for (long j = 0; j < lv; j += W) simd::store(buf + j, apply(k, simd::load<V>(buf + j)));
            for (long j = lv; j < len; ++j) buf[j] = chain_op(k, buf[j]);
        }
        std::copy(buf, buf + len, y + i0);
    }
}

Instance prepare(Problem& p) {
    const long n = p.shape["n"];
    const int ops = int(p.shape["ops"]);
    const float* x = p.in("x").as<float>();
    float* y = p.out("y").as<float>();
    auto fn = isa::pick_kernel<chain_slice<simd::f16>, chain_slice<simd::f8>>();
    Instance inst;
    inst.run = [=] {
        // Slices of whole 256-float blocks, one per thread.
#pragma omp parallel
        {
            const int t = omp_get_thread_num(), T = omp_get_num_threads();
            const long blocks = (n + 255) / 256;
            const long b0 = blocks * t / T, b1 = blocks * (t + 1) / T;
            const long i0 = std::min(n, b0 * 256), i1 = std::min(n, b1 * 256);
            if (i1 > i0) fn(x + i0, y + i0, i1 - i0, ops);
        }
    };
    return inst;
}

}  // namespace
}  // namespace mw::fusion

MW_REGISTER_VARIANT(launch_chain_fused_cpu, {
    .name = "fused", .op = "launch_chain", .lever = "fusion",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "all ops applied to an L1-resident block before it is written: one pass, one parallel "
                 "region, no temporaries",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return 8.0 * double(s["n"]); },
    .prepare = mw::fusion::prepare });
