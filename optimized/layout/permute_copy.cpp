// permute, layout lever, rung 1 (CPU): make the permuted tensor contiguous
// first. (The ladder is listed in reference/layout/layout.hpp.)
//
// Change from rung 0 (strided): V[B,S,H,D] is first copied into a contiguous
// Vc[B,H,S,D] workspace (the explicit .permute(0,2,1,3).contiguous()),
// inside the timed call: each V row of H*D floats is read in address order
// and scattered as H pieces of D floats (256 bytes, whole lines). Then the
// same consumer, pv_head, runs on each head's slice with a row stride of D:
// the slice is 1 MiB of consecutive addresses, spread over every L2 set, so
// after the first query row's pass it stays in L2 for the other Q-1, and it
// spans 256 pages instead of 4096. Same arithmetic in the same order: the
// result is bit-identical to rung 0's.
//
// Bytes: the copy reads V and writes Vc, the consumer reads Vc once from
// beyond L2, P and O once:
//     4*(3*B*S*H*D + B*H*Q*S + B*H*Q*D).
// Expected effect: V traffic falls from Q = 8 sweeps to 3; the copy costs
// two of them and pays off because the consumer re-reads. With Q <= 2 it
// would not: a copy before a single-pass consumer only adds bytes.
#include <algorithm>
#include <memory>
#include <vector>

#include "reference/layout/layout.hpp"

namespace mw::layout {
namespace {

Instance prepare_copy(Problem& pr) {
    const long B = pr.shape["b"], S = pr.shape["s"], H = pr.shape["h"], D = pr.shape["d"], Q = pr.shape["q"];
    const float* V = pr.in("V").as<float>();
    const float* P = pr.in("P").as<float>();
    float* O = pr.out("O").as<float>();
    auto Vc = std::make_shared<std::vector<float>>(B * H * S * D);
    Instance inst;
    inst.run = [=] {
        float* vc = Vc->data();
#pragma omp parallel for schedule(static)
        for (long bs = 0; bs < B * S; ++bs) {  // V row (b, s) -> Vc[b, h, s, :] for every h
            const long b = bs / S, s = bs % S;
            for (long h = 0; h < H; ++h)
                std::copy_n(V + (bs * H + h) * D, D, vc + ((b * H + h) * S + s) * D);
        }
#pragma omp parallel for schedule(static)
        for (long bh = 0; bh < B * H; ++bh) pv_head(P + bh * Q * S, vc + bh * S * D, D, O + bh * Q * D, S, D, Q);
    };
    return inst;
}

}  // namespace
}  // namespace mw::layout

MW_REGISTER_VARIANT(permute_copy_cpu, {
    .name = "copy", .op = "permute", .lever = "layout",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "permute V into a contiguous [B,H,S,D] copy first (timed): each head's slice then stays in L2 "
                 "across the query rows, 3 sweeps of V instead of one per query row",
    .bytes = [](const mw::Shape& s, mw::DType) {
        const double B = s["b"], S = s["s"], H = s["h"], D = s["d"], Q = s["q"];
        return 4.0 * (3.0 * B * S * H * D + B * H * Q * S + B * H * Q * D);
    },
    .prepare = mw::layout::prepare_copy });
