// generate, KV-cache lever, rung 1: a cache of past keys and values.
//
// Change from rung 0: each position's keys and values, once computed, are
// kept ([max_seq, kv_dim] per layer, kernels/model/model_cpu.hpp's Decoder),
// so a step feeds only the newest token through the model: its work no
// longer grows with the position, apart from attention's read of the cache.
// Expected: executed FLOPs fall from sum_n forward(n) to forward(N) — at
// prompt 64 + 192 new tokens about 100x fewer — but a step is now a chain of
// GEMVs, one read of every weight per token, so the time per token is the
// weights' bytes over the bandwidth of wherever they sit (the default
// model's 12 MB fit this machine's L3), not FLOPs over the peak. The cache
// costs layers x 2 x positions x kv_dim x 4 bytes (counter kv_cache_bytes).
#include <algorithm>
#include <chrono>
#include <memory>

#include "kernels/model/model_cpu.hpp"
#include "reference/kv_cache/generate.hpp"

namespace mw::kv_cache {
namespace {

Instance prepare_cache(Problem& p) {
    const auto& m = default_model();
    const std::int64_t n_prompt = p.shape["prompt"], n_new = p.shape["tokens"];
    auto dec = std::make_shared<model::cpu::Decoder>(m.config, m.params.data());
    auto times = std::make_shared<DecodeTimes>();
    const std::int32_t* prompt = p.in("prompt").as<std::int32_t>();
    std::int32_t* out = p.out("tokens").as<std::int32_t>();
    const auto& c = m.config;
    Instance inst;
    inst.run = [=] {
        using clock = std::chrono::steady_clock;
        dec->reset();
        times->itl_s.clear();
        const auto t0 = clock::now();
        const float* z = nullptr;
        for (std::int64_t i = 0; i < n_prompt; ++i) z = dec->step(prompt[i]);
        auto last = t0;
        for (std::int64_t i = 0; i < n_new; ++i) {
            if (i > 0) z = dec->step(out[i - 1]);
            out[i] = int(std::max_element(z, z + c.vocab) - z);
            const auto now = clock::now();
            (i == 0 ? times->ttft_s : times->itl_s.emplace_back()) = std::chrono::duration<double>(now - last).count();
            last = now;
        }
        times->kv_bytes = 2.0 * c.layers * double(dec->position()) * c.kv_dim() * sizeof(float);
    };
    inst.counters = [times] { return times->counters(); };
    return inst;
}

}  // namespace
}  // namespace mw::kv_cache

MW_REGISTER_VARIANT(generate_cache_cpu, {
    .name = "cache", .op = "generate", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "past keys and values kept: each step feeds one token through the model (a chain of "
                 "GEMVs), so work per token stops growing with the position",
    .needs = {"avx2"},
    // Every weight read once per position fed (prompt and generated), plus
    // the cache read by each position's attention.
    .bytes = [](const mw::Shape& s, mw::DType) {
        const auto& m = mw::kv_cache::default_model();
        const double n = double(s["prompt"] + s["tokens"] - 1);
        return 4.0 * double(m.params.size()) * n + 4.0 * 2 * m.config.layers * m.config.kv_dim() * n * (n + 1) / 2;
    },
    .prepare = mw::kv_cache::prepare_cache });
