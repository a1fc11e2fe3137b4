// speculate, rung 0 (the reference): target_only. The target decodes alone,
// one pass per token through its KV cache (kernels/model/model_cpu.hpp's
// Decoder over a contiguous store), `batch` sequences per pass. Every pass
// reads every weight: 12 MB for the trained model (model 0), from L3; 190 MB
// for it widened 4x (model 1 with a 32 MiB L3), from DRAM at any batch this
// machine runs.
// It runs through the same loop as the speculative rungs
// (kernels/speculative/speculate.hpp, K = 0: each round is one verify of
// one position), so the rungs differ only in what speculation adds.
#include "reference/speculative/speculate.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "harness/ceilings.hpp"
#include "harness/check.hpp"
#include "kernels/speculative/expected_tokens.hpp"
#include "harness/inputs.hpp"
#include "reference/kv_cache/generate.hpp"
#include "model/model.hpp"

namespace mw::speculative {

int max_len(const Shape& s) { return int(s["prompt"] + s["tokens"] + s["k"] + 1); }

int memory_bound_widening(const model::Config& trained, double l3_bytes) {
    if (!(l3_bytes > 0)) return 4;
    for (int w = 2; w < 8; w *= 2)
        if (4.0 * double(model::param_count(model::widened_config(trained, w))) >= 4 * l3_bytes) return w;
    return 8;
}

const TargetModel& target_model(const Shape& s) {
    static std::mutex mu;
    static std::map<std::pair<std::int64_t, int>, TargetModel> cache;
    static std::vector<float> wide;
    std::lock_guard<std::mutex> lock(mu);
    const int T = max_len(s);
    auto& m = cache[{s["model"], T}];
    if (!m.params) {
        const auto& dm = kv_cache::decode_model(kv_cache::default_model().config.kv_heads, T);
        if (s["model"] == 0) {
            m.config = dm.config;
            m.params = &dm.params;
        } else {
            m.widening = memory_bound_widening(dm.config, cache_bytes(3));
            m.config = model::widened_config(dm.config, m.widening);
            // The parameters do not depend on the context length.
            if (wide.empty()) wide = model::widen_params(dm.config, dm.params.data(), m.widening);
            m.params = &wide;
        }
    }
    return m;
}

namespace {

Problem make_speculate(const Shape& s, DType, std::uint64_t seed) {
    Problem p;
    p.shape = s;
    p.seed = seed;
    const std::int64_t B = s["batch"], P = s["prompt"], T = s["tokens"];
    Buffer pr = Buffer::make("prompt", DType::i32, std::size_t(B * P), {B, P});
    const std::string text = kv_cache::kPromptText;
    // Each sequence starts at its own (seeded) offset of the text.
    for (std::int64_t b = 0; b < B; ++b) {
        const std::size_t off = b == 0 ? 0 : std::size_t(mix_seed(seed, "offset" + std::to_string(b)) % text.size());
        for (std::int64_t i = 0; i < P; ++i) pr.as<std::int32_t>()[b * P + i] = (unsigned char)text[(off + std::size_t(i)) % text.size()];
    }
    p.inputs.push_back(std::move(pr));
    p.outputs.push_back(Buffer::make("tokens", DType::i32, std::size_t(B * T), {B, T}));
    return p;
}

// The fp64 model's greedy tokens of every sequence (ids, then margins).
std::vector<std::vector<double>> oracle_speculate(const Problem& p) {
    // The widened target's logits are the trained model's (in exact
    // arithmetic), so both targets are checked against the trained model's
    // fp64 tokens: the check of model 1 is also a check of the widening.
    Shape narrow = p.shape;
    narrow.axes["model"] = 0;
    const auto& m = target_model(narrow);
    const std::vector<double> w(m.params->begin(), m.params->end());
    const std::int64_t B = p.shape["batch"], P = p.shape["prompt"], T = p.shape["tokens"];
    std::vector<std::vector<int>> ids(static_cast<std::size_t>(B));
    std::vector<std::vector<double>> margins(static_cast<std::size_t>(B));
    const std::int32_t* pr = p.in("prompt").as<std::int32_t>();
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < B; ++b) {
        const std::vector<int> prompt(pr + b * P, pr + (b + 1) * P);
        ids[std::size_t(b)] = model::ref_greedy(m.config, w.data(), prompt, int(T), &margins[std::size_t(b)]);
    }
    std::vector<double> all_ids, all_margins;
    for (std::int64_t b = 0; b < B; ++b) {
        all_ids.insert(all_ids.end(), ids[std::size_t(b)].begin(), ids[std::size_t(b)].end());
        all_margins.insert(all_margins.end(), margins[std::size_t(b)].begin(), margins[std::size_t(b)].end());
    }
    return {token_oracle(all_ids, all_margins)};
}

std::string validate_speculate(const Shape& s) {
    if (s["model"] != 0 && s["model"] != 1)
        return "model = " + std::to_string(s["model"]) + "; valid: 0 (the trained model) or 1 (the trained model widened past the L3)";
    if (s["k"] < 1 || s["k"] > 16) return "k = " + std::to_string(s["k"]) + "; valid: 1..16";
    if (s["batch"] > 64) return "batch = " + std::to_string(s["batch"]) + "; valid: 1..64";
    if (max_len(s) > 2048)
        return "prompt + tokens + k + 1 = " + std::to_string(max_len(s)) + " positions; valid: at most 2048";
    return {};
}

double speculate_flops(const Shape& s) {
    const auto& c = target_model(s).config;
    return double(s["batch"]) * model::forward_flops(c, s["prompt"] + s["tokens"] - 1);
}

double target_bytes(const Shape& s) { return 4.0 * double(model::param_count(target_model(s).config)); }

}  // namespace

double speculate_bytes_floor(const Shape& s, double draft_weight_bytes) {
    const double T = double(s["tokens"]), k = double(s["k"]);
    return target_bytes(s) * (1 + T / (k + 1)) + draft_weight_bytes * (1 + T * k / (k + 1));
}

Instance prepare_speculate(Problem& p, const DraftSpec& d) {
    const auto& m = target_model(p.shape);
    const int B = int(p.shape["batch"]), P = int(p.shape["prompt"]), T = int(p.shape["tokens"]), K = int(p.shape["k"]);
    std::shared_ptr<Speculator> spec;
    // The decoders keep pointers to their norms and embedding: the
    // self-speculative draft's parameters live as long as the instance.
    auto draft_params = std::make_shared<std::vector<float>>();
    if (d.none) {
        spec = std::make_shared<Speculator>(m.config, m.params->data(), precision::QuantSpec{}, nullptr, nullptr,
                                            precision::QuantSpec{}, B, max_len(p.shape));
    } else if (d.layers > 0) {
        const auto dc = first_layers_config(m.config, d.layers);
        *draft_params = first_layers_params(m.config, m.params->data(), d.layers);
        spec = std::make_shared<Speculator>(m.config, m.params->data(), precision::QuantSpec{}, &dc, draft_params->data(), d.format, B,
                                            max_len(p.shape));
    } else if (d.model) {
        spec = std::make_shared<Speculator>(m.config, m.params->data(), precision::QuantSpec{}, d.model, d.params->data(),
                                            precision::QuantSpec{}, B, max_len(p.shape));
    } else {
        spec = std::make_shared<Speculator>(m.config, m.params->data(), precision::QuantSpec{}, &m.config, m.params->data(),
                                            d.format, B, max_len(p.shape));
    }
    const std::int32_t* prompt = p.in("prompt").as<std::int32_t>();
    std::int32_t* out = p.out("tokens").as<std::int32_t>();
    auto counts = std::make_shared<Counts>();
    SpecOptions o;
    o.K = K;
    // The measured step costs the formula takes: one target step and one
    // draft step of one row per sequence (best of 5, after a warm-up call).
    spec->generate(prompt, P, T, out, o, counts.get());
    const double target_step_s = spec->time_target_step(5), draft_step_s = spec->time_draft_step(5);
    Instance inst;
    inst.run = [=] {
        (void)draft_params;
        spec->generate(prompt, P, T, out, o, counts.get());
    };
    inst.counters = [=] {
        const Counts& c = *counts;
        std::map<std::string, double> r = {
            {"target_passes", double(c.target_passes)},
            {"tokens_per_pass", c.rounds ? double(c.emitted) / double(c.rounds) : 0},
            {"verify_ms", c.verify_s * 1e3},
            {"total_ms", c.total_s * 1e3},
            {"target_step_ms", target_step_s * 1e3},
            {"target_weight_mib", spec->target_weight_bytes() / 1048576.0},
            {"widening", double(m.widening)}};
        if (!spec->has_draft()) return r;
        const double alpha = c.accepted + c.rejected ? double(c.accepted) / double(c.accepted + c.rejected) : 0;
        const double per_round_ms = (c.draft_s + c.verify_s) * 1e3 / double(std::max<std::int64_t>(1, c.target_passes));
        const double E = speculative::expected_tokens(alpha, K);
        r.insert({{"drafted", double(c.drafted)},
                  {"accepted", double(c.accepted)},
                  {"acceptance", c.drafted ? double(c.accepted) / double(c.drafted) : 0},
                  {"alpha", alpha},
                  {"draft_passes", double(c.draft_passes)},
                  {"draft_ms", c.draft_s * 1e3},
                  {"draft_ms_per_round", c.draft_s * 1e3 / double(std::max<std::int64_t>(1, c.target_passes))},
                  {"verify_ms_per_round", c.verify_s * 1e3 / double(std::max<std::int64_t>(1, c.target_passes))},
                  {"draft_step_ms", draft_step_s * 1e3},
                  {"draft_weight_mib", spec->draft_weight_bytes() / 1048576.0},
                  {"predicted_tokens_per_pass", E},
                  // `memwall calc speculative --alpha A --gamma K --draft_ms D --verify_ms V --baseline_ms S`
                  // with D, V this call's per-round costs and S one target step: E S / (D + V).
                  {"predicted_speedup", E * target_step_s * 1e3 / per_round_ms}});
        return r;
    };
    return inst;
}

}  // namespace mw::speculative

MW_REGISTER_OP(speculate, {
    .name = "speculate", .lever = "speculative",
    .summary = "greedy continuation of `batch` prompts by a target model, alone or with a draft (speculative decoding)",
    .axes = {"model", "batch", "prompt", "tokens", "k"},
    .default_shape = {{{"model", 1}, {"batch", 1}, {"prompt", 16}, {"tokens", 64}, {"k", 4}}},
    .quick_shape = {{{"model", 0}, {"batch", 1}, {"prompt", 8}, {"tokens", 16}, {"k", 4}}},
    .dtypes = {mw::DType::f32},
    .flops = mw::speculative::speculate_flops,
    // The target's weights read once (what no decoder can avoid).
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) { return mw::speculative::target_bytes(s); },
    .unit = {"tokens", [](const mw::Shape& s) { return double(s["batch"] * s["tokens"]); }},
    .make_problem = mw::speculative::make_speculate,
    .oracle = mw::speculative::oracle_speculate,
    .check = {.mode = mw::CheckMode::token_sequence,
              // The longest reduction chain behind a logit: every block's MLP.
              .reduction_length = [](const mw::Shape& s) {
                  const auto& c = mw::speculative::target_model(s).config;
                  return double(c.d_ff) * c.layers;
              },
              .logit_scale = 20.0},
    .validate = mw::speculative::validate_speculate,
    .flag_axes = {"model"},
    .read_dominated = true });

MW_REGISTER_VARIANT(speculate_target_only_cpu, {
    .name = "target_only", .op = "speculate", .lever = "speculative",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "the target alone through its KV cache: one pass over every weight per generated token",
    .needs = {"avx2"},
    // The prompt's pass and one pass per token after the first.
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::speculative::target_bytes(s) * double(s["tokens"]); },
    .prepare = [](mw::Problem& p) { return mw::speculative::prepare_speculate(p, {.none = true}); } });
