// decode_step and generate, KV-cache lever, rung 1: a contiguous cache of
// past keys and values.
//
// Change from rung 0: the prefix's keys and values, computed once (here in
// prepare(), a prefill, untimed), stay in a slot of ctx + 1 positions per
// sequence (kernels/kv_cache/kv_store.hpp's ContiguousStore), so a step
// feeds only the new token through the model (kernels/model/model_cpu.hpp's
// Decoder): one GEMV per weight matrix for the whole batch, and attention
// reads the cache once per kv head (kernels/kv_cache/attend.hpp).
// Expected: the step's work no longer grows with ctx except for attention's
// read of the cache, 2 x layers x kv_heads x head_dim x 4 bytes per position
// (4 KiB per position for the default model), so the speedup over rung 0
// grows about linearly with ctx: rung 0 re-projects ctx positions (and its
// attention grows as ctx^2); this rung's weights cost the same at every ctx.
#include <algorithm>

#include "harness/disturbance.hpp"
#include "kernels/model/model_cpu.hpp"
#include "reference/kv_cache/generate.hpp"

namespace mw::kv_cache {

Instance prepare_decode_step(Problem& p, const StoreMaker& make) {
    const std::int64_t B = p.shape["batch"], ctx = p.shape["ctx"], T = ctx + 1;
    const auto& dm = decode_model(int(p.shape["kv_heads"]), int(T));
    const auto& c = dm.config;
    std::shared_ptr<KvStore> store = make({c.layers, c.kv_heads, c.head_dim()}, int(B), int(T));
    auto dec = std::make_shared<model::cpu::Decoder>(c, dm.params.data(), precision::QuantSpec{}, *store, int(T));
    const std::int32_t* tok = p.in("tokens").as<std::int32_t>();
    for (int b = 0; b < int(B); ++b)
        if (!store->open(b, int(T))) throw std::runtime_error(store->name() + " store: no room for sequence " + std::to_string(b));
    // The prefill, a chunk of 16 positions of every sequence in turn (so a
    // paged store's blocks of different sequences interleave in its pool).
    std::vector<int> seq, pos, in;
    for (std::int64_t c0 = 0; c0 < ctx; c0 += 16) {
        const std::int64_t c1 = std::min(ctx, c0 + 16);
        for (int b = 0; b < int(B); ++b) {
            if (!store->grow(b, int(c1))) throw std::runtime_error(store->name() + " store: out of memory in the prefill");
            seq.assign(std::size_t(c1 - c0), b);
            pos.clear(), in.clear();
            for (std::int64_t i = c0; i < c1; ++i) pos.push_back(int(i)), in.push_back(tok[b * T + i]);
            dec->step(int(c1 - c0), seq.data(), pos.data(), in.data());
        }
    }
    for (int b = 0; b < int(B); ++b)
        if (!store->grow(b, int(T))) throw std::runtime_error(store->name() + " store: out of memory for the step");
    auto step_seq = std::make_shared<std::vector<int>>(), step_pos = std::make_shared<std::vector<int>>(),
         step_tok = std::make_shared<std::vector<int>>();
    for (int b = 0; b < int(B); ++b)
        step_seq->push_back(b), step_pos->push_back(int(ctx)), step_tok->push_back(tok[b * T + ctx]);
    float* out = p.out("logits").as<float>();
    const int V = c.vocab;
    Instance inst;
    inst.run = [=] {
        const float* z = dec->step(int(B), step_seq->data(), step_pos->data(), step_tok->data());
        std::copy_n(z, B * V, out);
    };
    inst.counters = [store, dec] {
        std::map<std::string, double> c{{"kv_cache_bytes", store->reserved_bytes()},
                                        {"kv_used_bytes", store->used_bytes()}};
        dec->free_cores().add_counter(c);  // steps, the prefill's included, on fewer threads than asked
        return c;
    };
    return inst;
}

Instance prepare_generate(Problem& p, const StoreMaker& make) {
    const auto& dm = generate_model_for(p.shape);
    const auto& c = dm.config;
    const int n_prompt = int(p.shape["prompt"]), n_new = int(p.shape["tokens"]), T = n_prompt + n_new;
    std::shared_ptr<KvStore> store = make({c.layers, c.kv_heads, c.head_dim()}, 1, T);
    auto dec = std::make_shared<model::cpu::Decoder>(c, dm.params.data(), precision::QuantSpec{}, *store, T);
    auto times = std::make_shared<DecodeTimes>();
    const std::int32_t* prompt = p.in("prompt").as<std::int32_t>();
    std::int32_t* out = p.out("tokens").as<std::int32_t>();
    auto seq = std::make_shared<std::vector<int>>(std::size_t(n_prompt), 0);
    auto pos = std::make_shared<std::vector<int>>();
    for (int i = 0; i < n_prompt; ++i) pos->push_back(i);
    Instance inst;
    inst.run = [=] {
        using clock = std::chrono::steady_clock;
        // A fresh sequence every call: what a request's decode costs,
        // allocation of its cache included.
        if (store->is_open(0)) store->close(0);
        if (!store->open(0, T) || !store->grow(0, n_prompt))
            throw std::runtime_error(store->name() + " store: no room for the prompt");
        times->itl_s.clear();
        const auto t0 = clock::now();
        const float* z = dec->step(n_prompt, seq->data(), pos->data(), prompt) + std::size_t(n_prompt - 1) * c.vocab;
        auto last = t0;
        for (int i = 0; i < n_new; ++i) {
            if (i > 0) {
                const int s = 0, at = n_prompt + i - 1, t = out[i - 1];
                if (!store->grow(0, at + 1)) throw std::runtime_error(store->name() + " store: out of memory");
                z = dec->step(1, &s, &at, &t);
            }
            out[i] = int(std::max_element(z, z + c.vocab) - z);
            const auto now = clock::now();
            (i == 0 ? times->ttft_s : times->itl_s.emplace_back()) = std::chrono::duration<double>(now - last).count();
            last = now;
        }
        times->kv_bytes = store->reserved_bytes();
    };
    inst.counters = [times, dec] {
        auto c = times->counters();
        dec->free_cores().add_counter(c);
        return c;
    };
    return inst;
}

// Every weight read once per step (the prompt's step and each new token's),
// plus each step's read of the cache (bytes per position x positions so far).
double generate_bytes(const Shape& s, Elem e) {
    const auto& dm = generate_model_for(s);
    const auto& c = dm.config;
    const double per_pos = bytes_per_position({c.layers, c.kv_heads, c.head_dim()}, e);
    const double P = double(s["prompt"]), N = double(s["tokens"]);
    // steps: the prompt (reads nothing cached), then N - 1 tokens at P .. P + N - 2
    const double cache_reads = (N - 1) * (P + (P + N - 2)) / 2;
    return 4.0 * double(dm.params.size()) * N + per_pos * cache_reads;
}

}  // namespace mw::kv_cache

MW_REGISTER_VARIANT(generate_cache_cpu, {
    .name = "cache", .op = "generate", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "past keys and values kept in a contiguous slot: the prompt in one step, then each new token "
                 "alone through the model (a chain of GEMVs)",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::kv_cache::generate_bytes(s, mw::kv_cache::Elem::f32); },
    .prepare = [](mw::Problem& p) {
        return mw::kv_cache::prepare_generate(p, [](const mw::kv_cache::KvGeometry& g, int seqs, int len) {
            return std::make_unique<mw::kv_cache::ContiguousStore>(g, seqs, len);
        });
    } });

MW_REGISTER_VARIANT(decode_step_cache_cpu, {
    .name = "cache", .op = "decode_step", .lever = "kv_cache",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "past keys and values kept in a contiguous slot per sequence: a step feeds one token through "
                 "the model and reads the cache once",
    .needs = {"avx2"},
    .prepare = [](mw::Problem& p) {
        return mw::kv_cache::prepare_decode_step(p, [](const mw::kv_cache::KvGeometry& g, int seqs, int len) {
            return std::make_unique<mw::kv_cache::ContiguousStore>(g, seqs, len);
        });
    } });
