// Lessons: the placeholder language (numbers come from results files, never
// from the keyboard), every level's lesson resolving against its recorded
// results, and `memwall lesson` driven the way a student or a script drives it.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "tests/run_memwall.hpp"
#include "commands/lessons/lesson_render.hpp"
#include "harness/results.hpp"
#include "harness/runner.hpp"
#include "reference/vectorization/gemm.hpp"

namespace fs = std::filesystem;
using namespace mw::lesson;

namespace {

const fs::path kRoot = MEMWALL_SOURCE_DIR;

using mw::test::Result;

Result memwall(const std::string& args) { return mw::test::run_memwall(args, "MEMWALL_SOURCE_DIR=" + kRoot.string()); }

fs::path tmp(const std::string& name) {
    return fs::temp_directory_path() / ("memwall-lesson-" + std::to_string(::getpid()) + "-" + name);
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

double num(const Value& v) { return std::get<double>(v); }

// Two runs and a machine with a 128 GFLOP/s one-thread AVX-512 peak (2 GHz
// at 64 FLOP/cycle) and 10 GB/s of DRAM.
Context toy() {
    Context c;
    c.runs = nlohmann::json::array({
        {{"variant", "naive"}, {"backend", "cpu"}, {"ran", true}, {"shape_str", "k=64,m=64,n=64"},
         {"gflops", 0.5}, {"time_s", {{"best", 2.0}, {"samples", 5}}}},
        {{"variant", "fast"}, {"backend", "cpu"}, {"ran", true}, {"shape_str", "k=64,m=64,n=64"},
         {"gflops", 40.0}, {"time_s", {{"best", 0.025}, {"samples", 30}}}},
    });
    c.ceilings.dram_triad_gbps = {6.0, 10.0};
    c.ceilings.peaks = {{"fp32", "avx512f", 1, 128.0}, {"fp32", "avx512f", 2, 256.0}};
    c.ceilings.cache_sweep_1t = {{32768, 200}, {1 << 20, 70}, {1 << 30, 10}};
    c.ceilings.l1d_bytes = 49152;
    c.machine = {{"cpu_model", "Toy CPU"}, {"cores", 2}};
    c.machine_name = "toy-box";
    c.shape = mw::Shape{{{"m", 64}, {"n", 64}, {"k", 64}}};
    return c;
}

}  // namespace

TEST(LessonPlaceholders, RunFieldsSpeedupsAndCeilings) {
    const Context c = toy();
    EXPECT_DOUBLE_EQ(num(evaluate("run:fast.gflops", c)), 40.0);
    EXPECT_DOUBLE_EQ(num(evaluate("run:naive.time_s.samples", c)), 5);
    EXPECT_DOUBLE_EQ(num(evaluate("run:fast.time_ms", c)), 25.0);
    EXPECT_DOUBLE_EQ(num(evaluate("run:fast@m=64,n=64,k=64.gflops", c)), 40.0);
    EXPECT_DOUBLE_EQ(num(evaluate("speedup:fast/naive", c)), 80.0);
    EXPECT_DOUBLE_EQ(num(evaluate("ceiling:dram_gbps", c)), 10.0);
    EXPECT_DOUBLE_EQ(num(evaluate("ceiling:dram_1t_gbps", c)), 6.0);
    EXPECT_DOUBLE_EQ(num(evaluate("ceiling:peak.fp32", c)), 256.0);
    EXPECT_DOUBLE_EQ(num(evaluate("ceiling:peak.fp32.1t", c)), 128.0);
    EXPECT_DOUBLE_EQ(num(evaluate("ceiling:ridge", c)), 25.6);
    EXPECT_DOUBLE_EQ(num(evaluate("ceiling:clock_ghz", c)), 2.0);
    // A measured clock wins over the ISA-width guess (a Zen 4 core runs
    // AVX-512 at 32 FLOPs a cycle, not 64).
    Context z = toy();
    z.ceilings.clock_ghz = 4.0;
    EXPECT_DOUBLE_EQ(num(evaluate("ceiling:clock_ghz", z)), 4.0);
    EXPECT_DOUBLE_EQ(num(evaluate("ceiling:flops_per_cycle", z)), 32.0);
    EXPECT_EQ(std::get<std::string>(evaluate("machine.cpu_model", c)), "Toy CPU");
    EXPECT_EQ(std::get<std::string>(evaluate("machine.name", c)), "toy-box");
    EXPECT_DOUBLE_EQ(num(evaluate("shape:k", c)), 64);
}

// range:a/b: the speedup round by round over paired rounds (--rounds N),
// as "lo–hi"; results with one round are named, never guessed.
TEST(LessonPlaceholders, RangeComesFromPairedRounds) {
    Context c = toy();
    EXPECT_THROW(evaluate("range:fast/naive", c), Error);  // one round each
    c.runs[0]["time_s"]["round_best"] = {2.0, 2.2, 2.1};
    try {
        evaluate("range:fast/naive", c);
        ADD_FAILURE() << "a range from one round of fast";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--rounds"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("'fast' has 1 round"), std::string::npos) << e.what();
    }
    c.runs[1]["time_s"]["round_best"] = {0.025, 0.025, 0.03};  // 80x, 88x, 70x
    EXPECT_EQ(std::get<std::string>(evaluate("range:fast/naive", c)), "70–88");
    EXPECT_EQ(render("about {{speedup:fast/naive|2}}× ({{range:fast/naive}}×)", c), "about 80× (70–88×)");
    c.runs[1]["time_s"]["round_best"] = {0.025, 0.025};  // unpaired
    EXPECT_THROW(evaluate("range:fast/naive", c), Error);
}

// {{results:stem}} names the figures `memwall plot` draws for an op
// (roofline-STEM.png): the shape joins the stem only where the results hold
// several shapes of the op, as level 01's recorded run does.
TEST(LessonPlaceholders, ResultsStemIsThePlotsFileName) {
    Context c = toy();
    c.op = "gemm";
    auto run = [](const std::string& op, const std::string& shape) {
        return nlohmann::json{{"variant", "naive"}, {"lever", "vectorization"}, {"op", op}, {"backend", "cpu"},
                              {"ran", true}, {"shape_str", shape}, {"gflops", 1.0}, {"intensity", 1.0},
                              {"time_s", {{"best", 1.0}}}};
    };
    c.runs = nlohmann::json::array({run("gemm", "k=64,m=64,n=64"), run("softmax", "cols=7,rows=3")});
    EXPECT_EQ(std::get<std::string>(evaluate("results:stem", c)), "vectorization-gemm-cpu");
    EXPECT_EQ(std::get<std::string>(evaluate("results:stem:softmax", c)), "vectorization-softmax-cpu");
    c.runs.push_back(run("gemm", "k=128,m=128,n=128"));
    EXPECT_EQ(std::get<std::string>(evaluate("results:stem", c)), "vectorization-gemm-cpu-k-64-m-64-n-64");
    c.shape = mw::Shape{{{"m", 128}, {"n", 128}, {"k", 128}}};
    EXPECT_EQ(std::get<std::string>(evaluate("results:stem", c)), "vectorization-gemm-cpu-k-128-m-128-n-128");
    c.shape = mw::Shape{{{"m", 32}, {"n", 32}, {"k", 32}}};
    EXPECT_THROW(evaluate("results:stem", c), Error);  // two shapes, neither the lesson's
    EXPECT_EQ(std::get<std::string>(evaluate("results:stem:softmax", c)), "vectorization-softmax-cpu");
    EXPECT_THROW(evaluate("results:stem:nosuchop", c), Error);
}

TEST(LessonPlaceholders, Arithmetic) {
    const Context c = toy();
    EXPECT_DOUBLE_EQ(num(evaluate("run:fast.gflops / run:naive.gflops", c)), 80.0);
    EXPECT_DOUBLE_EQ(num(evaluate("1 + 2 * 3", c)), 7.0);
    EXPECT_DOUBLE_EQ(num(evaluate("(1 + 2) * 3", c)), 9.0);
    EXPECT_DOUBLE_EQ(num(evaluate("-2 * -3", c)), 6.0);
    EXPECT_DOUBLE_EQ(num(evaluate("min(3, 1, 2)", c)), 1.0);
    EXPECT_DOUBLE_EQ(num(evaluate("max(ceiling:dram_gbps, 4)", c)), 10.0);
    // The one-thread sweep point at or above the working set.
    EXPECT_DOUBLE_EQ(num(evaluate("bw1(16384)", c)), 200.0);
    EXPECT_DOUBLE_EQ(num(evaluate("bw1(4 * 512 * 512)", c)), 70.0);  // exactly 1 MiB
    EXPECT_DOUBLE_EQ(num(evaluate("bw1(4 * 1024 * 1024)", c)), 10.0);
    EXPECT_DOUBLE_EQ(num(evaluate("bw1(4 * 256 * 256)", c)), 70.0);
}

TEST(LessonPlaceholders, ModelComesFromTheVariantsOwnBytes) {
    Context c = toy();
    c.shape = mw::Shape{{{"m", 1024}, {"n", 1024}, {"k", 1024}}};
    const double flops = 2.0 * 1024 * 1024 * 1024;
    const double bytes = mw::gemm::bytes_blocked(*c.shape, 1, 1024);
    EXPECT_DOUBLE_EQ(num(evaluate("model:naive.flops", c)), flops);
    EXPECT_DOUBLE_EQ(num(evaluate("model:naive.bytes", c)), bytes);
    EXPECT_DOUBLE_EQ(num(evaluate("model:naive.intensity", c)), flops / bytes);
    c.self = "blocked";
    EXPECT_DOUBLE_EQ(num(evaluate("model:self.bytes", c)), mw::gemm::bytes_blocked(*c.shape, 32, 512));
}

// A recorded run of the variant at the shape holds the models as they were
// on its machine (some depend on it: the speculative lever sizes its target
// from the L3): those figures win over the registry's, so a copy rendered
// anywhere quotes the record.
TEST(LessonPlaceholders, ModelPrefersTheRecordedRunsFigures) {
    Context c = toy();
    c.op = "gemm";
    c.runs[0]["op"] = "gemm";
    c.runs[0]["bytes"] = 12345.0;
    c.runs[0]["units_per_call"] = 7.0;
    EXPECT_DOUBLE_EQ(num(evaluate("model:naive.bytes", c)), 12345.0);
    EXPECT_DOUBLE_EQ(num(evaluate("model:naive.flops", c)), 2.0 * 64 * 64 * 64) << "not recorded: the registry's";
    c.shape = mw::Shape{{{"m", 32}, {"n", 64}, {"k", 64}}};  // no run at this shape: the registry's
    EXPECT_DOUBLE_EQ(num(evaluate("model:naive.bytes", c)), mw::gemm::bytes_blocked(*c.shape, 1, 1024));
}

TEST(LessonPlaceholders, PredictEvaluatesTheStepsFormula) {
    Context c = toy();
    c.steps = nlohmann::json::array({{{"variant", "naive"}, {"predict", {{"gflops", "ceiling:clock_ghz * 0.5"}}}}});
    EXPECT_DOUBLE_EQ(num(evaluate("predict:naive", c)), 1.0);
    EXPECT_THROW(evaluate("predict:fast", c), Error);
}

// A predicted time: FLOPs over the predicted GFLOP/s, or the step's own
// time_ms formula; an op without arithmetic must state one.
TEST(LessonPlaceholders, PredictTimeFromGflopsOrItsOwnFormula) {
    Context c = toy();
    const double flops = 2.0 * 64 * 64 * 64;
    c.op = "gemm";
    c.steps = nlohmann::json::array({{{"variant", "naive"}, {"predict", {{"gflops", "0.5"}}}},
                                     {{"variant", "blocked"}, {"predict", {{"gflops", "0"}, {"time_ms", "2 * 3"}}}}});
    EXPECT_DOUBLE_EQ(num(evaluate("predict_time:naive", c)), flops / 0.5 / 1e6);
    EXPECT_DOUBLE_EQ(num(evaluate("predict_time:blocked", c)), 6.0);
    c.steps[0]["predict"]["gflops"] = "0";
    EXPECT_THROW(evaluate("predict_time:naive", c), Error);  // no positive rate to divide by
    EXPECT_THROW(evaluate("predict_time:simd", c), Error);   // no such step
}

// The datapath in words comes from the measured clock, not the ISA's name:
// the same AVX-512 peak kernel at 64 and at 32 FLOP/cycle.
TEST(LessonPlaceholders, DatapathFollowsTheMeasuredClock) {
    Context c = toy();  // 128 GFLOP/s one-thread avx512f peak
    c.ceilings.clock_ghz = 2.0;
    EXPECT_DOUBLE_EQ(num(evaluate("ceiling:flops_per_cycle", c)), 64.0);
    auto words = std::get<std::string>(evaluate("ceiling:datapath", c));
    EXPECT_NE(words.find("2 512-bit FMAs"), std::string::npos) << words;
    EXPECT_NE(words.find("Xeon"), std::string::npos) << words;
    c.ceilings.clock_ghz = 4.0;
    EXPECT_DOUBLE_EQ(num(evaluate("ceiling:flops_per_cycle", c)), 32.0);
    words = std::get<std::string>(evaluate("ceiling:datapath", c));
    EXPECT_NE(words.find("1 512-bit FMA per cycle"), std::string::npos) << words;
    EXPECT_NE(words.find("256-bit-wide"), std::string::npos) << words;
    EXPECT_NE(std::get<std::string>(evaluate("ceiling:clock_source", c)).find("measured"), std::string::npos);
    c.ceilings.clock_ghz = 0;  // an older ceilings file: said to be assumed
    EXPECT_NE(std::get<std::string>(evaluate("ceiling:clock_source", c)).find("not measured"), std::string::npos);
}

// {{claims:LEVER}}: a table of that lever's claims only, cells with '|'
// escaped, a tally of the verdicts; an open claim ("not measurable here")
// counted in the tally, not listed; a lever with no claims is an error.
TEST(LessonPlaceholders, ClaimsTableOfOneLever) {
    Context c = toy();
    c.claims_file = tmp("claims.json").string();
    {
        std::ofstream(c.claims_file) << R"({"command": "memwall reproduce", "claims": [
            {"id": "a.one", "lever": "alpha", "statement": "x | y", "published_text": "2x", "ours_text": "2.1x", "verdict": "reproduced"},
            {"id": "b.one", "lever": "beta", "statement": "other", "published_text": "1", "ours_text": "1", "verdict": "reproduced"},
            {"id": "a.two", "lever": "alpha", "statement": "z", "published_text": "5 GB", "ours_text": "4 GB", "verdict": "differs"},
            {"id": "a.open", "lever": "alpha", "statement": "w", "published_text": "7", "ours_text": "—", "verdict": "not measurable here"}]})";
    }
    const std::string t = std::get<std::string>(evaluate("claims:alpha", c));
    EXPECT_NE(t.find("| `a.one` | x \\| y | 2x | 2.1x | reproduced |"), std::string::npos) << t;
    EXPECT_NE(t.find("| `a.two` | z | 5 GB | 4 GB | differs |"), std::string::npos) << t;
    EXPECT_EQ(t.find("b.one"), std::string::npos) << t;
    EXPECT_NE(t.find("1 differs, 1 not measurable here, 1 reproduced"), std::string::npos) << t;
    EXPECT_EQ(t.find("a.open"), std::string::npos) << "an open claim is counted, not listed: " << t;
    EXPECT_THROW(evaluate("claims:gamma", c), Error);
    fs::remove(c.claims_file);
}

// {{gpu:OP}}: the op's CUDA rungs at the GPU kit's shape, each rung's time
// at two GPUs' spec roofs from its own models (by hand: the larger of FLOPs
// over the peak of its compute dtype and bytes over HBM bandwidth), and a
// measured time only from a correct CUDA run at that very shape.
TEST(LessonPlaceholders, GpuTableOfOneOp) {
    Context c = toy();
    c.gpu_shapes_file = tmp("shapes").string();
    c.results_root = tmp("results").string();
    std::ofstream(c.gpu_shapes_file) << "# op  GPU shape  emulated shape\nattention b=1,h=2,hk=1,s=65,d=32 b=1,h=1,hk=1,s=7,d=8\n";
    fs::create_directories(fs::path(c.results_root) / "h100x");
    const std::string at = "b=1,causal=0,d=32,h=2,hk=1,s=65";
    std::ofstream(fs::path(c.results_root) / "h100x" / "fusion-cuda.json") << R"({"machine": {"gpu": {"name": "NVIDIA H100 80GB HBM3"}}, "runs": [
        {"op": "attention", "variant": "flash2", "backend": "cuda", "correct": true, "shape_str": ")" << at << R"(", "time_s": {"best": 0.00125}},
        {"op": "attention", "variant": "smem_tiles", "backend": "cuda", "correct": false, "shape_str": ")" << at << R"(", "time_s": {"best": 0.001}},
        {"op": "attention", "variant": "naive", "backend": "cuda", "correct": true, "shape_str": "b=1,causal=0,d=32,h=2,hk=1,s=66", "time_s": {"best": 0.002}}]})";
    const std::string t = std::get<std::string>(evaluate("gpu:attention", c));
    EXPECT_NE(t.find("At `" + at + "`"), std::string::npos) << t;
    EXPECT_NE(t.find("| flash2 | fp32 |"), std::string::npos) << t;
    EXPECT_NE(t.find("1.25 ms on NVIDIA H100 80GB HBM3, results/h100x |"), std::string::npos) << t;
    const auto row = [&](const std::string& v) { return t.substr(t.find("| " + v + " |"), t.find('\n', t.find("| " + v + " |")) - t.find("| " + v + " |")); };
    EXPECT_NE(row("smem_tiles").find("not measured"), std::string::npos) << "an incorrect run is no measurement: " << t;
    EXPECT_NE(row("naive").find("not measured"), std::string::npos) << "a run at another shape is not this one: " << t;
    // By hand, the bf16 tensor-core rung on the H100 SXM (989.4 bf16 TFLOP/s, 3350 GB/s).
    const mw::Shape s = mw::parse_shape(at, mw::find_op("attention")->default_shape, mw::find_op("attention")->axes,
                                        mw::find_op("attention")->flag_axes);
    bool checked = false;
    auto rungs = mw::variants_of("attention", mw::Backend::cuda);
    for (const auto* v : mw::variants_of("attention", mw::Backend::cuda_emu)) rungs.push_back(v);
    for (const auto* v : rungs)
        if (v->name == "flash2_bf16" && !checked) {
            checked = true;
            const double want = std::max(v->executed_flops(s) / 989.4e12, v->bytes(s, mw::DType::f32) / 3350e9);
            char cell[64];
            std::snprintf(cell, sizeof cell, "| %.3g ms (%s) |", want * 1e3,
                          v->executed_flops(s) / 989.4e12 >= v->bytes(s, mw::DType::f32) / 3350e9 ? "compute" : "memory");
            EXPECT_NE(row("flash2_bf16").find(std::string("| bf16 |")), std::string::npos) << t;
            EXPECT_NE(row("flash2_bf16").find(cell), std::string::npos) << cell << " in " << t;
        }
    if (!checked) ADD_FAILURE() << "no flash2_bf16 rung (cuda or cuda-emu) to check the prediction by hand with";
    EXPECT_THROW(evaluate("gpu:no_such_op", c), Error);
    fs::remove_all(c.results_root);
    fs::remove(c.gpu_shapes_file);
}

// The committed verdicts cover every claim in the claims file: a claim
// added without re-running `memwall reproduce` would be missing from the
// lessons' tables.
TEST(Lessons, ClaimsReportIsCurrent) {
    const auto claims = mw::read_json_file((kRoot / "experiments" / "claims.json").string());
    const auto report = mw::read_json_file((kRoot / "results" / "claims" / "reproduce.json").string());
    std::set<std::string> reported;
    for (auto& c : report["claims"]) reported.insert(c.value("id", ""));
    int n = 0;
    for (auto& c : claims["claims"]) {
        ++n;
        EXPECT_TRUE(reported.count(c.value("id", ""))) << c.value("id", "") << " has no verdict in results/claims/reproduce.json: "
                                                       << "memwall reproduce --run-experiments --out results/claims/reproduce.json";
    }
    EXPECT_GT(n, 0);
}

TEST(LessonPlaceholders, Formats) {
    const Context c = toy();
    EXPECT_EQ(render("{{run:fast.gflops}}", c), "40");
    EXPECT_EQ(render("{{ 1 / 3 }}", c), "0.333");
    EXPECT_EQ(render("{{ 1 / 3 | 2 }}", c), "0.33");
    EXPECT_EQ(render("{{ 0.7372 | pct }}", c), "74%");
    EXPECT_EQ(render("{{ 29.6 | int }}", c), "30");
    EXPECT_EQ(render("{{ 65536 | KiB }}", c), "64 KiB");
    EXPECT_EQ(render("{{ 4 * 1024 * 1024 | MiB }}", c), "4 MiB");
    EXPECT_EQ(fmt_num(4303355904.0), "4303355904");
    EXPECT_EQ(fmt_num(0.000123), "0.000123");
    EXPECT_EQ(render("a {{machine.name}} b", c), "a toy-box b");
}

TEST(LessonPlaceholders, UnresolvedOnesAreReportedNeverGuessed) {
    const Context c = toy();
    std::vector<std::string> errors;
    const std::string out = render("x {{run:nosuch.gflops}} y {{ceiling:warp_drive}} z {{run:fast.gflops/2}}", c, &errors);
    ASSERT_EQ(errors.size(), 3u);
    EXPECT_NE(errors[0].find("nosuch"), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find("fast"), std::string::npos) << "should list the runs there are: " << errors[0];
    EXPECT_NE(errors[1].find("dram_gbps"), std::string::npos) << "should list valid ceilings: " << errors[1];
    EXPECT_EQ(out, "x ?? y ?? z ??");
    EXPECT_THROW(render("{{run:nosuch.gflops}}", c), Error);
    EXPECT_THROW(render("{{ 1 + }}", c), Error);
    EXPECT_THROW(render("{{ 1 / 0 }}", c), Error);
    EXPECT_THROW(render("{{ run:fast.gflops | furlongs }}", c), Error);
    // A run at another shape is not silently used.
    Context other = c;
    other.shape = mw::Shape{{{"m", 8}, {"n", 8}, {"k", 8}}};
    EXPECT_THROW(evaluate("run:fast.gflops", other), Error);
}

TEST(LessonSections, StepsAndMeasureMarkers) {
    const auto s = split_sections("# T\nintro\n<!-- step: naive -->\nA\n<!-- measure -->\nB\n"
                                  "<!-- step: fast -->\nC\n<!-- end -->\nD\n");
    EXPECT_EQ(s.intro, "# T\nintro\n");
    ASSERT_EQ(s.steps.size(), 2u);
    EXPECT_EQ(s.steps[0].variant, "naive");
    EXPECT_EQ(s.steps[0].before, "A\n");
    EXPECT_EQ(s.steps[0].after, "B\n");
    EXPECT_EQ(s.steps[1].before, "C\n");
    EXPECT_EQ(s.steps[1].after, "");
    EXPECT_EQ(s.outro, "D\n");
}

// Every lesson.md resolves against its level's recorded results file, has a
// section per step in order, and a prediction formula per step.
TEST(Lessons, EveryLevelResolvesAgainstItsResults) {
    const auto ids = level_ids(kRoot / "levels");
    int lessons = 0;
    for (auto& id : ids) {
        if (!fs::exists(kRoot / "levels" / id / "lesson.md")) continue;
        ++lessons;
        const Level L = load_level(kRoot / "levels", kRoot, id);
        std::vector<std::string> errors;
        const std::string doc = render_document(L, recorded_context(L), &errors);
        for (auto& e : errors) ADD_FAILURE() << id << ": " << e;
        EXPECT_EQ(doc.find("{{"), std::string::npos) << id;
        const auto sections = split_sections(L.lesson_text);
        const auto& steps = L.manifest["steps"];
        ASSERT_EQ(sections.steps.size(), steps.size()) << id;
        for (std::size_t i = 0; i < steps.size(); ++i) {
            EXPECT_EQ(sections.steps[i].variant, steps[i]["variant"].get<std::string>()) << id << " step " << i;
            EXPECT_FALSE(sections.steps[i].after.empty()) << id << " step " << i << " has no <!-- measure --> part";
            EXPECT_TRUE(steps[i].contains("predict")) << id << " step " << i << " has no predict formula";
            // Every step predicts a time too, byte-only ops (a transpose) included.
            Context sc = for_op(recorded_context(L), step_op(steps[i], L.op));
            sc.self = steps[i]["variant"].get<std::string>();  // (a variant may be named "self")
            try {
                const double ms = num(evaluate("predict_time:self", sc));
                EXPECT_TRUE(std::isfinite(ms) && ms > 0) << id << " step " << i << ": " << ms;
            } catch (const std::exception& e) {
                ADD_FAILURE() << id << " step " << i << ": " << e.what();
            }
        }
    }
    EXPECT_GE(lessons, 1);
}

// A rendered lesson says which of its recorded runs were disturbed while
// timed, and why; results with none say nothing of it.
TEST(Lessons, DisturbedRunsAreNamedInTheRenderedCopy) {
    Level L = load_level(kRoot / "levels", kRoot, "01");
    Context ctx = recorded_context(L);
    EXPECT_EQ(render_document(L, ctx).find("disturbed while timed"), std::string::npos);
    ASSERT_FALSE(ctx.runs.empty());
    auto& r = ctx.runs[0];
    r["disturbance"] = {{"disturbed", true}, {"why", "other processes used 40% of its 2 cores"}};
    const std::string doc = render_document(L, ctx);
    const std::string named = r["op"].get<std::string>() + " / " + r["variant"].get<std::string>() + " at " +
                              r["shape_str"].get<std::string>() + " (other processes used 40% of its 2 cores)";
    EXPECT_NE(doc.find("**1 of its runs were disturbed while timed**"), std::string::npos) << doc.substr(0, 2000);
    EXPECT_NE(doc.find(named), std::string::npos) << doc.substr(0, 2000);
    r["timing_meaningful"] = false;  // an emulated row's time means nothing either way
    EXPECT_EQ(render_document(L, ctx).find("disturbed while timed"), std::string::npos);
}

// The committed rendered copy is what `memwall lesson --render` makes from
// the committed results (regenerate it after re-measuring).
TEST(Lessons, RenderedCopiesAreUpToDate) {
    for (auto& id : level_ids(kRoot / "levels")) {
        const fs::path committed = kRoot / "levels" / id / "lesson.rendered.md";
        if (!fs::exists(committed)) continue;
        const Level L = load_level(kRoot / "levels", kRoot, id);
        EXPECT_EQ(render_document(L, recorded_context(L)), slurp(committed))
            << committed << " is stale: memwall lesson " << id << " --render --out " << committed;
    }
}

// Every file a committed rendered lesson links, its figures among them, is
// in the tree (a figure is drawn by `memwall plot RESULTS`; a lesson moved
// to another machine's results needs that machine's figures committed).
TEST(Lessons, RenderedCopiesLinkOnlyFilesInTheTree) {
    const std::regex link(R"(\]\(([^)\s]+)\))");
    int checked = 0;
    for (auto& id : level_ids(kRoot / "levels")) {
        const fs::path doc = kRoot / "levels" / id / "lesson.rendered.md";
        if (!fs::exists(doc)) continue;
        const std::string md = slurp(doc);
        for (std::sregex_iterator it(md.begin(), md.end(), link), end; it != end; ++it) {
            std::string target = (*it)[1].str();
            if (target.find("://") != std::string::npos || target[0] == '#' || target.rfind("mailto:", 0) == 0) continue;
            target = target.substr(0, target.find('#'));
            ++checked;
            EXPECT_TRUE(fs::exists(doc.parent_path() / target)) << doc << " links " << target << ", which is not in the tree";
        }
    }
    EXPECT_GT(checked, 0) << "the rendered lessons link their figures";
}

// A level's "extra_results" join its runs (level 08 quotes an mpirun run
// of expert_parallel_overlap beside its single-process moe_ffn run); a file
// that is not there adds nothing, and the placeholder that needs it says
// which run is missing.
TEST(Lessons, ExtraResultsJoinTheLevelsRuns) {
    Level L = load_level(kRoot / "levels", kRoot, "08");
    auto has = [](const Level& l, const std::string& v) {
        for (const auto& r : l.results["runs"])
            if (r.value("variant", "") == v) return true;
        return false;
    };
    EXPECT_TRUE(has(L, "sorted_grouped"));
    EXPECT_TRUE(has(L, "expert_parallel_overlap"));
    L.manifest["extra_results"] = nlohmann::json::array({"no-such-file.json"});
    L.results = mw::read_json_file(L.results_file.string());
    append_extra_runs(L);
    EXPECT_FALSE(has(L, "expert_parallel_overlap"));
    try {
        render_document(L, recorded_context(L));
        ADD_FAILURE() << "level 08 rendered without its expert_parallel_overlap run";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("expert_parallel_overlap"), std::string::npos) << e.what();
    }
}

TEST(LessonCli, BadLevelAndStepExitTwoNamingChoices) {
    auto r = memwall("lesson nosuchlevel --no-pause");
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("01-vectorization"), std::string::npos) << r.output;
    r = memwall("lesson 01 --step 9 --no-pause");
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("valid steps"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("0 (naive)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("5 (openblas)"), std::string::npos) << r.output;
    r = memwall("lesson 01 --step -2 --no-pause");
    EXPECT_EQ(r.status, 2) << r.output;
    r = memwall("lesson 01 --backend tpu --no-pause");
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("cpu"), std::string::npos) << r.output;
    r = memwall("lesson 01 --only --no-pause");
    EXPECT_EQ(r.status, 2) << r.output;
    r = memwall("lesson 01 --wait-quiet -3 --no-pause");
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("--wait-quiet must be between 0 and 3600 seconds, got -3"), std::string::npos) << r.output;
}

TEST(LessonCli, RenderWritesMarkdownWithEveryNumberFilled) {
    const fs::path out = tmp("rendered.md");
    auto r = memwall("lesson vectorization --render --out " + out.string());
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string md = slurp(out);
    EXPECT_EQ(md.find("{{"), std::string::npos);
    EXPECT_EQ(md.find("??"), std::string::npos);
    EXPECT_NE(md.find("epyc-kvm-2c"), std::string::npos) << "the machine must be named";
    fs::remove(out);
    r = memwall("lesson 01 --check");
    EXPECT_EQ(r.status, 0) << r.output;
}

// A student's own results folder: the lesson rendered from it names their
// machine (the folder) and every placeholder resolves; a folder without the
// level's file, or a file that is not results, is a usage error naming it.
TEST(LessonCli, RenderFromAnotherResultsFolder) {
    const fs::path dir = tmp("results") / "local-student";
    fs::create_directories(dir);
    // The student's own calibration (a copy), so that nothing in their run names the project's machine.
    fs::copy_file(kRoot / "results" / "epyc-kvm-2c" / "ceilings.json", dir / "ceilings.json",
                  fs::copy_options::overwrite_existing);
    auto r = memwall("run layout --quick --threads 1 --ceilings " + (dir / "ceilings.json").string() + " --out " +
                     (dir / "layout-cpu.json").string());
    ASSERT_EQ(r.status, 0) << r.output;
    const fs::path out = tmp("student.md");
    r = memwall("lesson 03 --render --results " + dir.string() + " --out " + out.string());
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string md = slurp(out);
    EXPECT_NE(md.find("recorded on local-student"), std::string::npos);
    EXPECT_EQ(md.find("epyc-kvm-2c"), std::string::npos) << "no number or plot of the project's machine may remain";
    EXPECT_EQ(md.find("??"), std::string::npos);
    EXPECT_EQ(md.find("{{"), std::string::npos);
    r = memwall("lesson 03 --check --results " + dir.string());
    EXPECT_EQ(r.status, 0) << r.output;

    r = memwall("lesson 01 --render --results " + dir.string());  // no vectorization-cpu.json there
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("vectorization-cpu.json"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("memwall run vectorization"), std::string::npos) << r.output;
    { std::ofstream(dir / "broken.json") << "{\"runs\": ["; }
    r = memwall("lesson 03 --render --results " + (dir / "broken.json").string());
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("broken.json"), std::string::npos) << r.output;
    r = memwall("lesson 03 --render --results " + (dir / "nothing-here").string());
    EXPECT_EQ(r.status, 2) << r.output;
    fs::remove_all(dir.parent_path());
    fs::remove(out);
}

// Two steps, stdin at EOF and no --no-pause: the walk must not wait for
// anyone, and must show prediction, measurement and roofline for each step.
TEST(LessonCli, WalkNeverHangsOnEofAndReportsEachStep) {
    const fs::path json = tmp("walk.json");
    const fs::path ceilings = kRoot / "results" / "xeon-kvm-2c" / "ceilings.json";
    auto r = memwall("lesson 01 --step 4 --quick --threads 2 --ceilings " + ceilings.string() + " --json " +
                     json.string() + " < /dev/null");
    ASSERT_EQ(r.status, 0) << r.output;
    for (const char* s : {"Step 4", "Step 5", "predicted (this machine)", "measured now", "Roofline", "of the roof",
                          "Summary", "recorded on epyc-kvm-2c"})
        EXPECT_NE(r.output.find(s), std::string::npos) << "missing '" << s << "' in:\n" << r.output;
    EXPECT_EQ(r.output.find("{{"), std::string::npos);
    const auto doc = mw::read_json_file(json);
    ASSERT_EQ(doc["steps"].size(), 2u);
    for (auto& s : doc["steps"]) {
        EXPECT_TRUE(s["correct"].get<bool>());
        EXPECT_GT(s["measured_gflops"].get<double>(), 0);
        EXPECT_GT(s["predicted_gflops"].get<double>(), 0);
        EXPECT_GT(s["predicted_ms"].get<double>(), 0);
        EXPECT_GT(s["measured_ms"].get<double>(), 0);
        EXPECT_TRUE(s["bound"] == "compute" || s["bound"] == "memory");
    }
    // One naive baseline plus the two rungs, ready for `memwall plot`.
    EXPECT_EQ(doc["results"]["runs"].size(), 3u);
    fs::remove(json);
}

// --- levels spanning several ops (level 02: a step names its op) -------------

namespace {

// Runs of two ops whose variants share a name ("naive"), as in a lever's
// results file.
Context two_ops() {
    Context c = toy();
    c.runs = nlohmann::json::array({
        {{"op", "gemm"}, {"variant", "naive"}, {"backend", "cpu"}, {"ran", true}, {"shape_str", "k=64,m=64,n=64"},
         {"shape", {{"k", 64}, {"m", 64}, {"n", 64}}}, {"gflops", 0.5}, {"time_s", {{"best", 2.0}}}},
        {{"op", "softmax"}, {"variant", "three_pass"}, {"backend", "cpu"}, {"ran", true},
         {"shape_str", "cols=256,rows=8"}, {"shape", {{"cols", 256}, {"rows", 8}}}, {"gflops", 3.0},
         {"time_s", {{"best", 0.3}}}},
        {{"op", "softmax"}, {"variant", "naive"}, {"backend", "cpu"}, {"ran", true}, {"shape_str", "cols=256,rows=8"},
         {"shape", {{"cols", 256}, {"rows", 8}}}, {"gflops", 1.0}, {"time_s", {{"best", 0.9}}}},
    });
    c.op = c.level_op = "gemm";
    c.steps = nlohmann::json::array({{{"variant", "naive"}, {"predict", {{"gflops", "1 + 1"}}}},
                                     {{"op", "softmax"}, {"variant", "naive"}, {"predict", {{"gflops", "shape:cols"}}}}});
    return c;
}

}  // namespace

TEST(LessonPlaceholders, OpQualifiedReferencesPickTheirOpsRunsAndShape) {
    const Context c = two_ops();
    // Unqualified: the context's op only, never the other op's same-named variant.
    EXPECT_DOUBLE_EQ(num(evaluate("run:naive.gflops", c)), 0.5);
    EXPECT_DOUBLE_EQ(num(evaluate("run:softmax::naive.gflops", c)), 1.0);
    EXPECT_DOUBLE_EQ(num(evaluate("speedup:softmax::three_pass/naive", c)), 3.0);
    EXPECT_DOUBLE_EQ(num(evaluate("shape:softmax::cols", c)), 256);
    EXPECT_DOUBLE_EQ(num(evaluate("shape:k", c)), 64);
    EXPECT_DOUBLE_EQ(num(evaluate("predict:naive", c)), 2.0);
    EXPECT_DOUBLE_EQ(num(evaluate("predict:softmax::naive", c)), 256.0);
    EXPECT_DOUBLE_EQ(num(evaluate("model:softmax::three_pass.flops", c)), 14.0 * 8 * 256);
    // The gemm run is not the softmax op's, however its variant is named.
    EXPECT_THROW(evaluate("run:three_pass.gflops", c), Error);
    EXPECT_THROW(evaluate("run:nosuchop::naive.gflops", c), Error);
    // for_op: the op's own recorded shape.
    const Context s = for_op(c, "softmax");
    EXPECT_EQ(s.shape->str(), "cols=256,rows=8");
    EXPECT_DOUBLE_EQ(num(evaluate("speedup:three_pass/naive", s)), 3.0);
}

TEST(LessonSections, StepMarkersMayNameTheirOp) {
    const auto s = split_sections("# T\n<!-- step: softmax/online -->\nA\n<!-- measure -->\nB\n"
                                  "<!-- step: naive -->\nC\n<!-- measure -->\nD\n");
    ASSERT_EQ(s.steps.size(), 2u);
    EXPECT_EQ(s.steps[0].op, "softmax");
    EXPECT_EQ(s.steps[0].variant, "online");
    EXPECT_EQ(s.steps[1].op, "");
    EXPECT_EQ(s.steps[1].variant, "naive");
    EXPECT_EQ(step_key({{"op", "softmax"}, {"variant", "online"}}), "softmax/online");
    EXPECT_EQ(step_key({{"variant", "naive"}}), "naive");
    EXPECT_EQ(step_op({{"variant", "naive"}}, "gemm"), "gemm");
}

// Each step's section of a multi-op lesson renders with its own op: the
// fusion level's "naive" is bias_gelu_ln's in step 0 and attention's in step 6.
TEST(Lessons, MultiOpLevelRendersEachStepWithItsOwnOp) {
    const Level L = load_level(kRoot / "levels", kRoot, "02");
    const Context c = recorded_context(L);
    EXPECT_EQ(c.op, "bias_gelu_ln");
    const auto sections = split_sections(L.lesson_text);
    const auto& steps = L.manifest["steps"];
    ASSERT_EQ(sections.steps.size(), steps.size());
    for (std::size_t i = 0; i < steps.size(); ++i) {
        EXPECT_EQ(sections.steps[i].op, steps[i]["op"].get<std::string>()) << "step " << i;
        Context sc = for_op(c, sections.steps[i].op);
        sc.self = sections.steps[i].variant;
        // The step's own run, found through its op.
        EXPECT_GT(num(evaluate("run:self.gflops", sc)), 0) << "step " << i;
        EXPECT_GT(num(evaluate("predict:self", sc)), 0) << "step " << i;
    }
    const Context bgl = for_op(c, "bias_gelu_ln"), att = for_op(c, "attention");
    EXPECT_NE(num(evaluate("run:naive.time_s.best", bgl)), num(evaluate("run:naive.time_s.best", att)));
}

TEST(LessonCli, MultiOpLevelNamesStepsOpSlashVariant) {
    auto r = memwall("lesson 02 --step 99 --no-pause");
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("3 (softmax/three_pass)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("7 (attention/tiled)"), std::string::npos) << r.output;
    r = memwall("lesson 02 --check");
    EXPECT_EQ(r.status, 0) << r.output;
}

// The machine folder a level's recorded results are in (its level.json).
std::string recorded_machine(const std::string& level) {
    const auto doc = mw::read_json_file(kRoot / "levels" / level / "level.json");
    return fs::path(doc["results"].get<std::string>()).parent_path().filename().string();
}

// One step of the fusion level, run the way the notebook runs it: the step's
// own op at its quick shape, its prediction, measurement and roofline.
TEST(LessonCli, MultiOpStepRunsItsOwnOp) {
    const fs::path json = tmp("walk02.json");
    const fs::path ceilings = kRoot / "results" / "xeon-kvm-2c" / "ceilings.json";
    auto r = memwall("lesson 02 --step 4 --only --quick --threads 2 --ceilings " + ceilings.string() + " --json " +
                     json.string() + " < /dev/null");
    ASSERT_EQ(r.status, 0) << r.output;
    const std::string recorded = "recorded on " + recorded_machine("02-fusion");
    for (const std::string& s : {std::string("softmax/online"), std::string("predicted (this machine)"),
                                 std::string("measured now"), std::string("Roofline"), recorded,
                                 std::string("Running now: softmax")})
        EXPECT_NE(r.output.find(s), std::string::npos) << "missing '" << s << "' in:\n" << r.output;
    EXPECT_EQ(r.output.find("{{"), std::string::npos);
    EXPECT_EQ(r.output.find("??"), std::string::npos) << r.output;
    const auto doc = mw::read_json_file(json);
    ASSERT_EQ(doc["steps"].size(), 1u);
    EXPECT_EQ(doc["steps"][0]["op"], "softmax");
    EXPECT_EQ(doc["steps"][0]["variant"], "online");
    EXPECT_TRUE(doc["steps"][0]["correct"].get<bool>());
    EXPECT_GT(doc["steps"][0]["recorded_gflops"].get<double>(), 0);
    // The softmax baseline (three_pass) and the rung, both of op softmax.
    ASSERT_EQ(doc["results"]["runs"].size(), 2u);
    for (auto& run : doc["results"]["runs"]) EXPECT_EQ(run["op"], "softmax");
    fs::remove(json);
}
