// The softmax_v pieces both rungs share (declared in softmax_v.hpp):
// packing V for the GEMM, the row statistics, the probabilities.
#include "kernels/fusion/softmax_v.hpp"

#include <omp.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/fusion/softmax_rows.hpp"

namespace mw::fusion {

namespace softmax_v {

void pack_v(const gemm::cpu::Kernel& k, const float* V, int C, int d, float* Vp) {
#pragma omp for schedule(static)
    for (int pc = 0; pc < C; pc += k.kc)
        gemm::cpu::pack_b(V + long(pc) * d, d, std::min(k.kc, C - pc), d, k.nr,
                          gemm::cpu::packed_b_slice(Vp, pc, d, k.nr));
}

namespace {
template <class V> MW_SIMD_INLINE void stats_rows(const float* X, long C, int mb, float* m, float* inv) {
    for (int i = 0; i < mb; ++i) {
        float s;
        softmax::row_online_stats<V>(X + i * C, C, &m[i], &s);
        inv[i] = 1.0f / s;
    }
}
template <class V>
MW_SIMD_INLINE void probs_rows(const float* X, long ldx, int mb, int kc, const float* m, const float* inv, float* P,
                               long ldp, bool stream) {
    for (int i = 0; i < mb; ++i) {
        if (stream) softmax::row_normalize<V>(X + i * ldx, P + i * ldp, kc, m[i], inv[i]);
        else softmax::row_normalize_into<V>(X + i * ldx, P + i * ldp, kc, m[i], inv[i]);
    }
}
}  // namespace

void row_stats(const float* X, long C, int mb, float* m, float* inv) {
    isa::pick_kernel<stats_rows<simd::f16>, stats_rows<simd::f8>>()(X, C, mb, m, inv);
}
void probs(const float* X, long ldx, int mb, int kc, const float* m, const float* inv, float* P, long ldp,
           bool stream) {
    isa::pick_kernel<probs_rows<simd::f16>, probs_rows<simd::f8>>()(X, ldx, mb, kc, m, inv, P, ldp, stream);
}
long a_floats(const gemm::cpu::Kernel& k) { return gemm::cpu::packed_a_floats(k.mc, k.kc, k.mr); }
void check_d(std::int64_t d, const gemm::cpu::Kernel& k) {
    if (d > k.nc)
        throw std::runtime_error("softmax_v: d=" + std::to_string(d) + " is larger than one GEMM column block (" +
                                 std::to_string(k.nc) + ")");
}

}  // namespace softmax_v

}  // namespace mw::fusion
