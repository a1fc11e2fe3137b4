// axpy, scratch lever, rung 1 (CPU): rung 0's loop on all cores, vectorized.
// Same bytes (12 per element); the loop becomes bandwidth-bound.
#include "reference/scratch/axpy.hpp"

namespace {

mw::Instance prepare_threads(mw::Problem& p) {
    const long n = p.shape["n"];
    const float *x = p.in("x").as<float>(), *y = p.in("y").as<float>();
    float* out = p.out("out").as<float>();
    mw::Instance inst;
    inst.run = [=] {
#pragma omp parallel for simd schedule(static)
        for (long i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
    };
    return inst;
}

}  // namespace

MW_REGISTER_VARIANT(axpy_threads_cpu, {
    .name = "threads", .op = "axpy", .lever = "scratch",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "OpenMP over all cores with SIMD: from one core's bandwidth to the machine's",
    .bytes = mw::scratch::axpy_bytes,
    .prepare = prepare_threads });
