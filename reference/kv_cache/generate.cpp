// generate, rung 0 (the reference): no cache. Every new token runs the
// model's forward pass over the whole sequence so far (the training step's
// forward, kernels/model/model_cpu.hpp, on one sequence) and keeps only the
// last position's logits. Step n costs a forward over n positions, so the
// loop executes sum_n forward(n) FLOPs — quadratic in the length where a
// cached decoder's work is linear — and its time per token grows with the
// position. The executed FLOPs are declared; the op's useful FLOPs are one
// forward over the final sequence (what a cached decoder does).
#include "reference/kv_cache/generate.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "harness/check.hpp"
#include "harness/results.hpp"
#include "harness/command.hpp"
#include "harness/registry.hpp"
#include "harness/timing.hpp"
#include "kernels/model/model_cpu.hpp"
#include "model/model.hpp"

namespace mw::kv_cache {

const char* const kPromptText =
    "The best way to predict the future is to invent it. A computer lets you make more mistakes faster than any "
    "invention in human history, with the possible exceptions of handguns and tequila. Never trust a computer you "
    "can't throw out a window. It is easier to write an incorrect program than understand a correct one. ";

const model::ModelFile& default_model() {
    static const model::ModelFile m = [] {
        const char* env = std::getenv("MEMWALL_MODEL");
        const std::filesystem::path p =
            env && *env ? std::filesystem::path(env) : source_root() / "results/model/default.safetensors";
        if (!std::filesystem::exists(p))
            throw UsageError("model file " + p.string() + " not found: make it with `memwall train` (or set MEMWALL_MODEL)");
        return model::load_model(p);
    }();
    return m;
}

double forward_flops(std::int64_t len) { return model::forward_flops(default_model().config, len); }

std::map<std::string, double> DecodeTimes::counters() const {
    return {{"ttft_ms", ttft_s * 1e3}, {"itl_p50_ms", percentile(itl_s, 0.5) * 1e3}, {"itl_p99_ms", percentile(itl_s, 0.99) * 1e3},
            {"kv_cache_bytes", kv_bytes}};
}

namespace {

Problem make_generate(const Shape& s, DType, std::uint64_t seed) {
    Problem p;
    p.shape = s;
    p.seed = seed;
    const std::int64_t n = s["prompt"];
    Buffer prompt = Buffer::make("prompt", DType::i32, std::size_t(n));
    const std::string text = kPromptText;
    for (std::int64_t i = 0; i < n; ++i) prompt.as<std::int32_t>()[i] = (unsigned char)text[std::size_t(i) % text.size()];
    p.inputs.push_back(std::move(prompt));
    p.outputs.push_back(Buffer::make("tokens", DType::i32, std::size_t(s["tokens"])));
    return p;
}

// The model generate runs: the trained one, its context raised to the
// shape's length (positions past the trained 256 extrapolate RoPE).
const DecodeModel& generate_model(const Shape& s) {
    return decode_model(default_model().config.kv_heads, int(s["prompt"] + s["tokens"]));
}

std::vector<std::vector<double>> greedy_oracle(const Problem& p, const std::function<void(double*, int, int)>& round) {
    const auto& dm = generate_model(p.shape);
    const std::vector<double> w(dm.params.begin(), dm.params.end());
    const Buffer& pr = p.in("prompt");
    const std::vector<int> prompt(pr.as<std::int32_t>(), pr.as<std::int32_t>() + pr.count);
    std::vector<double> margins;
    const auto ids = model::ref_greedy(dm.config, w.data(), prompt, int(p.shape["tokens"]), &margins, round);
    return {token_oracle(std::vector<double>(ids.begin(), ids.end()), margins)};
}

std::vector<std::vector<double>> oracle_generate(const Problem& p) { return greedy_oracle(p, {}); }

std::string validate_generate(const Shape& s) {
    if (s["prompt"] < 1) return "prompt = " + std::to_string(s["prompt"]) + ": need at least one token";
    if (s["tokens"] < 1) return "tokens = " + std::to_string(s["tokens"]) + ": need at least one";
    if (s["prompt"] + s["tokens"] > 2048)
        return "prompt + tokens = " + std::to_string(s["prompt"] + s["tokens"]) + " exceeds 2048 positions";
    return {};
}

Instance prepare_recompute(Problem& p) {
    const auto& m = generate_model(p.shape);
    const std::int64_t n_prompt = p.shape["prompt"], n_new = p.shape["tokens"];
    auto step = std::make_shared<model::cpu::TrainStep>(m.config, 1, int(n_prompt + n_new));
    auto seq = std::make_shared<std::vector<int>>();
    auto logits = std::make_shared<std::vector<float>>(std::size_t(n_prompt + n_new) * m.config.vocab);
    auto times = std::make_shared<DecodeTimes>();
    const std::int32_t* prompt = p.in("prompt").as<std::int32_t>();
    std::int32_t* out = p.out("tokens").as<std::int32_t>();
    const int V = m.config.vocab;
    Instance inst;
    inst.run = [=, &m] {
        using clock = std::chrono::steady_clock;
        seq->assign(prompt, prompt + n_prompt);
        times->itl_s.clear();
        auto last = clock::now();
        const auto t0 = last;
        for (std::int64_t i = 0; i < n_new; ++i) {
            const int len = int(seq->size());
            step->set_seq(len);
            step->forward(m.params.data(), seq->data(), seq->data(), logits->data());
            const float* z = logits->data() + std::size_t(len - 1) * V;
            const int next = int(std::max_element(z, z + V) - z);
            out[i] = next;
            seq->push_back(next);
            const auto now = clock::now();
            (i == 0 ? times->ttft_s : times->itl_s.emplace_back()) = std::chrono::duration<double>(now - (i == 0 ? t0 : last)).count();
            last = now;
        }
        times->kv_bytes = 0;  // nothing is kept between steps
    };
    inst.counters = [times] { return times->counters(); };
    return inst;
}

double recompute_flops(const Shape& s) {
    double f = 0;
    for (std::int64_t len = s["prompt"]; len < s["prompt"] + s["tokens"]; ++len) f += forward_flops(len);
    return f;
}

}  // namespace

std::vector<std::vector<double>> generate_int8_oracle(const Problem& p) { return greedy_oracle(p, round_kv_int8); }
const DecodeModel& generate_model_for(const Shape& s) { return generate_model(s); }

}  // namespace mw::kv_cache

MW_REGISTER_OP(generate, {
    .name = "generate", .lever = "kv_cache",
    .summary = "greedy continuation of a prompt by the trained model stack (results/model/default.safetensors)",
    .axes = {"prompt", "tokens"},
    .default_shape = {{{"prompt", 16}, {"tokens", 256}}},
    .quick_shape = {{{"prompt", 16}, {"tokens", 32}}},
    .dtypes = {mw::DType::f32},
    // A cached decoder's work: one forward over every position but the last
    // generated one (whose logits are never needed).
    .flops = [](const mw::Shape& s) { return mw::kv_cache::forward_flops(s["prompt"] + s["tokens"] - 1); },
    // The weights read once (they fit this machine's L3; a decoder whose
    // weights do not fit streams them once per token: the variants' models).
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * double(mw::kv_cache::default_model().params.size()) + 4.0 * double(s["prompt"] + s["tokens"]);
    },
    .unit = {"tokens", [](const mw::Shape& s) { return double(s["tokens"]); }},
    .make_problem = mw::kv_cache::make_generate,
    .oracle = mw::kv_cache::oracle_generate,
    .check = {.mode = mw::CheckMode::token_sequence,
              // The longest reduction chain behind a logit: every block's MLP.
              .reduction_length = [](const mw::Shape&) {
                  const auto& c = mw::kv_cache::default_model().config;
                  return double(c.d_ff) * c.layers;
              },
              .logit_scale = 20.0},
    .validate = mw::kv_cache::validate_generate });

MW_REGISTER_VARIANT(generate_recompute_cpu, {
    .name = "recompute", .op = "generate", .lever = "kv_cache",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "no cache: every new token reruns the forward pass over the whole sequence so far, "
                 "so step n costs n positions' work",
    .needs = {"avx2"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * double(mw::kv_cache::default_model().params.size()) * double(s["tokens"]);
    },
    .executed_flops = mw::kv_cache::recompute_flops,
    .prepare = mw::kv_cache::prepare_recompute });
