// ln_gelu, fusion lever, rung 1 (CPU): the epilogue fused into the GEMM.
//
// Change from rung 0: the same packed AVX-512 GEMM pieces (packing and
// micro-kernel of kernels/vectorization/gemm_cpu.hpp), but the
// loop nest is reorganized around row strips of Y: B (= W) is packed once
// for all of n, then each thread takes MC = 96 rows at a time, computes the
// whole 96 x n strip (384 KiB at n = 1024, in L2) and applies bias + GELU +
// LayerNorm to it right away with bias_gelu_ln's fused row kernel, writing
// the finished rows to Y with streaming stores.
// Expected effect: the 8 epilogue sweeps of m*n*4 bytes through DRAM and the
// three m x n temporaries disappear; the GEMM itself is unchanged, so the
// saving is bounded by the epilogue's share of rung 0's time.
// (LayerNorm needs whole rows, so a strip spans all n columns: the packed W
// is k x n floats, 4 MiB at the default shape, shared by the threads.)
#include <omp.h>

#include <algorithm>
#include <memory>

#include "kernels/fusion/bias_gelu_ln.hpp"
#include "kernels/vectorization/gemm_cpu.hpp"
#include "reference/fusion/fusion.hpp"

namespace mw::fusion {
namespace {

struct Args {
    const float *X, *W, *bias, *gamma, *beta;
    float* Y;
    int M, N, K;
};

void fused(const Args& g, float* Bp, float* Ap_all, long a_floats, float* rows_all, long row_stride) {
    const gemm::cpu::Kernel& k = gemm::cpu::select_kernel();
#pragma omp parallel
    {
        // Pack W once, every NC block and KC slice (threads share the panels).
#pragma omp for collapse(2) schedule(dynamic, 4)
        for (int jc = 0; jc < (g.N + k.nc - 1) / k.nc; ++jc)
            for (int pc = 0; pc < g.K; pc += k.kc) {
                const int j0 = jc * k.nc, nc = std::min(k.nc, g.N - j0), kc = std::min(k.kc, g.K - pc);
                float* dst = Bp + long(j0) * g.K;  // block jc holds K x nc, slices one after the other
                gemm::cpu::pack_b(g.W + long(pc) * g.N + j0, g.N, kc, nc, k.nr,
                                  gemm::cpu::packed_b_slice(dst, pc, nc, k.nr));
            }
        float* Ap = Ap_all + a_floats * omp_get_thread_num();
        float* buf = rows_all + row_stride * omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
        for (int ic = 0; ic < g.M; ic += k.mc) {
            const int mc = std::min(k.mc, g.M - ic);
            float* strip = g.Y + long(ic) * g.N;
            for (int j0 = 0; j0 < g.N; j0 += k.nc) {
                const int nc = std::min(k.nc, g.N - j0);
                for (int pc = 0; pc < g.K; pc += k.kc) {
                    const int kc = std::min(k.kc, g.K - pc);
                    gemm::cpu::pack_a(g.X + long(ic) * g.K + pc, g.K, mc, kc, k.mr, Ap);
                    gemm::cpu::macro_kernel(k, mc, nc, kc, Ap, gemm::cpu::packed_b_slice(Bp + long(j0) * g.K, pc, nc, k.nr),
                                            strip + j0, g.N, pc > 0);
                }
            }
            // The strip is complete and still in L2: finish it in place.
            bias_gelu_ln_rows(strip, g.bias, g.gamma, g.beta, strip, mc, g.N, buf);
        }
    }
}

Instance prepare(Problem& p) {
    const Args g{p.in("X").as<float>(), p.in("W").as<float>(), p.in("bias").as<float>(), p.in("gamma").as<float>(),
                 p.in("beta").as<float>(), p.out("Y").as<float>(), int(p.shape["m"]), int(p.shape["n"]),
                 int(p.shape["k"])};
    const gemm::cpu::Kernel& k = gemm::cpu::select_kernel();
    const int threads = omp_get_max_threads();
    // Packed W: each NC block padded to whole NR panels.
    long b_floats = 0;
    for (int j0 = 0; j0 < g.N; j0 += k.nc) b_floats += gemm::cpu::packed_b_floats(g.K, std::min(k.nc, g.N - j0), k.nr);
    const long a_floats = gemm::cpu::packed_a_floats(std::min(k.mc, g.M), std::min(k.kc, g.K), k.mr);
    const long row_stride = (g.N + 15) / 16 * 16;
    std::shared_ptr<float> Bp(gemm::cpu::alloc_floats(b_floats).release(), &std::free);
    std::shared_ptr<float> Ap(gemm::cpu::alloc_floats(a_floats * threads).release(), &std::free);
    std::shared_ptr<float> rows(gemm::cpu::alloc_floats(row_stride * threads).release(), &std::free);
    Instance inst;
    inst.run = [=] { fused(g, Bp.get(), Ap.get(), a_floats, rows.get(), row_stride); };
    // aligned_alloc is invisible to the heap tracker: declare it.
    inst.workspace_bytes = sizeof(float) * (b_floats + a_floats * threads + row_stride * threads);
    return inst;
}

}  // namespace
}  // namespace mw::fusion

MW_REGISTER_VARIANT(ln_gelu_fused_epilogue_cpu, {
    .name = "fused_epilogue", .op = "ln_gelu", .lever = "fusion",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "bias, GELU and LayerNorm applied to each 96-row strip of Y while it is in L2, right "
                 "after the GEMM computes it: no temporaries, no epilogue sweeps",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::fusion::ln_gelu_gemm_bytes(s) + 12.0 * s["n"]; },
    .prepare = mw::fusion::prepare });
