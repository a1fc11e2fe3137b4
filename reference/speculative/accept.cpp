// accept, rung 0 (the reference and the only rung): rejection — accept
// draft i with probability min(1, p_i(d_i) / q_i(d_i)), at the first
// rejection draw from the normalized residual (p_i - q_i)+, after k
// acceptances draw a bonus token from p_{k+1}, and keep the target cache's
// positions whose tokens stay (speculative_round,
// kernels/speculative/rule.hpp). What it buys is not speed but exactness,
// on seeded Markov chains where the law is known (reference/speculative/chain.hpp):
// outputs `counts` (the pairs of the first two tokens of `samples`
// generations at temperature 1), checked with the distribution rule —
// Pearson's chi-square at alpha 1e-6, the probability that a correct rule
// fails one check (a run checks twice) — and `tokens` (`steps` greedy
// tokens on position-dependent chains), checked exactly against the
// target alone, and `decisions` (each of 512 seeded rounds' accepted drafts
// and kept positions, given its uniforms), checked exactly against the
// rule: the law alone cannot tell a rule that never tests a draft and
// samples the target directly. Level 07's exercise (levels/07-speculative/).
#include <atomic>
#include <string>

#include "harness/registry.hpp"
#include "harness/replay.hpp"
#include "reference/speculative/chain.hpp"

namespace mw::speculative {

namespace {

int bias_rows(const Shape& s) { return int(s["steps"] + s["k"] + 2); }

Problem make_accept(const Shape& s, DType, std::uint64_t seed) {
    Problem p;
    p.shape = s;
    p.seed = seed;
    const std::int64_t v = s["v"];
    const auto c = make_chain(int(v), seed);
    const auto bias = make_bias(bias_rows(s), int(v), seed);
    Buffer P = Buffer::make("P", DType::f64, std::size_t(v * v), {v, v});
    Buffer Q = Buffer::make("Q", DType::f64, std::size_t(v * v), {v, v});
    Buffer B = Buffer::make("bias", DType::f64, bias.size(), {bias_rows(s), v});
    Buffer S = Buffer::make("seed", DType::i32, 1);
    std::copy(c.P.begin(), c.P.end(), P.as<double>());
    std::copy(c.Q.begin(), c.Q.end(), Q.as<double>());
    std::copy(bias.begin(), bias.end(), B.as<double>());
    S.as<std::int32_t>()[0] = std::int32_t(seed & 0x7fffffff);
    p.inputs = {std::move(P), std::move(Q), std::move(B), std::move(S)};
    p.outputs.push_back(Buffer::make("counts", DType::i32, std::size_t(v * v), {v, v}));
    p.outputs.push_back(Buffer::make("tokens", DType::i32, std::size_t(s["steps"])));
    p.outputs.push_back(Buffer::make("decisions", DType::i32, std::size_t(2 * kDecisionRounds), {kDecisionRounds, 2}));
    return p;
}

std::vector<std::vector<double>> oracle_accept(const Problem& p) {
    const int v = int(p.shape["v"]);
    const auto tok = greedy_oracle(p.in("P").as<double>(), p.in("bias").as<double>(), bias_rows(p.shape), v, int(p.shape["steps"]));
    std::vector<std::int32_t> dec(std::size_t(2 * kDecisionRounds));
    decide_rounds(p.in("P").as<double>(), p.in("Q").as<double>(), v, int(p.shape["k"]), speculative_round,
                  std::uint64_t(p.in("seed").as<std::int32_t>()[0]), dec.data());
    return {pair_probs(p.in("P").as<double>(), v), std::vector<double>(tok.begin(), tok.end()),
            std::vector<double>(dec.begin(), dec.end())};
}

std::string validate_accept(const Shape& s) {
    if (s["v"] < 2 || s["v"] > 64) return "v = " + std::to_string(s["v"]) + "; valid: 2..64";
    if (s["k"] < 1 || s["k"] > 16) return "k = " + std::to_string(s["k"]) + "; valid: 1..16";
    if (s["samples"] < 1 || s["samples"] > 100000000) return "samples = " + std::to_string(s["samples"]) + "; valid: 1..100000000";
    return {};
}

}  // namespace

// An accept variant's instance: both outputs from `round`; each call
// counts fresh samples (its call index enters the uniforms' seed).
Instance prepare_accept(Problem& p, RoundFn round) {
    auto calls = std::make_shared<std::atomic<std::uint64_t>>(0);
    const int v = int(p.shape["v"]), k = int(p.shape["k"]), steps = int(p.shape["steps"]), rows = bias_rows(p.shape);
    const std::int64_t n = p.shape["samples"];
    const double *P = p.in("P").as<double>(), *Q = p.in("Q").as<double>(), *B = p.in("bias").as<double>();
    const std::uint64_t seed = std::uint64_t(p.in("seed").as<std::int32_t>()[0]);
    std::int32_t* counts = p.out("counts").as<std::int32_t>();
    std::int32_t* tokens = p.out("tokens").as<std::int32_t>();
    std::int32_t* decisions = p.out("decisions").as<std::int32_t>();
    Instance inst;
    inst.run = [=] {
        std::fill(counts, counts + std::size_t(v) * v, 0);
        sample_pairs(P, Q, v, k, n, round, samples_seed(seed, (*calls)++), counts);
        greedy_tokens(P, Q, B, rows, v, k, steps, round, tokens);
        decide_rounds(P, Q, v, k, round, seed, decisions);
    };
    return inst;
}

namespace {

// The record playing a RoundFn's part (one replay at a time per thread).
thread_local const std::int32_t* g_record = nullptr;
thread_local std::size_t g_record_n = 0, g_record_at = 0;

int play_back(int, int, const int*, const double*, const double*, const double*, double, int, int* next, int* keep) {
    if (g_record_at + kRecordPerRound > g_record_n) return *next = -1, *keep = -1, -1;  // the record ran out
    const std::int32_t* r = g_record + g_record_at;
    g_record_at += kRecordPerRound;
    *next = r[1], *keep = r[2];
    return r[0];
}

// Level 07's grading: the accept op's outputs rebuilt by the grader's own
// loops (the first call's sampling seed), each round's answer read from the
// worker's record (harness/replay.hpp). A round the loops refuse ends them.
void replay_accept(Problem& p, const std::int32_t* record, std::size_t n) {
    const int v = int(p.shape["v"]), k = int(p.shape["k"]), steps = int(p.shape["steps"]);
    const double *P = p.in("P").as<double>(), *Q = p.in("Q").as<double>(), *B = p.in("bias").as<double>();
    const std::uint64_t seed = std::uint64_t(p.in("seed").as<std::int32_t>()[0]);
    std::int32_t* counts = p.out("counts").as<std::int32_t>();
    std::fill(counts, counts + std::size_t(v) * v, 0);
    g_record = record, g_record_n = n, g_record_at = 0;
    if (sample_pairs(P, Q, v, k, p.shape["samples"], play_back, samples_seed(seed, 0), counts))
        greedy_tokens(P, Q, B, bias_rows(p.shape), v, k, steps, play_back, p.out("tokens").as<std::int32_t>());
    else
        std::fill_n(p.out("tokens").as<std::int32_t>(), steps, -1);  // the record is not the loops': nothing after
    decide_rounds(P, Q, v, k, play_back, seed, p.out("decisions").as<std::int32_t>());
    g_record = nullptr;
}

}  // namespace

}  // namespace mw::speculative

MW_REGISTER_OP(accept, {
    .name = "accept", .lever = "speculative",
    .summary = "speculative decoding's acceptance rule on seeded Markov chains: the law of the first two tokens, greedy tokens, and each seeded round's decision",
    .axes = {"v", "k", "samples", "steps"},
    .default_shape = {{{"v", 8}, {"k", 3}, {"samples", 200000}, {"steps", 64}}},
    .quick_shape = {{{"v", 8}, {"k", 3}, {"samples", 50000}, {"steps", 33}}},
    .dtypes = {mw::DType::f64},
    // Per sample and round: k draws and k + 1 rows of v probabilities.
    .flops = [](const mw::Shape& s) { return double(s["samples"] * (2 * s["k"] + 1) * s["v"]); },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) { return double(16 * s["v"] * s["v"] + 4 * s["steps"]); },
    .unit = {"samples", [](const mw::Shape& s) { return double(s["samples"]); }},
    .make_problem = mw::speculative::make_accept,
    .oracle = mw::speculative::oracle_accept,
    // Every one of `samples` generations counted: a loop that stops early fails.
    .check = {.mode = mw::CheckMode::distribution,
              .per_output = {{"tokens", mw::CheckMode::exact}, {"decisions", mw::CheckMode::exact}}, .alpha = 1e-6,
              .distribution_samples = [](const mw::Shape& s) { return double(s["samples"]); }},
    .validate = mw::speculative::validate_accept });

MW_REGISTER_REPLAY(accept, "accept", {
    .record_values = [](const mw::Shape& s) { return mw::speculative::record_values(s["samples"], int(s["steps"])); },
    .rebuild = mw::speculative::replay_accept });

MW_REGISTER_VARIANT(accept_rejection_cpu, {
    .name = "rejection", .op = "accept", .lever = "speculative",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "accept min(1, p/q), resample from the normalized (p - q)+, keep the accepted positions: the target's law exactly",
    .dtypes = {mw::DType::f64},
    .prepare = [](mw::Problem& p) { return mw::speculative::prepare_accept(p, mw::speculative::speculative_round); } });
