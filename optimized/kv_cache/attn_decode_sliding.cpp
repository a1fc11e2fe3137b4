// attn_decode, KV-cache lever, rung 3: a sliding window with attention sinks.
// (The ladder is listed in reference/kv_cache/generate.hpp.)
//
// Change from rung 1 (split): the cache keeps only the `window` last
// positions and the `sinks` first ones (StreamingLLM: the first tokens
// collect attention mass a model cannot do without). The window is a ring
// buffer of `window` slots after the sinks: position p >= sinks lives in slot
// sinks + (p - sinks) % window, overwriting p - window — so the cache holds
// min(ctx, sinks + window) rows however long the sequence grows. The ring is
// built in prepare(), untimed (a serving cache writes each row into its slot
// when it is appended), and read by rung 1's loop (attn_decode_cpu.hpp):
// softmax does not care in which order the rows come.
// This computes a different function — attention over {0..sinks-1} ∪
// {ctx-window..ctx-1} — and is judged against exactly that (its contract
// oracle); its distance from full attention is reported beside it.
// Expected: bytes 8 b kv_heads hd min(ctx, sinks + window), independent of
// ctx: at the default ctx 16384, window 4096 and 4 sinks, 25% of rung 1's,
// so about 4x faster while memory-bound, and a cache that stops growing.
#include <cstring>
#include <memory>

#include "optimized/kv_cache/attn_decode_cpu.hpp"
#include "reference/kv_cache/generate.hpp"

namespace mw::kv_cache {
namespace {

// The ring: K and V [b][rows][kv_heads][hd], rows = sinks + window once the
// sequence is longer than that.
struct Ring {
    Buffer K, V;
    std::int64_t rows;
};

Ring build_ring(const Problem& p) {
    const auto b = p.shape["b"], ctx = p.shape["ctx"], g = p.shape["kv_heads"], hd = p.shape["hd"];
    const auto window = p.shape["window"], sinks = p.shape["sinks"], rows = attn_decode_window_rows(p.shape);
    Ring r{Buffer::make("K_ring", DType::f32, std::size_t(b * rows * g * hd)),
           Buffer::make("V_ring", DType::f32, std::size_t(b * rows * g * hd)), rows};
    const std::size_t row_bytes = std::size_t(g * hd) * sizeof(float);  // one position, every kv head
    for (std::int64_t s = 0; s < b; ++s)
        for (std::int64_t pos = 0; pos < ctx; ++pos) {
            if (!in_window(pos, ctx, window, sinks)) continue;
            const std::int64_t slot = pos < sinks ? pos : sinks + (pos - sinks) % window;
            std::memcpy(r.K.as<float>() + (s * rows + slot) * g * hd, p.in("K").as<float>() + (s * ctx + pos) * g * hd,
                        row_bytes);
            std::memcpy(r.V.as<float>() + (s * rows + slot) * g * hd, p.in("V").as<float>() + (s * ctx + pos) * g * hd,
                        row_bytes);
        }
    return r;
}

Instance prepare_sliding(Problem& p) {
    auto ring = std::make_shared<Ring>(build_ring(p));
    const cpu::Cache<float> kv{.K = ring->K.as<float>(), .V = ring->V.as<float>(), .b = p.shape["b"],
                               .ctx = ring->rows, .kv_heads = p.shape["kv_heads"], .hd = p.shape["hd"]};
    return cpu::decode_instance(p, kv, ring);
}

// The function this rung computes: exact attention over the sinks and the window.
std::vector<std::vector<double>> window_contract(const Problem& p) {
    const auto ctx = p.shape["ctx"], window = p.shape["window"], sinks = p.shape["sinks"];
    return {attn_decode_exact(p.shape, p.in("q").as<float>(), {.K = p.in("K").as<float>(), .V = p.in("V").as<float>()},
                              [=](std::int64_t j) { return in_window(j, ctx, window, sinks); })};
}

}  // namespace
}  // namespace mw::kv_cache

MW_REGISTER_VARIANT(attn_decode_sliding_cpu, {
    .name = "sliding", .op = "attn_decode", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 3,
    .rationale = "only the last `window` positions (a ring buffer) and the first `sinks` are kept and read: "
                 "bytes bounded by window + sinks, not ctx; attention over that set",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::kv_cache::attn_decode_window_bytes(s); },
    // The op's FLOPs count every position; this rung does the window's.
    .executed_flops = [](const mw::Shape& s) {
        return 4.0 * double(s["b"]) * double(s["heads"]) * double(mw::kv_cache::attn_decode_window_rows(s)) * double(s["hd"]);
    },
    .prepare = mw::kv_cache::prepare_sliding,
    .contract_oracle = mw::kv_cache::window_contract });
