// Rung 0 of the precision lever (CPU): the textbook GEMV in fp32.
//
// y[bb][i] = sum_j W[i][j] * x[bb][j], one scalar FMA at a time, one thread,
// vectorization switched off. Bytes: 4 * n_out * n_in of weights once per
// batch item (the row is re-read from cache for bb > 0, so DRAM sees it once).
// A single scalar dependency chain does ~1 FMA per 4 cycles: ~3 GB/s of
// weights, far below DRAM (~19 GB/s on 2 cores) — the floor every other rung
// is measured from.
//
// This file also defines the op: shapes, FLOPs, compulsory bytes (fp32
// weights: the op's inputs are fp32), seeded inputs and the fp64 oracle.
//
// Checking: fp32 rungs are compared with the fp64 oracle under the standard
// tolerance (reduction length n_in). Every lossy rung (bf16, fp16, int8,
// int4) declares a contract oracle — y = dequant(Q(W)) x in fp64, from the
// same deterministic quantizer its prepare() uses — and is judged against it
// with the same standard tolerance, so a decode bug cannot hide inside the
// quantization error. The error against the exact oracle is recorded as
// `error_vs_exact`; tests/precision/test_gemv_q.cpp checks it against the
// bound derived from the quantization step.
#include "reference/precision/gemv_q.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness/inputs.hpp"

namespace mw::precision {

double gemv_bytes(const QuantSpec& q, const Shape& s) {
    const double n_out = s["n_out"], n_in = s["n_in"], b = s["b"];
    return n_out * n_in * effective_bits(q, s["n_in"]) / 8 + 4.0 * b * (n_in + n_out);
}

namespace {

// y[bb][i] = sum_j W[i][j] x[bb][j] in fp64, each sum taken in j order.
// row(i, buf) gives row i's n_in floats (buf: n_in floats of scratch).
// x is transposed to [n_in][b] and rows are taken 8 at a time, so the inner
// loop runs over batch items — independent sums the compiler vectorizes —
// and each x column is reused by 8 rows from L1: the batch sweep's oracles
// (b up to 256 on 18432^2 weights) take seconds, not minutes.
template <class X, class RowFn>
std::vector<double> gemv_fp64(std::int64_t n_out, std::int64_t n_in, std::int64_t b, const X* x, RowFn row) {
    constexpr std::int64_t R = 8;
    std::vector<double> xt(std::size_t(n_in * b));
    for (std::int64_t bb = 0; bb < b; ++bb)
        for (std::int64_t j = 0; j < n_in; ++j) xt[j * b + bb] = x[bb * n_in + j];
    std::vector<double> y(std::size_t(b * n_out));
#pragma omp parallel
    {
        std::vector<float> buf(std::size_t(R * n_in));
        std::vector<double> acc(std::size_t(R * b));
#pragma omp for schedule(static)
        for (std::int64_t i0 = 0; i0 < n_out; i0 += R) {
            const std::int64_t nr = std::min(R, n_out - i0);
            const float* w[R];
            for (std::int64_t r = 0; r < nr; ++r) w[r] = row(i0 + r, buf.data() + r * n_in);
            std::fill(acc.begin(), acc.end(), 0.0);
            for (std::int64_t j = 0; j < n_in; ++j) {
                const double* xj = xt.data() + j * b;
                for (std::int64_t r = 0; r < nr; ++r) {
                    const double wj = w[r][j];
                    double* a = acc.data() + r * b;
                    for (std::int64_t bb = 0; bb < b; ++bb) a[bb] += wj * xj[bb];
                }
            }
            for (std::int64_t r = 0; r < nr; ++r)
                for (std::int64_t bb = 0; bb < b; ++bb) y[bb * n_out + i0 + r] = acc[r * b + bb];
        }
    }
    return y;
}

}  // namespace

std::vector<double> dequant_oracle(const QMatrix& m, const float* x, std::int64_t b, ActSpec a) {
    const auto row = [&m](std::int64_t i, float* buf) {
        dequantize_row(m, i, buf);
        return static_cast<const float*>(buf);
    };
    if (a.round == ActRound::none) return gemv_fp64(m.n_out, m.n_in, b, x, row);
    const std::vector<double> xr = rounded_acts(a, x, b, m.n_in);
    return gemv_fp64(m.n_out, m.n_in, b, xr.data(), row);
}

std::function<std::vector<std::vector<double>>(const Problem&)> contract_oracle(QuantSpec q, ActSpec a) {
    return [q, a](const Problem& p) {
        const QMatrix m = quantize(q, p.in("W").as<float>(), p.shape["n_out"], p.shape["n_in"]);
        return std::vector<std::vector<double>>{dequant_oracle(m, p.in("x").as<float>(), p.shape["b"], a)};
    };
}

namespace {

Problem make_problem(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto n_out = s["n_out"], n_in = s["n_in"], b = s["b"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("W", DType::f32, n_out * n_in, {n_out, n_in}));
    p.inputs.push_back(Buffer::make("x", DType::f32, b * n_in, {b, n_in}));
    p.outputs.push_back(Buffer::make("y", DType::f32, b * n_out, {b, n_out}));
    fill_uniform(p.in("W"), seed, -1.0, 1.0);
    fill_uniform(p.in("x"), seed, -1.0, 1.0);
    return p;
}

std::vector<std::vector<double>> oracle(const Problem& p) {
    const auto n_out = p.shape["n_out"], n_in = p.shape["n_in"], b = p.shape["b"];
    const float* W = p.in("W").as<float>();
    return {gemv_fp64(n_out, n_in, b, p.in("x").as<float>(),
                      [W, n_in](std::int64_t i, float*) { return W + i * n_in; })};
}

}  // namespace
}  // namespace mw::precision

__attribute__((optimize("no-tree-vectorize"))) static void gemv_naive(const float* W, const float* x, float* y,
                                                                      std::int64_t n_out, std::int64_t n_in,
                                                                      std::int64_t b) {
    for (std::int64_t bb = 0; bb < b; ++bb)
        for (std::int64_t i = 0; i < n_out; ++i) {
            float acc = 0.0f;
            for (std::int64_t j = 0; j < n_in; ++j) acc += W[i * n_in + j] * x[bb * n_in + j];
            y[bb * n_out + i] = acc;
        }
}

MW_REGISTER_OP(gemv_q, {
    .name = "gemv_q",
    .lever = "precision",
    .summary = "y[b,n_out] = x[b,n_in] W[n_out,n_in]^T; W stored fp32/bf16/fp16/int8/int4 by the variant",
    .axes = {"b", "n_in", "n_out"},
    // 18432^2 fp32 weights are 1.27 GiB: over 4x a 300 MiB L3 (this
    // project's machine), so every rung streams from DRAM. Run it --cold:
    // the int4 weights (~0.18 GiB) would otherwise stay in such an L3.
    .default_shape = {{{"n_out", 18432}, {"n_in", 18432}, {"b", 1}}},
    .quick_shape = {{{"n_out", 2048}, {"n_in", 2048}, {"b", 1}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return 2.0 * s["b"] * s["n_out"] * s["n_in"]; },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        return mw::precision::gemv_bytes({mw::precision::Format::f32}, s);
    },
    .make_problem = mw::precision::make_problem,
    .oracle = mw::precision::oracle,
    .check = {.reduction_length = [](const mw::Shape& s) { return double(s["n_in"]); }},
    // W is only read, y is a vector: the read-only DRAM bandwidth is the roof.
    .read_dominated = true,
    // Level 04's exercise takes W as int4 with a bf16 scale per 64 weights.
    .prepared_inputs = {{"int4_g64_sym", [](const mw::Problem& p) {
        namespace q = mw::precision;
        q::QMatrix m = q::quantize({q::Format::int4, 64, false}, p.in("W").as<float>(), p.shape["n_out"],
                                   p.shape["n_in"]);
        m.payload.name = "Wq", m.scales.name = "scales";
        return std::vector<mw::Buffer>{m.payload, m.scales};
    }}},
});

MW_REGISTER_VARIANT(gemv_q_naive_cpu, {
    .name = "naive", .op = "gemv_q", .lever = "precision",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "textbook fp32 loop, one scalar FMA chain, one thread: latency-bound, not bandwidth-bound",
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::precision::gemv_bytes({mw::precision::Format::f32}, s); },
    .prepare = [](mw::Problem& p) {
        const auto n_out = p.shape["n_out"], n_in = p.shape["n_in"], b = p.shape["b"];
        const float* W = p.in("W").as<float>();
        const float* x = p.in("x").as<float>();
        float* y = p.out("y").as<float>();
        mw::Instance inst;
        inst.run = [=] { gemv_naive(W, x, y, n_out, n_in, b); };
        return inst;
    } });
