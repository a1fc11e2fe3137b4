// softmax_v, fusion lever, rung 1 (CPU): softmax fused into its consumer.
//
// Change from rung 0: P is never stored. Each thread takes a block of
// MC = 96 rows (12 at a time is the micro-kernel's height), computes their
// online max and sum (reading X once from DRAM), and then, for each KC-deep
// slice of columns, writes exp(X - m) / sum for those rows into a small tile
// (MC x KC floats = 96 KiB, in L2) that is packed and multiplied by the
// matching slice of packed V at once. The exp of the second step re-reads X's
// rows from L2 (96 x cols x 4 bytes = 1.5 MiB at 4096 columns).
// Bytes: X + V + O = rows*cols*4 (+ small) instead of 3 rows*cols*4; peak
// extra memory: one tile per thread instead of all of P. The softmax math
// and the GEMM are the same as rung 0's, so the gain is bounded by the time
// rung 0 spends moving P.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/fusion/softmax_v.hpp"
#include "reference/fusion/fusion.hpp"

namespace mw::fusion {
namespace {

Instance prepare(Problem& p) {
    const int R = int(p.shape["rows"]), C = int(p.shape["cols"]), d = int(p.shape["d"]);
    const float* X = p.in("X").as<float>();
    const float* V = p.in("V").as<float>();
    float* O = p.out("O").as<float>();
    const gemm::cpu::Kernel& k = gemm::cpu::select_kernel();
    softmax_v::check_d(d, k);
    const int threads = omp_get_max_threads();
    const long tile = long(k.mc) * k.kc;
    std::shared_ptr<float> Vp(gemm::cpu::alloc_floats(gemm::cpu::packed_b_floats(C, d, k.nr)).release(), std::free);
    std::shared_ptr<float> Ap(gemm::cpu::alloc_floats(softmax_v::a_floats(k) * threads).release(), std::free);
    std::shared_ptr<float> T(gemm::cpu::alloc_floats(tile * threads).release(), std::free);
    auto stats = std::make_shared<std::vector<float>>(2 * std::size_t(k.mc) * threads);
    Instance inst;
    // aligned_alloc'ed buffers, invisible to the heap tracker: declared.
    inst.workspace_bytes =
        sizeof(float) * (gemm::cpu::packed_b_floats(C, d, k.nr) + (softmax_v::a_floats(k) + tile) * threads);
    inst.run = [=, &k] {
#pragma omp parallel num_threads(threads)
        {
            softmax_v::pack_v(k, V, C, d, Vp.get());
            const int t = omp_get_thread_num();
            float* ap = Ap.get() + softmax_v::a_floats(k) * t;
            float* tp = T.get() + tile * t;
            float* m = stats->data() + 2 * k.mc * t;
            float* inv = m + k.mc;
#pragma omp for schedule(dynamic, 1)
            for (int ic = 0; ic < R; ic += k.mc) {
                const int mc = std::min(k.mc, R - ic);
                const float* Xb = X + long(ic) * C;
                softmax_v::row_stats(Xb, C, mc, m, inv);
                for (int pc = 0; pc < C; pc += k.kc) {
                    const int kc = std::min(k.kc, C - pc);
                    softmax_v::probs(Xb + pc, C, mc, kc, m, inv, tp, kc, false);
                    gemm::cpu::pack_a(tp, kc, mc, kc, k.mr, ap);
                    gemm::cpu::macro_kernel(k, mc, d, kc, ap, gemm::cpu::packed_b_slice(Vp.get(), pc, d, k.nr),
                                            O + long(ic) * d, d, pc > 0);
                }
            }
        }
    };
    return inst;
}

}  // namespace
}  // namespace mw::fusion

MW_REGISTER_VARIANT(softmax_v_fused_cpu, {
    .name = "fused", .op = "softmax_v", .lever = "fusion",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "probabilities made one MC x KC tile at a time and multiplied by V while in L2: P never reaches DRAM",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * (double(s["rows"]) * s["cols"] + double(s["cols"]) * s["d"] + double(s["rows"]) * s["d"]);
    },
    .prepare = mw::fusion::prepare });
