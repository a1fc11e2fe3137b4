// permute, layout lever, rung 0 (CPU): consume the permuted view through its
// strides.
//
// The op: O[b,h,q,:] = sum_s P[b,h,q,s] * V[b,s,h,:], fp32: attention's P·V
// product for Q query rows per head, where V comes out of its projection as
// [B,S,H,D] and each head needs its [S,D] slice, i.e. V.permute(0,2,1,3).
// P is [B,H,Q,S] (probabilities), O is [B,H,Q,D].
//
// The consumer (pv_head, shared with rung 1) runs per (b,h): for each query
// row q, o[q,:] += p[q,s] * v[s,:] over s, so it walks the head's slice once
// per query row: Q times. This rung hands it the slice in place: S rows of
// D = 64 floats, H*D*4 = 8 KiB apart. Each row is 256 contiguous bytes, so
// no line is wasted; what the stride wastes is cache capacity and TLB reach.
// The slice is S*D*4 = 1 MiB at the default shape. Contiguous, it would
// spread over all of L2 (2 MiB) and stay there for the Q passes. At an 8 KiB
// stride every row sits at the same offset in its page, so the rows compete
// for 4 x 32 of L2's 2048 sets (128 KiB, layout.hpp): each pass evicts what
// the next pass needs and the slice comes from L3 again, Q times. The slice
// also spans S = 4096 pages instead of 256, more than the second-level TLB
// holds, so most rows cost a page walk on every pass.
//
// Bytes: V crosses the L2 boundary once per query row, P and O once:
//     4*(Q*B*S*H*D + B*H*Q*S + B*H*Q*D).
// The flip side, worth measuring: with Q = 1 (--shape q=1) the consumer
// reads each element once, and this rung moves 1 sweep of V against the
// copy rung's 3; the view then wins.
// Heads are split over OpenMP threads in both rungs.
//
// This file also defines the op: shapes, FLOPs, seeded inputs, fp64 oracle.
#include <algorithm>
#include <vector>

#include "harness/inputs.hpp"
#include "reference/layout/layout.hpp"

namespace mw::layout {

void pv_head(const float* p, const float* v, long ldv, float* o, long S, long D, long Q) {
    for (long q = 0; q < Q; ++q) {
        float* oq = o + q * D;
        std::fill(oq, oq + D, 0.0f);
        for (long s = 0; s < S; ++s) axpy_row(oq, v + s * ldv, p[q * S + s], D);
    }
}

namespace {

Problem make_permute(const Shape& sh, DType dtype, std::uint64_t seed) {
    const auto B = sh["b"], S = sh["s"], H = sh["h"], D = sh["d"], Q = sh["q"];
    Problem p{.shape = sh, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("V", DType::f32, B * S * H * D, {B, S, H, D}));
    p.inputs.push_back(Buffer::make("P", DType::f32, B * H * Q * S, {B, H, Q, S}));
    p.outputs.push_back(Buffer::make("O", DType::f32, B * H * Q * D, {B, H, Q, D}));
    fill_uniform(p.in("V"), seed, -1.0, 1.0);
    fill_uniform(p.in("P"), seed, 0.0, 2.0 / double(S));  // rows sum to about 1, like probabilities
    return p;
}

std::vector<std::vector<double>> permute_oracle(const Problem& pr) {
    const auto B = pr.shape["b"], S = pr.shape["s"], H = pr.shape["h"], D = pr.shape["d"], Q = pr.shape["q"];
    const float* V = pr.in("V").as<float>();
    const float* P = pr.in("P").as<float>();
    std::vector<double> O(B * H * Q * D, 0.0);
#pragma omp parallel for schedule(static)
    for (std::int64_t bh = 0; bh < B * H; ++bh) {
        const std::int64_t b = bh / H, h = bh % H;
        for (std::int64_t q = 0; q < Q; ++q)
            for (std::int64_t s = 0; s < S; ++s) {
                const double w = P[(bh * Q + q) * S + s];
                const float* v = V + ((b * S + s) * H + h) * D;
                for (std::int64_t d = 0; d < D; ++d) O[(bh * Q + q) * D + d] += w * double(v[d]);
            }
    }
    return {std::move(O)};
}

Instance prepare_strided(Problem& pr) {
    const long B = pr.shape["b"], S = pr.shape["s"], H = pr.shape["h"], D = pr.shape["d"], Q = pr.shape["q"];
    const float* V = pr.in("V").as<float>();
    const float* P = pr.in("P").as<float>();
    float* O = pr.out("O").as<float>();
    Instance inst;
    inst.run = [=] {
#pragma omp parallel for schedule(static)
        for (long bh = 0; bh < B * H; ++bh) {
            const long b = bh / H, h = bh % H;
            // V[b, :, h, :] in place: row s at V + ((b*S + s)*H + h)*D.
            pv_head(P + bh * Q * S, V + (b * S * H + h) * D, H * D, O + bh * Q * D, S, D, Q);
        }
    };
    return inst;
}

}  // namespace
}  // namespace mw::layout

MW_REGISTER_OP(permute, {
    .name = "permute",
    .lever = "layout",
    .summary = "O[b,h,q,:] = sum_s P[b,h,q,s] V[b,s,h,:]: attention's P·V on V.permute(0,2,1,3), fp32",
    .axes = {"b", "s", "h", "d", "q"},
    // V is 256 MiB; a head's slice is 1 MiB (half of L2) and its rows are
    // H*D*4 = 8 KiB apart; 8 query rows re-read each slice 8 times.
    .default_shape = {{{"b", 8}, {"s", 4096}, {"h", 32}, {"d", 64}, {"q", 8}}},
    .quick_shape = {{{"b", 2}, {"s", 1024}, {"h", 16}, {"d", 64}, {"q", 8}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return 2.0 * s["b"] * s["h"] * s["q"] * double(s["s"]) * s["d"]; },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        const double B = s["b"], S = s["s"], H = s["h"], D = s["d"], Q = s["q"];
        return 4.0 * (B * S * H * D + B * H * Q * S + B * H * Q * D);
    },
    .make_problem = mw::layout::make_permute,
    .oracle = mw::layout::permute_oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["s"]); }, .baseline_factor = 2.0},
});

MW_REGISTER_VARIANT(permute_strided_cpu, {
    .name = "strided", .op = "permute", .lever = "layout",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "each head's [S,D] slice consumed in place, rows H*D floats apart: the rows share one page "
                 "offset, crowd into 1/16 of L2, and the slice is refetched from L3 for every query row",
    .bytes = [](const mw::Shape& s, mw::DType) {
        const double B = s["b"], S = s["s"], H = s["h"], D = s["d"], Q = s["q"];
        return 4.0 * (Q * B * S * H * D + B * H * Q * S + B * H * Q * D);
    },
    .prepare = mw::layout::prepare_strided });
