// softmax_v, fusion lever, rung 0 (CPU): softmax, then its consumer.
//
// O = softmax(X) V with X [rows, cols] and V [cols, d], fp32: the second
// half of attention (P V), on its own. This rung runs it as two ops, the
// way a framework calls a softmax kernel and then a matmul:
//   sweep 1  P = softmax(X), row by row (online stats, then normalize with
//            streaming stores): read X, write P (rows x cols, 512 MiB at
//            the default 32768 x 4096)
//   GEMM     O = P V with the packed AVX-512 GEMM of the vectorization
//            lever: read P back from DRAM, V (1 MiB, cached) once per block
// Bytes: X + 2 P + V + O = 3 rows*cols*4 (+ small). Peak extra memory: P.
// The GEMM's 2*rows*cols*d FLOPs are the same in both rungs; the fused rung
// removes P's write and re-read, so the saving is bounded by their share.
//
// This file also defines the op: shapes, FLOPs, seeded inputs, fp64 oracle.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/inputs.hpp"
#include "kernels/fusion/softmax_v.hpp"
#include "reference/fusion/fusion.hpp"

namespace mw::fusion {

namespace {

Problem make_problem(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto R = s["rows"], C = s["cols"], d = s["d"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("X", DType::f32, R * C, {R, C}));
    p.inputs.push_back(Buffer::make("V", DType::f32, C * d, {C, d}));
    p.outputs.push_back(Buffer::make("O", DType::f32, R * d, {R, d}));
    fill_normal(p.in("X"), seed, 2.0);
    fill_normal(p.in("V"), seed + 1, 1.0);
    return p;
}

std::vector<std::vector<double>> oracle(const Problem& p) {
    const auto R = p.shape["rows"], C = p.shape["cols"], d = p.shape["d"];
    const float* X = p.in("X").as<float>();
    const float* V = p.in("V").as<float>();
    std::vector<double> O(R * d, 0.0);
#pragma omp parallel
    {
        std::vector<double> e(C);
#pragma omp for schedule(static)
        for (std::int64_t r = 0; r < R; ++r) {
            double m = -INFINITY, s = 0;
            for (std::int64_t j = 0; j < C; ++j) m = std::max(m, double(X[r * C + j]));
            for (std::int64_t j = 0; j < C; ++j) s += e[j] = std::exp(double(X[r * C + j]) - m);
            double* o = &O[r * d];
            for (std::int64_t j = 0; j < C; ++j)
                for (std::int64_t c = 0; c < d; ++c) o[c] += e[j] / s * V[j * d + c];
        }
    }
    return {std::move(O)};
}

Instance prepare_unfused(Problem& p) {
    const int R = int(p.shape["rows"]), C = int(p.shape["cols"]), d = int(p.shape["d"]);
    const float* X = p.in("X").as<float>();
    const float* V = p.in("V").as<float>();
    float* O = p.out("O").as<float>();
    const gemm::cpu::Kernel& k = gemm::cpu::select_kernel();
    softmax_v::check_d(d, k);
    const int threads = omp_get_max_threads();
    std::shared_ptr<float> P(gemm::cpu::alloc_floats(long(R) * C).release(), std::free);
    std::shared_ptr<float> Vp(gemm::cpu::alloc_floats(gemm::cpu::packed_b_floats(C, d, k.nr)).release(), std::free);
    std::shared_ptr<float> Ap(gemm::cpu::alloc_floats(softmax_v::a_floats(k) * threads).release(), std::free);
    auto stats = std::make_shared<std::vector<float>>(2 * std::size_t(R));
    Instance inst;
    // The buffers come from aligned_alloc, which the heap tracker does not
    // see: declared here (P dominates).
    inst.workspace_bytes = sizeof(float) * (std::size_t(R) * C + gemm::cpu::packed_b_floats(C, d, k.nr) +
                                            softmax_v::a_floats(k) * threads);
    inst.run = [=, &k] {
        float* m = stats->data();
        float* inv = m + R;
#pragma omp parallel num_threads(threads)
        {
            // op 1: softmax, P to memory
#pragma omp for schedule(static)
            for (int r = 0; r < R; ++r) {
                softmax_v::row_stats(X + long(r) * C, C, 1, &m[r], &inv[r]);
                softmax_v::probs(X + long(r) * C, C, 1, C, &m[r], &inv[r], P.get() + long(r) * C, C, true);
            }
            _mm_sfence();
            // op 2: O = P V
            softmax_v::pack_v(k, V, C, d, Vp.get());
            float* ap = Ap.get() + softmax_v::a_floats(k) * omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
            for (int ic = 0; ic < R; ic += k.mc) {
                const int mc = std::min(k.mc, R - ic);
                for (int pc = 0; pc < C; pc += k.kc) {
                    const int kc = std::min(k.kc, C - pc);
                    gemm::cpu::pack_a(P.get() + long(ic) * C + pc, C, mc, kc, k.mr, ap);
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

MW_REGISTER_OP(softmax_v, {
    .name = "softmax_v",
    .lever = "fusion",
    .summary = "O = softmax(X) V along X's rows (softmax fused into its consumer), fp32",
    .axes = {"rows", "cols", "d"},
    // X and P are 512 MiB each: beyond a 300 MiB L3, so P's round trip is a
    // DRAM round trip (at 4096 rows it would stay in such an L3 and the
    // rungs would tie).
    .default_shape = {{{"rows", 32768}, {"cols", 4096}, {"d", 64}}},
    .quick_shape = {{{"rows", 256}, {"cols", 1024}, {"d", 64}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return double(s["rows"]) * s["cols"] * (14.0 + 2.0 * s["d"]); },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * (double(s["rows"]) * s["cols"] + double(s["cols"]) * s["d"] + double(s["rows"]) * s["d"]);
    },
    .make_problem = mw::fusion::make_problem,
    .oracle = mw::fusion::oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["cols"]); }, .baseline_factor = 2.0},
});

MW_REGISTER_VARIANT(softmax_v_unfused_cpu, {
    .name = "unfused", .op = "softmax_v", .lever = "fusion",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "softmax writes P (rows x cols) to memory, the packed GEMM reads it back: X + 2 P through DRAM",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * (3.0 * double(s["rows"]) * s["cols"] + double(s["cols"]) * s["d"] + double(s["rows"]) * s["d"]);
    },
    .prepare = mw::fusion::prepare_unfused });
