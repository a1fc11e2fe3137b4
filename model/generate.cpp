// `memwall generate --model FILE --prompt TEXT --tokens N [--temperature T]
// [--top-k K] [--seed S] [--weights FORMAT] [--check]`: continues the prompt
// with the model stack's fp32 decoder (kernels/model/model_cpu.hpp: a KV
// cache and the precision lever's GEMVs) and prints the text, then the
// measured time to first token (the prompt fed token by token, then the
// first new token), inter-token latency (p50, p99) and decode tokens/s.
//
// --check (greedy only) decodes the same prompt with the fp64 oracle
// (model/) and compares the tokens under the token-sequence rule:
// identical, except that the sequences may part at a near-tie — a step where
// the oracle's two best logits are closer than the fp32 logits' tolerance —
// which is counted and reported. Parting anywhere else is a failure (exit 1).
#include <CLI/CLI.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <numeric>

#include <nlohmann/json.hpp>

#include "harness/check.hpp"
#include "harness/command.hpp"
#include "harness/disturbance.hpp"
#include "harness/inputs.hpp"
#include "harness/results.hpp"
#include "harness/strings.hpp"
#include "harness/registry.hpp"
#include "harness/timing.hpp"
#include "kernels/model/model_cpu.hpp"
#include "kernels/model/sampling.hpp"
#include "model/checkpoint.hpp"
#include "model/corpus.hpp"
#include "model/model.hpp"
#include "kernels/speculative/speculate.hpp"

namespace mw {
namespace {

struct GenerateOptions {
    std::string model;  // default: the committed model, found from the source tree (as `run` finds it)
    std::string prompt;
    int tokens = 128;
    double temperature = 0;
    int top_k = 0;
    std::uint64_t seed = 1;
    std::string weights = "f32";
    bool check = false;
    std::string out;
    int threads = 0;
    std::string speculative;  // "": the target alone; small, int4 or early_exit: that draft proposes
    int draft_k = 4;          // drafts per round
};


precision::QuantSpec parse_weights(const std::string& w) {
    using precision::Format;
    if (w == "f32") return {Format::f32};
    if (w == "bf16") return {Format::bf16};
    if (w == "f16") return {Format::f16};
    if (w == "int8") return {Format::int8_channel};
    if (w == "int4") return {Format::int4, 64, false};
    throw UsageError("--weights " + w + ": unknown format (choices: f32, bf16, f16, int8, int4)");
}

// A token from logits z, which must be finite: a NaN would pick token 0 (a
// NUL byte) and print it as if decoded.
int next_token(const float* z, int vocab, const GenerateOptions& o, int i) {
    for (int v = 0; v < vocab; ++v)
        if (!std::isfinite(z[v]))
            throw std::runtime_error("the model's logits are not finite at generated token " + std::to_string(i) +
                                     " (logit " + std::to_string(v) + " is " + std::to_string(z[v]) + ")");
    return model::sample_token(z, vocab, o.temperature, o.top_k, o.seed, i);
}

std::string printable(const std::vector<int>& t) {
    std::string s;
    for (int b : t) s += char(b);
    return s;
}

// Every option checked before the model is read (the context after).
void check_options(const GenerateOptions& o) {
    if (o.threads != 0) check_threads("--threads", o.threads);
    if (o.prompt.empty()) throw UsageError("--prompt must hold at least one byte");
    check_range("--tokens", (long long)o.tokens, 1, 1 << 20);
    check_range("--temperature", o.temperature, 0.0, 100.0);
    check_range("--top-k", (long long)o.top_k, 0, 256);
    if (o.check && o.temperature > 0) throw UsageError("--check compares greedy decoding: use --temperature 0");
    if (!o.speculative.empty() && std::find(speculative::kDraftKinds.begin(), speculative::kDraftKinds.end(), o.speculative) ==
                                         speculative::kDraftKinds.end())
        throw UsageError("--speculative " + o.speculative + ": unknown draft (choices: " + join(speculative::kDraftKinds) + ")");
    check_range("--draft-k", (long long)o.draft_k, 1, 16);
    parse_weights(o.weights);
    check_output_path(o.out, "--out");
    check_input_file(o.model, "--model");
}

// What a decoding produced: the tokens, the figures for the record, and the
// lines printed under the text.
struct Decoded {
    std::vector<int> tokens;
    nlohmann::json record;
    std::string summary;
};

// A line under the text when steps ran on fewer threads than asked (the
// decoders' FreeCores): the machine was busy, and the times show it.
void note_busy_steps(Decoded& d, std::initializer_list<const model::cpu::Decoder*> decoders) {
    long reduced = 0, steps = 0;
    double busy = 0;
    for (const auto* dec : decoders)
        if (dec) {
            reduced += dec->free_cores().reduced(), steps += dec->free_cores().calls();
            busy = std::max(busy, dec->free_cores().busy_cores());
        }
    d.record["steps_on_fewer_threads"] = reduced;
    d.record["steps"] = steps;
    if (reduced > 0)
        d.summary += fmt("note: the machine was busy: %ld of %ld steps ran on fewer than %d threads (other processes "
                         "kept up to %.1f of its cores busy; more threads would wait for them at every barrier)\n",
                         reduced, steps, omp_get_max_threads(), busy);
}

// The target alone, one token a step through its KV cache.
Decoded decode_plain(const GenerateOptions& o, const model::ModelFile& m, const std::vector<int>& prompt) {
    const auto& c = m.config;
    model::cpu::Decoder dec(c, m.params.data(), parse_weights(o.weights));
    using clock = std::chrono::steady_clock;
    // One untimed pass warms the caches and the thread pool.
    dec.step(prompt[0]);
    dec.reset();
    Decoded d;
    std::vector<int>& out = d.tokens;
    std::vector<double> itl;
    const auto t0 = clock::now();
    const float* z = nullptr;
    for (int t : prompt) z = dec.step(t);
    out.push_back(next_token(z, c.vocab, o, 0));
    const auto t_first = clock::now();
    auto last = t_first;
    for (int i = 1; i < o.tokens; ++i) {
        z = dec.step(out.back());
        out.push_back(next_token(z, c.vocab, o, i));
        const auto now = clock::now();
        itl.push_back(std::chrono::duration<double>(now - last).count());
        last = now;
    }
    const double ttft = std::chrono::duration<double>(t_first - t0).count();
    const double decode_s = std::chrono::duration<double>(last - t_first).count();
    const double tps = itl.empty() ? NAN : double(itl.size()) / decode_s;
    d.summary = fmt("%d prompt + %d generated tokens, weights %s (%.1f MB streamed per token), %d threads\n",
                    int(prompt.size()), o.tokens, o.weights.c_str(), dec.weight_bytes() / 1e6, omp_get_max_threads()) +
                fmt("time to first token %.2f ms; inter-token latency p50 %.3f ms, p99 %.3f ms; %.0f tokens/s\n",
                    ttft * 1e3, percentile(itl, 0.5, NAN) * 1e3, percentile(itl, 0.99, NAN) * 1e3, tps);
    d.record = {{"ttft_ms", ttft * 1e3}, {"itl_p50_ms", percentile(itl, 0.5, NAN) * 1e3},
                {"itl_p99_ms", percentile(itl, 0.99, NAN) * 1e3}, {"tokens_per_s", tps}};
    note_busy_steps(d, {&dec});
    return d;
}

// Speculative decoding (kernels/speculative/speculate.hpp): the draft
// proposes --draft-k tokens a round, the target verifies them in one pass,
// and the rejection rule keeps the target's own law (at --temperature 0 its
// greedy tokens exactly). The drafts are the speculative lever's rungs.
Decoded decode_speculative(const GenerateOptions& o, const model::ModelFile& m, const std::vector<int>& prompt) {
    const auto& c = m.config;
    const int P = int(prompt.size()), max_len = P + o.tokens + o.draft_k + 1;
    const model::ModelFile* small = o.speculative == "small" ? &model::draft_small() : nullptr;
    const speculative::Draft draft = speculative::make_draft(o.speculative, c, m.params.data(),
                                                             small ? &small->config : nullptr,
                                                             small ? small->params.data() : nullptr);
    const model::Config& dc = draft.config;
    if (max_len > std::min(c.max_seq, dc.max_seq))
        throw UsageError("prompt (" + std::to_string(P) + " bytes) + --tokens " + std::to_string(o.tokens) +
                         " + --draft-k " + std::to_string(o.draft_k) + " + 1 exceed the context of " +
                         std::to_string(std::min(c.max_seq, dc.max_seq)) + " tokens");
    speculative::Speculator spec(c, m.params.data(), parse_weights(o.weights), &dc, draft.params, draft.format, 1,
                                 max_len);
    const speculative::SpecOptions so{o.draft_k, o.temperature, o.top_k, o.seed};
    Decoded d;
    d.tokens.resize(std::size_t(o.tokens));
    speculative::Counts k;
    spec.generate(prompt.data(), P, 1, d.tokens.data(), so, &k);  // warms caches and threads
    spec.generate(prompt.data(), P, o.tokens, d.tokens.data(), so, &k);
    const double decode_s = k.total_s - k.prefill_s, tps = double(o.tokens) / decode_s;
    const double alpha = k.drafted ? double(k.accepted) / double(k.drafted) : NAN;
    const double per_pass = k.target_passes ? double(k.emitted) / double(k.target_passes) : NAN;
    d.summary = fmt("%d prompt + %d generated tokens, speculative: draft %s, %d drafts a round, target weights %s, %d threads\n",
                    P, o.tokens, o.speculative.c_str(), o.draft_k, o.weights.c_str(), omp_get_max_threads()) +
                fmt("%lld of %lld drafts accepted (alpha %.3f); %.2f tokens per target pass over %lld rounds; "
                    "prefill %.2f ms, then %.0f tokens/s\n",
                    (long long)k.accepted, (long long)k.drafted, alpha, per_pass, (long long)k.rounds,
                    k.prefill_s * 1e3, tps);
    d.record = {{"speculative", {{"draft", o.speculative}, {"k", o.draft_k}, {"drafted", k.drafted},
                                 {"accepted", k.accepted}, {"alpha", alpha}, {"rounds", k.rounds},
                                 {"target_passes", k.target_passes}, {"tokens_per_target_pass", per_pass},
                                 {"draft_ms", k.draft_s * 1e3}, {"verify_ms", k.verify_s * 1e3}}},
                {"prefill_ms", k.prefill_s * 1e3}, {"tokens_per_s", tps}};
    note_busy_steps(d, {&spec.target(), spec.draft()});
    return d;
}

int run_generate(GenerateOptions o) {
    if (o.model.empty()) o.model = (source_root() / "results/model/default.safetensors").string();
    check_options(o);
    if (o.threads > 0) omp_set_num_threads(o.threads);
    const model::ModelFile m = model::load_model(o.model);
    const auto& c = m.config;
    const auto prompt = model::to_tokens(o.prompt);
    if (std::int64_t(prompt.size()) + o.tokens > c.max_seq)
        throw UsageError("prompt (" + std::to_string(prompt.size()) + " bytes) + --tokens " + std::to_string(o.tokens) +
                         " exceed the model's context of " + std::to_string(c.max_seq) + " tokens");
    const Decoded d = o.speculative.empty() ? decode_plain(o, m, prompt) : decode_speculative(o, m, prompt);
    const std::vector<int>& out = d.tokens;
    std::printf("%s%s\n", o.prompt.c_str(), printable(out).c_str());
    std::printf("---\n%s", d.summary.c_str());

    nlohmann::json doc = {{"schema", "memwall.generate/1"}, {"machine", machine_info()},
                          {"model", path_for_record(o.model)}, {"prompt", o.prompt}, {"weights", o.weights},
                          {"temperature", o.temperature}, {"top_k", o.top_k}, {"seed", o.seed},
                          {"tokens", out}, {"text", printable(out)}};
    doc.update(d.record);
    int rc = 0;
    if (o.check) {
        const std::vector<double> p64(m.params.begin(), m.params.end());
        std::vector<double> margins;
        const auto ref = model::ref_greedy(c, p64.data(), prompt, o.tokens, &margins);
        Buffer got = Buffer::make("tokens", DType::i32, out.size());
        std::copy(out.begin(), out.end(), got.as<std::int32_t>());
        // The same rule and threshold as the generate op (reference/kv_cache/generate.cpp).
        CheckSpec spec;
        spec.logit_scale = 20.0;
        const double tie = near_tie_threshold(spec, DType::f32, double(c.d_ff) * c.layers);
        CheckResult r = check_token_sequence(got, token_oracle(std::vector<double>(ref.begin(), ref.end()), margins), tie);
        std::size_t same = 0;
        while (same < out.size() && out[same] == ref[same]) ++same;
        // A non-finite margin is a failure, whatever the tokens: a check a NaN passes checks nothing.
        double min_margin = INFINITY;
        bool finite = true;
        for (double g : margins) finite = finite && std::isfinite(g), min_margin = std::min(min_margin, g);
        if (!finite) {
            r.ok = false;
            r.message = "the fp64 oracle's logits are not finite (a NaN or Inf in the model?)";
            min_margin = NAN;
        }
        doc["check"] = {{"ok", r.ok}, {"near_ties", r.near_ties}, {"identical_prefix", same},
                        {"tie_threshold", tie}, {"smallest_margin", finite ? nlohmann::json(min_margin) : nlohmann::json()},
                        {"message", r.ok ? r.note : r.message}};
        std::printf("check against the fp64 oracle: %s — %zu of %d tokens identical, %zu near-tie%s "
                    "(margin threshold %.2g; smallest oracle margin %.3g)%s%s\n",
                    r.ok ? "PASS" : "FAIL", same, o.tokens, r.near_ties, r.near_ties == 1 ? "" : "s", tie, min_margin,
                    (r.ok ? r.note : r.message).empty() ? "" : ": ", (r.ok ? r.note : r.message).c_str());
        rc = r.ok ? 0 : 1;
    }
    if (!o.out.empty()) write_json_atomic(o.out, doc);
    return rc;
}

}  // namespace
}  // namespace mw

MW_REGISTER_COMMAND(generate, [](CLI::App& app) -> mw::CommandAction {
    auto* sub = app.add_subcommand("generate", "Continue a prompt with a trained model (fp32 decoder, KV cache) and time it");
    auto o = std::make_shared<mw::GenerateOptions>();
    sub->add_option("--model", o->model, "weights file from `memwall train` (default: the committed results/model/default.safetensors)");
    sub->add_option("--prompt", o->prompt, "text to continue")->required();
    sub->add_option("--tokens", o->tokens, "tokens (bytes) to generate")->capture_default_str();
    sub->add_option("--temperature", o->temperature, "0: greedy; else sample from softmax(z / T)")->capture_default_str();
    sub->add_option("--top-k", o->top_k, "sample among the k most likely tokens (0: all)")->capture_default_str();
    sub->add_option("--seed", o->seed, "sampling seed")->capture_default_str();
    sub->add_option("--weights", o->weights, "decode with weights stored as f32, bf16, f16, int8 or int4 (G = 64)")->capture_default_str();
    sub->add_flag("--check", o->check, "compare greedy tokens with the fp64 oracle's (near-ties reported)");
    sub->add_option("--out", o->out, "also write the tokens and timings as JSON");
    sub->add_option("--threads", o->threads, "OpenMP threads (0: all)");
    sub->add_option("--speculative", o->speculative,
                    "decode speculatively with this draft: small (results/model/draft-small.safetensors), int4 (the "
                    "model in INT4) or early_exit (its first half of layers); the target's law is kept at any --temperature");
    sub->add_option("--draft-k", o->draft_k, "with --speculative: drafts per round (1..16)")->capture_default_str();
    return [o] { return mw::run_generate(*o); };
});
