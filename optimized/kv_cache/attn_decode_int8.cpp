// attn_decode, KV-cache lever, rung 2: an int8 cache.
// (The ladder is listed in reference/kv_cache/generate.hpp.)
//
// Change from rung 1 (split): the cache is stored in int8, symmetric, with
// one fp32 scale per row — per (sequence, position, kv head), for K and for
// V: x ~ scale q, q in [-127, 127] (quantize_row_int8, kernels/kv_cache/
// attend.hpp: the lever's one int8 row format). It is quantized in
// prepare(), untimed, as a serving cache quantizes each row once, when it is
// appended. The loop is
// rung 1's (attn_decode_cpu.hpp) with a row format that loads W bytes and
// widens them (a sign extension and a convert per vector); the scales never
// touch an element: K's multiplies the finished score, V's the probability
// (p_j s_j), so a row costs the same FMAs as in fp32. The query stays fp32.
// Expected: bytes 2 b ctx kv_heads (hd + 4) instead of 8 b ctx kv_heads hd —
// 3.9x fewer at hd 128 — so up to 3.9x faster where rung 1 is memory-bound
// (MHA, GQA), until the widening and the unchanged FMAs make it
// compute-bound; MQA was compute-bound already and gains little.
// Numerics: per element |x - s q| <= s / 2 with s = max|row| / 127, a
// relative error of up to 0.4% of the row's largest value. A per-row scale
// keeps one large position from coarsening every other row's step, which a
// per-tensor scale would (tests/kv_cache/test_attn_decode.cpp shows it). The
// rung is judged against attention over the dequantized cache (its contract);
// its error against the exact fp32 cache is reported beside it.
#include <memory>

#include "kernels/kv_cache/attend.hpp"
#include "optimized/kv_cache/attn_decode_cpu.hpp"
#include "reference/kv_cache/generate.hpp"

namespace mw::kv_cache::cpu {
void decode_i8(const Cache<std::int8_t>& kv, const float* q, long heads, float* o, Workspace& ws) {
    decode<std::int8_t>(isa::pick_kernel<detail::task<simd::f16, I8Format>, detail::task<simd::f8, I8Format>>(), kv, q,
                        heads, o, ws);
}

}  // namespace mw::kv_cache::cpu

namespace mw::kv_cache {
namespace {

// The cache as this rung stores it: rows of K and V [b][ctx][kv_heads][hd]
// in int8, and their scales [b][ctx][kv_heads].
struct Int8Cache {
    Buffer K, V, k_scale, v_scale;
};

Int8Cache quantize_cache(const Problem& p) {
    const std::int64_t rows = p.shape["b"] * p.shape["ctx"] * p.shape["kv_heads"], hd = p.shape["hd"];
    Int8Cache c{Buffer::make("K_int8", DType::i8, std::size_t(rows * hd)),
                Buffer::make("V_int8", DType::i8, std::size_t(rows * hd)),
                Buffer::make("K_scale", DType::f32, std::size_t(rows)),
                Buffer::make("V_scale", DType::f32, std::size_t(rows))};
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
        c.k_scale.as<float>()[r] = quantize_row_int8(p.in("K").as<float>() + r * hd, int(hd), c.K.as<std::int8_t>() + r * hd);
        c.v_scale.as<float>()[r] = quantize_row_int8(p.in("V").as<float>() + r * hd, int(hd), c.V.as<std::int8_t>() + r * hd);
    }
    return c;
}

Instance prepare_int8(Problem& p) {
    auto c = std::make_shared<Int8Cache>(quantize_cache(p));
    const cpu::Cache<std::int8_t> kv{.K = c->K.as<std::int8_t>(), .V = c->V.as<std::int8_t>(),
                                     .k_scale = c->k_scale.as<float>(), .v_scale = c->v_scale.as<float>(),
                                     .b = p.shape["b"], .ctx = p.shape["ctx"], .kv_heads = p.shape["kv_heads"],
                                     .hd = p.shape["hd"]};
    return cpu::decode_instance(p, kv, c);
}

// The function this rung computes: attention over the dequantized cache.
std::vector<std::vector<double>> int8_contract(const Problem& p) {
    const Int8Cache c = quantize_cache(p);
    return {attn_decode_exact(p.shape, p.in("q").as<float>(),
                              {.K8 = c.K.as<std::int8_t>(), .V8 = c.V.as<std::int8_t>(),
                               .k_scale = c.k_scale.as<float>(), .v_scale = c.v_scale.as<float>()})};
}

}  // namespace
}  // namespace mw::kv_cache

MW_REGISTER_VARIANT(attn_decode_int8_cpu, {
    .name = "int8", .op = "attn_decode", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 2,
    .rationale = "rung 1 on an int8 cache with one fp32 scale per row (position, kv head) of K and of V, "
                 "widened on load, scales applied to scores and probabilities: 3.9x fewer bytes at hd 128",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::kv_cache::attn_decode_int8_cache_bytes(s); },
    .prepare = mw::kv_cache::prepare_int8,
    .contract_oracle = mw::kv_cache::int8_contract });
