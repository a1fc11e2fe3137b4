// The harness features whole-workload ops use, end to end through run_plans:
// units of work, counters, executed vs useful FLOPs (MFU/HFU), per-output
// check modes (token sequences with near-ties, a sampler's distribution), and
// peak memory. A toy "decode" op is registered here, in its own test binary,
// so that the lever-structure tests never see it.
//
// The op: L is a [steps][vocab] table of logits (seeded, with an exact tie at
// step 5 and a clear winner at step 2); the outputs are
//   logits  = L / 2                 (tolerance)
//   tokens  = argmax of each step   (token_sequence; the oracle adds margins)
//   counts  = `samples` draws from the categorical distribution P (distribution)
// and W is an 8 MiB input nobody reads, so that the problem's inputs and
// outputs have a known, sizeable footprint.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include "harness/check.hpp"
#include "harness/inputs.hpp"
#include "commands/lessons/lesson_render.hpp"
#include "harness/plot.hpp"
#include "harness/results.hpp"
#include "harness/runner.hpp"

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kVocab = 16, kCategories = 8;
constexpr std::size_t kMiB = 1024 * 1024;
const double kProbs[kCategories] = {0.3, 0.2, 0.15, 0.1, 0.1, 0.1, 0.04, 0.01};

mw::Problem make_decode(const mw::Shape& s, mw::DType dtype, std::uint64_t seed) {
    const std::int64_t steps = s["steps"];
    mw::Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(mw::Buffer::make("L", mw::DType::f32, steps * kVocab, {steps, kVocab}));
    p.inputs.push_back(mw::Buffer::make("P", mw::DType::f64, kCategories));
    p.inputs.push_back(mw::Buffer::make("W", mw::DType::f32, 2 * kMiB));  // 8 MiB
    mw::fill_uniform(p.in("L"), seed, -1, 1);
    mw::fill_uniform(p.in("W"), seed, -1, 1);
    float* L = p.in("L").as<float>();
    std::fill_n(L + 2 * kVocab, kVocab, 0.0f), L[2 * kVocab + 9] = 2.0f;  // step 2: margin 2
    L[5 * kVocab + 3] = L[5 * kVocab + 7] = 3.0f;                           // step 5: an exact tie
    std::copy(kProbs, kProbs + kCategories, p.in("P").as<double>());
    p.outputs.push_back(mw::Buffer::make("logits", mw::DType::f32, steps * kVocab, {steps, kVocab}));
    p.outputs.push_back(mw::Buffer::make("tokens", mw::DType::i32, steps, {1, steps}));
    p.outputs.push_back(mw::Buffer::make("counts", mw::DType::i32, kCategories));
    return p;
}

// The fp64 oracle: ties go to the lowest id.
std::vector<std::vector<double>> decode_oracle(const mw::Problem& p) {
    const std::int64_t steps = p.shape["steps"];
    const float* L = p.in("L").as<float>();
    std::vector<double> logits, ids, margins;
    for (std::int64_t t = 0; t < steps; ++t) {
        double top = -INFINITY, second = -INFINITY, id = 0;
        for (std::int64_t v = 0; v < kVocab; ++v) {
            const double x = L[t * kVocab + v];
            logits.push_back(x / 2);
            if (x > top) second = top, top = x, id = double(v);
            else second = std::max(second, x);
        }
        ids.push_back(id), margins.push_back(top - second);
    }
    return {logits, mw::token_oracle(ids, margins), {kProbs, kProbs + kCategories}};
}

MW_REGISTER_OP(harness_decode, {
    .name = "harness_decode", .lever = "harness_test", .summary = "toy decode loop for the harness tests",
    .axes = {"steps", "samples"},
    .default_shape = mw::Shape{{{"steps", 12}, {"samples", 20000}}},
    .quick_shape = mw::Shape{{{"steps", 12}, {"samples", 20000}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return double(2 * s["steps"] * kVocab); },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) { return double(8 * s["steps"] * kVocab); },
    .unit = {"tokens", [](const mw::Shape& s) { return double(s["steps"]); }},
    .make_problem = make_decode,
    .oracle = decode_oracle,
    .check = {.per_output = {{"tokens", mw::CheckMode::token_sequence}, {"counts", mw::CheckMode::distribution}}},
});

// How a variant departs from the correct decode.
struct Flaws {
    bool other_tie = false;        // a tie goes to the highest id (the oracle's: the lowest)
    std::int64_t diverge_at = -1;  // tokens differ from this step on
    bool biased = false;           // category 0 drawn 20% too often (relative)
    bool fixed_draws = false;      // every call draws the samples of the first call
    bool nudge = false;            // logits[0] one ulp up: within tolerance, not the same bits
    bool nan_after_first = false;  // logits[3] NaN in every call after the first (the checked one)
};

// A variant's run(): logits, argmax tokens, seeded samples.
void decode(mw::Problem& p, const Flaws& f, std::uint64_t call) {
    const std::int64_t steps = p.shape["steps"], n = p.shape["samples"];
    const float* L = p.in("L").as<float>();
    float* logits = p.out("logits").as<float>();
    std::int32_t* tokens = p.out("tokens").as<std::int32_t>();
    for (std::int64_t t = 0; t < steps; ++t) {
        std::int32_t id = 0;
        for (std::int64_t v = 0; v < kVocab; ++v) {
            logits[t * kVocab + v] = L[t * kVocab + v] / 2;
            const float x = L[t * kVocab + v], best = L[t * kVocab + id];
            if (x > best || (f.other_tie && x == best)) id = std::int32_t(v);
        }
        tokens[t] = id;
        if (f.diverge_at >= 0 && t >= f.diverge_at) tokens[t] = (id + 1) % kVocab;
    }
    double cdf[kCategories], acc = 0;
    for (int c = 0; c < kCategories; ++c) cdf[c] = acc += kProbs[c] * (f.biased && c == 0 ? 1.2 : 1.0);
    std::int32_t* counts = p.out("counts").as<std::int32_t>();
    std::fill_n(counts, kCategories, 0);
    if (f.nudge) logits[0] = std::nextafter(logits[0], INFINITY);
    if (f.nan_after_first && call > 1) logits[3] = std::numeric_limits<float>::quiet_NaN();
    std::mt19937_64 rng(p.seed * 1000 + (f.fixed_draws ? 1 : call));
    for (std::int64_t s = 0; s < n; ++s) {
        const double u = double(rng() >> 11) * 0x1.0p-53 * acc;
        ++counts[std::min<std::int64_t>(std::upper_bound(cdf, cdf + kCategories, u) - cdf, kCategories - 1)];
    }
}

// An instance counting its calls (a counter), holding `hold` bytes from
// prepare on and allocating `transient` bytes as a Buffer inside each call.
mw::Instance decode_instance(mw::Problem& p, Flaws f, std::size_t hold = 0, std::size_t transient = 0) {
    auto calls = std::make_shared<std::uint64_t>(0);
    auto held = std::make_shared<std::vector<char>>(hold, 1);
    mw::Instance inst;
    inst.run = [&p, f, calls, held, transient] {
        if (transient) {
            mw::Buffer scratch = mw::Buffer::make("scratch", mw::DType::u8, transient);
            std::fill_n(scratch.as<char>(), transient, 1);
        }
        decode(p, f, ++*calls);
    };
    inst.counters = [&p, calls] {
        return std::map<std::string, double>{{"calls", double(*calls)}, {"accepted_tokens", double(p.shape["steps"])}};
    };
    return inst;
}

MW_REGISTER_VARIANT(harness_decode_naive, {
    .name = "naive", .op = "harness_decode", .lever = "harness_test",
    .role = mw::Role::reference, .rung = 0, .rationale = "the decode as written",
    .prepare = [](mw::Problem& p) { return decode_instance(p, {}); }});

// Recomputes everything three times (so it executes 3x the useful FLOPs) and
// keeps 64 MiB of "activations" from prepare on.
MW_REGISTER_VARIANT(harness_decode_recompute, {
    .name = "recompute", .op = "harness_decode", .lever = "harness_test", .rung = 1,
    .rationale = "executes 3x the useful FLOPs, holds 64 MiB",
    .executed_flops = [](const mw::Shape& s) { return 3.0 * double(2 * s["steps"] * kVocab); },
    .prepare = [](mw::Problem& p) { return decode_instance(p, {}, 64 * kMiB); },
    .memory_model = [](const mw::Shape&) { return std::map<std::string, double>{{"held", 64.0 * kMiB}}; }});

// A 32 MiB Buffer made and dropped inside every call.
MW_REGISTER_VARIANT(harness_decode_scratch, {
    .name = "scratch", .op = "harness_decode", .lever = "harness_test", .rung = 2,
    .rationale = "allocates a 32 MiB Buffer in each call",
    .prepare = [](mw::Problem& p) { return decode_instance(p, {}, 0, 32 * kMiB); }});

// Its contract oracle holds 96 MiB while it runs: a harness that computed it
// inside the memory window would charge them to the variant.
MW_REGISTER_VARIANT(harness_decode_contract, {
    .name = "contract", .op = "harness_decode", .lever = "harness_test", .rung = 3,
    .rationale = "judged against a contract oracle that needs 96 MiB",
    .prepare = [](mw::Problem& p) { return decode_instance(p, {}); },
    .contract_oracle = [](const mw::Problem& p) {
        std::vector<char> big(96 * kMiB, 1);
        auto o = decode_oracle(p);
        o[0][0] += big[12345] - 1;
        return o;
    }});

MW_REGISTER_VARIANT(harness_decode_tie, {
    .name = "tie_diverger", .op = "harness_decode", .lever = "harness_test", .rung = 4,
    .rationale = "picks the other token of the step-5 tie and follows its own path after it",
    .prepare = [](mw::Problem& p) { return decode_instance(p, {.other_tie = true, .diverge_at = 6}); }});

MW_REGISTER_VARIANT(harness_decode_wrong, {
    .name = "real_diverger", .op = "harness_decode", .lever = "harness_test", .rung = 5,
    .rationale = "leaves the oracle's path at step 2, where the margin is 2",
    .prepare = [](mw::Problem& p) { return decode_instance(p, {.diverge_at = 2}); }});

MW_REGISTER_VARIANT(harness_decode_biased, {
    .name = "biased_sampler", .op = "harness_decode", .lever = "harness_test", .rung = 6,
    .rationale = "draws category 0 20% too often",
    .prepare = [](mw::Problem& p) { return decode_instance(p, {.biased = true}); }});

// Its arithmetic is integer dot products: MFU and the compute roof against
// the int8 peak, not the run's fp32 one.
MW_REGISTER_VARIANT(harness_decode_int_dot, {
    .name = "int_dot", .op = "harness_decode", .lever = "harness_test", .rung = 9,
    .rationale = "runs its FLOPs as int8 dot products",
    .compute = "int8",
    .prepare = [](mw::Problem& p) { return decode_instance(p, {}); }});

// Declares int8 arithmetic, but the path its prepare() picks computes in
// bf16 (as gemv_q's bf16 rungs pick vdpbf16ps or fp32 FMAs at run time):
// the instance's word wins.
MW_REGISTER_VARIANT(harness_decode_path_bf16, {
    .name = "path_bf16", .op = "harness_decode", .lever = "harness_test", .rung = 10,
    .rationale = "its path runs bf16 dot products",
    .compute = "int8",
    .prepare = [](mw::Problem& p) {
        mw::Instance inst = decode_instance(p, {});
        inst.compute = "bf16";
        return inst;
    }});

// Bit for bit the naive variant's outputs (its draws are those of a first call,
// like the naive outputs the harness keeps), and the same one ulp off.
MW_REGISTER_VARIANT(harness_decode_same_bits, {
    .name = "same_bits", .op = "harness_decode", .lever = "harness_test", .rung = 7,
    .rationale = "the naive arithmetic in the same order",
    .prepare = [](mw::Problem& p) { return decode_instance(p, {.fixed_draws = true}); },
    .identical_to = "naive"});

MW_REGISTER_VARIANT(harness_decode_ulp, {
    .name = "one_ulp_off", .op = "harness_decode", .lever = "harness_test", .rung = 8,
    .rationale = "one logit one ulp away from the naive variant's",
    .prepare = [](mw::Problem& p) { return decode_instance(p, {.fixed_draws = true, .nudge = true}); },
    .identical_to = "naive"});

// Right at the first call, a NaN in every later one: the timed calls, and so
// the checked call after them.
MW_REGISTER_VARIANT(harness_decode_nan_timed, {
    .name = "nan_when_timed", .op = "harness_decode", .lever = "harness_test", .rung = 11,
    .rationale = "a NaN logit in every call after the first",
    .prepare = [](mw::Problem& p) { return decode_instance(p, {.nan_after_first = true}); }});

mw::RunRequest quick_request(std::vector<std::string> variants = {}) {
    mw::RunRequest req;
    req.targets = {"harness_decode"};
    req.variants = std::move(variants);
    req.timing.budget_s = 0.01;
    req.timing.min_samples = 3;
    req.timing.max_samples = 3;
    req.threads = 1;
    return req;
}

nlohmann::json run(const mw::RunRequest& req) {
    mw::Ceilings c;
    c.dram_triad_gbps = {10.0};
    c.peaks = {{"fp32", "test", 1, 100.0}, {"int8", "test", 1, 400.0}, {"bf16", "test", 1, 200.0}};
    std::ostringstream progress;
    return mw::run_plans(mw::plan_runs(req), req, c, progress);
}

// One quick run of every variant, shared by the tests (about a second).
const nlohmann::json& doc() {
    static const nlohmann::json d = run(quick_request());
    return d;
}

const nlohmann::json& row(const std::string& variant) {
    for (auto& r : doc()["runs"])
        if (r["variant"] == variant) return r;
    throw std::runtime_error("no row for " + variant);
}

TEST(WorkloadUnits, RowsCarryUnitsPerSecond) {
    const auto& r = row("naive");
    EXPECT_EQ(r["unit"], "tokens");
    EXPECT_EQ(r["units_per_call"].get<double>(), 12);
    EXPECT_DOUBLE_EQ(r["units_per_s"].get<double>(), 12 / r["time_s"]["best"].get<double>());
}

TEST(WorkloadCounters, AreReadAfterTheTimedCalls) {
    const auto& r = row("naive");
    ASSERT_TRUE(r.contains("counters")) << r.dump(2);
    EXPECT_EQ(r["counters"]["accepted_tokens"].get<double>(), 12);
    // The checked call, the warm-up, 3 timed samples and the final checked call.
    const double calls = r["counters"]["calls"].get<double>();
    EXPECT_GE(calls, 6) << "counters read before the timed calls";
}

TEST(WorkloadFlops, ExecutedFlopsGiveHfuAndUsefulOnesMfu) {
    const auto& naive = row("naive");
    const auto& re = row("recompute");
    EXPECT_EQ(naive["executed_flops"], naive["flops"]);  // default: executed = useful
    EXPECT_DOUBLE_EQ(re["executed_flops"].get<double>(), 3 * re["flops"].get<double>());
    EXPECT_DOUBLE_EQ(re["mfu"].get<double>(), re["gflops"].get<double>() / 100.0);
    EXPECT_DOUBLE_EQ(re["hfu"].get<double>() / re["mfu"].get<double>(), 3.0);
    EXPECT_DOUBLE_EQ(naive["hfu"].get<double>(), naive["mfu"].get<double>());
    EXPECT_EQ(re["mfu_peak_gflops"].get<double>(), 100.0);
}

TEST(WorkloadFlops, IntegerDotVariantsAreJudgedByTheInt8Peak) {
    const auto& naive = row("naive");
    const auto& v = row("int_dot");
    EXPECT_EQ(naive["compute_dtype"], "f32");
    EXPECT_EQ(v["compute_dtype"], "int8");
    EXPECT_EQ(v["mfu_peak_gflops"].get<double>(), 400.0);
    EXPECT_DOUBLE_EQ(v["mfu"].get<double>(), v["gflops"].get<double>() / 400.0);
    // the compute roof too: min(peak, intensity x bandwidth) with the int8 peak
    const double roof = std::min(400.0, v["intensity"].get<double>() * 10.0);
    EXPECT_DOUBLE_EQ(v["roof_gflops"].get<double>(), roof);
    EXPECT_DOUBLE_EQ(naive["roof_gflops"].get<double>(), std::min(100.0, naive["intensity"].get<double>() * 10.0));
}

TEST(WorkloadFlops, TheInstancesComputeDtypeOverridesTheVariants) {
    auto check = [](const nlohmann::json& v) {
        EXPECT_EQ(v["compute_dtype"], "bf16");
        EXPECT_EQ(v["mfu_peak_gflops"].get<double>(), 200.0);
        EXPECT_DOUBLE_EQ(v["mfu"].get<double>(), v["gflops"].get<double>() / 200.0);
        EXPECT_DOUBLE_EQ(v["roof_gflops"].get<double>(), std::min(200.0, v["intensity"].get<double>() * 10.0));
    };
    check(row("path_bf16"));
    // and over rounds, where later rounds' samples are folded into the first's row
    auto req = quick_request({"path_bf16"});
    req.rounds = 2;
    const auto d = run(req);
    int rows = 0;
    for (auto& r : d["runs"])
        if (r["variant"] == "path_bf16") {
            check(r);
            EXPECT_EQ(r["rounds"], 2);
            ++rows;
        }
    EXPECT_EQ(rows, 1);
}

TEST(WorkloadChecks, PerOutputModesJudgeEachOutput) {
    for (const char* v : {"naive", "recompute", "scratch", "contract"}) {
        EXPECT_TRUE(row(v)["correct"].get<bool>()) << v << ": " << row(v).value("check_message", "");
        EXPECT_EQ(row(v)["near_ties"], 0) << v;
    }
    const auto& d = row("naive")["distribution"]["counts"];
    EXPECT_EQ(d["test"], "chi-square");
    EXPECT_EQ(d["samples"].get<double>(), 20000);
    EXPECT_EQ(d["dof"].get<int>(), kCategories - 1);
    EXPECT_GE(d["p_value"].get<double>(), 1e-6);
}

TEST(WorkloadChecks, DivergenceAtTheTieIsAcceptedAndReported) {
    const auto& r = row("tie_diverger");
    EXPECT_TRUE(r["correct"].get<bool>()) << r.value("check_message", "");
    EXPECT_EQ(r["near_ties"], 1);
    EXPECT_NE(r.value("check_message", "").find("tokens[0][5]"), std::string::npos) << r.dump(2);
}

TEST(WorkloadChecks, DivergenceAtALargeMarginFailsNamingTheStep) {
    const auto& r = row("real_diverger");
    EXPECT_FALSE(r["correct"].get<bool>());
    const std::string m = r.value("check_message", "");
    EXPECT_NE(m.find("tokens[0][2]"), std::string::npos) << m;
    EXPECT_NE(m.find("token 10, oracle 9"), std::string::npos) << m;
    EXPECT_NE(m.find("margin is 2"), std::string::npos) << m;
}

TEST(WorkloadChecks, ABiasedSamplerFailsTheDistributionCheck) {
    const auto& r = row("biased_sampler");
    EXPECT_FALSE(r["correct"].get<bool>());
    EXPECT_LT(r["distribution"]["counts"]["p_value"].get<double>(), 1e-6);
    EXPECT_NE(r.value("check_message", "").find("category 0"), std::string::npos) << r.dump(2);
}

TEST(WorkloadChecks, ANaNInATimedCallFailsTheRun) {
    const auto& r = row("nan_when_timed");
    EXPECT_FALSE(r["correct"].get<bool>()) << r.dump(2);
    const std::string m = r.value("check_message", "");
    EXPECT_NE(m.find("NaN/Inf"), std::string::npos) << m;
}

TEST(WorkloadMemory, AHeld64MiBShowsInPeakAndAgainstNaive) {
    const auto& naive = row("naive");
    const auto& re = row("recompute");
    const double io = naive["problem_bytes"].get<double>();
    EXPECT_GE(io, 8.0 * kMiB);  // W, L, P and the outputs
    EXPECT_EQ(re["problem_bytes"].get<double>(), io);
    EXPECT_LT(naive["peak_extra_bytes"].get<double>(), 1.0 * kMiB);
    EXPECT_GE(re["peak_extra_bytes"].get<double>(), 64.0 * kMiB);
    EXPECT_LT(re["peak_extra_bytes"].get<double>(), 65.0 * kMiB);
    EXPECT_DOUBLE_EQ(re["peak_bytes"].get<double>(), io + re["peak_extra_bytes"].get<double>());
    EXPECT_DOUBLE_EQ(naive["memory_vs_naive"].get<double>(), 1.0);
    EXPECT_NEAR(re["memory_vs_naive"].get<double>(), (io + 64.0 * kMiB) / io, 0.02 * (io + 64.0 * kMiB) / io);
}

TEST(WorkloadMemory, TheVariantsModelIsRecordedBesideThePeak) {
    const auto& re = row("recompute");
    ASSERT_TRUE(re.contains("memory_model")) << re.dump(2);
    EXPECT_EQ(re["memory_model"]["terms"]["held"].get<double>(), 64.0 * kMiB);
    EXPECT_EQ(re["memory_model"]["total"].get<double>(), 64.0 * kMiB);
    EXPECT_DOUBLE_EQ(re["peak_vs_model"].get<double>(), re["peak_extra_bytes"].get<double>() / (64.0 * kMiB));
    EXPECT_GE(re["peak_vs_model"].get<double>(), 1.0);
    EXPECT_LT(re["peak_vs_model"].get<double>(), 1.02);
    EXPECT_FALSE(row("naive").contains("memory_model"));
}

TEST(WorkloadIdentity, TheSameArithmeticIsBitIdentical) {
    const auto& r = row("same_bits");
    EXPECT_TRUE(r["correct"].get<bool>()) << r.value("check_message", "");
    EXPECT_EQ(r["identical_to"], "naive");
    EXPECT_TRUE(r["bit_identical"].get<bool>());
    EXPECT_FALSE(row("naive").contains("bit_identical"));
}

TEST(WorkloadIdentity, OneUlpOffFailsNamingTheElement) {
    const auto& r = row("one_ulp_off");
    EXPECT_FALSE(r["correct"].get<bool>());
    EXPECT_FALSE(r["bit_identical"].get<bool>());
    const std::string m = r.value("check_message", "");
    EXPECT_NE(m.find("output logits is not bit-identical to variant 'naive'"), std::string::npos) << m;
    EXPECT_NE(m.find("1 of 192 elements differ, the first at [0]"), std::string::npos) << m;
}

// Run alone, a variant is still held to the named one's bits: the harness
// runs that one on a fresh copy of the problem.
TEST(WorkloadIdentity, TheNamedVariantRunsWhenNotRequested) {
    mw::RunRequest req = quick_request({"same_bits", "one_ulp_off"});
    req.skip_naive = true;
    const auto d = run(req);
    ASSERT_EQ(d["runs"].size(), 2u);
    for (const auto& r : d["runs"]) {
        const bool same = r["variant"] == "same_bits";
        EXPECT_EQ(r["correct"].get<bool>(), same) << r.dump(2);
        EXPECT_EQ(r["bit_identical"].get<bool>(), same) << r.dump(2);
    }
}

TEST(WorkloadMemory, BuffersMadeInsideACallAreSeen) {
    const auto& r = row("scratch");
    EXPECT_GE(r["peak_extra_bytes"].get<double>(), 32.0 * kMiB) << "Buffer::make bypasses the tracker";
}

TEST(WorkloadMemory, TheContractOracleRunsOutsideTheWindow) {
    EXPECT_LT(row("contract")["peak_extra_bytes"].get<double>(), 1.0 * kMiB);
}

TEST(WorkloadReports, MarkdownAndCsvShowTheNewFields) {
    const std::string md = mw::report_markdown(doc());
    for (const char* s : {"tokens/s", "MFU", "HFU", "peak memory", "memory vs naive", "near-ties", "Counters:",
                          "accepted_tokens", "chi-square", "diverged from the oracle at a near-tie"})
        EXPECT_NE(md.find(s), std::string::npos) << s << "\n" << md;
    const std::string csv = mw::report_csv(doc());
    const std::string header = csv.substr(0, csv.find('\n'));
    for (const char* s : {"units_per_s", "executed_flops", "mfu", "hfu", "peak_bytes", "memory_vs_naive",
                          "near_ties", "dist_p_value", "counter:accepted_tokens", "counter:calls"})
        EXPECT_NE(header.find(s), std::string::npos) << s;
    // Every line has as many fields as the header (commas inside quotes do not count).
    auto fields = [](const std::string& l) {
        int n = 1;
        bool quoted = false;
        for (char ch : l) quoted ^= ch == '"', n += ch == ',' && !quoted;
        return n;
    };
    std::istringstream lines(csv);
    for (std::string l; std::getline(lines, l);) EXPECT_EQ(fields(l), fields(header)) << l;
}

TEST(WorkloadReports, LessonPlaceholdersReachTheNewFields) {
    mw::lesson::Context c;
    c.runs = doc()["runs"];
    c.op = "harness_decode";
    c.shape = mw::Shape{{{"steps", 12}, {"samples", 20000}}};
    auto num = [&](const std::string& e) { return std::get<double>(mw::lesson::evaluate(e, c)); };
    EXPECT_DOUBLE_EQ(num("run:naive.units_per_s"), row("naive")["units_per_s"].get<double>());
    EXPECT_DOUBLE_EQ(num("run:naive.counters.accepted_tokens"), 12);
    EXPECT_DOUBLE_EQ(num("run:recompute.hfu / run:recompute.mfu"), 3);
    EXPECT_DOUBLE_EQ(num("memory:recompute/naive"), row("recompute")["memory_vs_naive"].get<double>());
    EXPECT_DOUBLE_EQ(num("model:recompute.executed_flops"), 3 * num("model:recompute.flops"));
    EXPECT_DOUBLE_EQ(num("model:naive.units"), 12);
    EXPECT_DOUBLE_EQ(num("run:tie_diverger.near_ties"), 1);
    EXPECT_LT(num("run:biased_sampler.distribution.counts.p_value"), 1e-6);
    EXPECT_EQ(std::get<std::string>(mw::lesson::evaluate("run:naive.unit", c)), "tokens");
}

TEST(WorkloadPlots, AMemoryChartPerOp) {
    if (!mw::gnuplot_available()) GTEST_SKIP() << "gnuplot is not installed";
    const fs::path dir = fs::temp_directory_path() / ("memwall-workload-plot-" + std::to_string(::getpid()));
    std::vector<fs::path> written;
    mw::plot_results(doc(), dir, &written);
    const fs::path svg = dir / "memory-harness_test-harness_decode-cpu.svg";
    ASSERT_TRUE(fs::exists(svg));
    EXPECT_TRUE(fs::exists(dir / "memory-harness_test-harness_decode-cpu.png"));
    std::ifstream in(svg);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    for (const char* s : {"recompute", "Peak memory", "MiB"}) EXPECT_NE(text.find(s), std::string::npos) << s;
    fs::remove_all(dir);
}

}  // namespace
