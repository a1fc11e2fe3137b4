// The CLI's contract for bad input: one line naming the problem and the
// valid choices, exit status 2, and no results file.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>

#include "tests/run_memwall.hpp"
#include "harness/gpu.hpp"
#include "harness/onednn.hpp"
#include "harness/timing.hpp"
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

using mw::test::Result;

Result memwall(const std::string& args) { return mw::test::run_memwall(args); }

fs::path out_file() { return fs::temp_directory_path() / ("memwall-cli-" + std::to_string(::getpid()) + ".json"); }

struct BadInput {
    std::string args;
    std::vector<std::string> must_mention;
};

void PrintTo(const BadInput& b, std::ostream* os) { *os << b.args; }

class CliBadInput : public testing::TestWithParam<BadInput> {};

TEST_P(CliBadInput, ExitsTwoNamesChoicesWritesNothing) {
    fs::remove(out_file());
    auto r = memwall(GetParam().args + " --out " + out_file().string());
    EXPECT_EQ(r.status, 2) << r.output;
    for (auto& m : GetParam().must_mention) EXPECT_NE(r.output.find(m), std::string::npos) << "missing '" << m << "' in: " << r.output;
    EXPECT_FALSE(fs::exists(out_file()));
}

INSTANTIATE_TEST_SUITE_P(
    Run, CliBadInput,
    testing::Values(BadInput{"run nosuchlever", {"'nosuchlever'", "vectorization", "gemm"}},
                    BadInput{"run gemm --variant nosuch", {"'nosuch'", "naive"}},
                    BadInput{"run gemm --backend tpu", {"'tpu'", "cpu", "cuda-emu"}},
                    BadInput{"run gemm --shape m=0", {"'m'", "positive"}},
                    BadInput{"run gemm --shape m=-5", {"'m'", "positive"}},
                    BadInput{"run gemm --shape m=abc", {"'abc'"}},
                    BadInput{"run gemm --shape x=5", {"'x'", "m, n, k"}},
                    BadInput{"run gemm --shape m5", {"'m5'"}},
                    BadInput{"run gemm --dtype f17", {"'f17'", "f32"}},
                    BadInput{"run gemm --dtype i4", {"'i4'", "f32"}},
                    BadInput{"run gemm --threads 0", {"--threads", "1.."}},
                    BadInput{"run gemm --rounds 0", {"--rounds 0", "1..100"}},
                    BadInput{"run gemm --wait-quiet -1", {"--wait-quiet", "between 0 and 3600", "got -1"}},
                    BadInput{"run gemm --wait-quiet nan", {"--wait-quiet", "between 0 and 3600", "got nan"}},
                    BadInput{"run gemm --until-stable 4000", {"--until-stable", "between 0 and 3600", "got 4000"}}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

// The instructor's kit (commands/course/): a bad level, folder, file or
// format is refused before any grading or writing.
INSTANTIATE_TEST_SUITE_P(
    Course, CliBadInput,
    testing::Values(BadInput{"course handout 09", {"'09'", "01-vectorization"}},
                    BadInput{"course grade-all 99 /", {"'99'", "08-moe"}},
                    BadInput{"course grade-all 03 /no-such-folder", {"/no-such-folder", "not a folder"}},
                    BadInput{"course similarity /no-such-file.cpp --format json", {"/no-such-file.cpp", "neither"}},
                    BadInput{"course similarity / --format xml", {"'xml'", "text or json"}},
                    BadInput{"course similarity / --format json", {"no source files"}},
                    BadInput{"course autograder 99", {"'99'", "08-moe"}},
                    BadInput{"course autograder 03 --exercise nope", {"'nope'", "transpose-cpu, transpose-cuda"}},
                    BadInput{"course autograder 02 --secret-seed-file /no-such-seed", {"'/no-such-seed'"}},
                    BadInput{"course autograder 02 --secret-seed-file /dev/null", {"'/dev/null' is empty"}},
                    BadInput{"course autograder 02", {".json", "must name a .zip"}}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

// Shapes too large for any machine: refused before a byte is allocated
// (compulsory bytes against physical memory), never std::bad_alloc.
INSTANTIATE_TEST_SUITE_P(
    HugeShapes, CliBadInput,
    testing::Values(BadInput{"run gemm --shape m=2147483647,n=2147483647,k=2147483647", {"gemm", "GB", "smaller shape"}},
                    BadInput{"run softmax --shape rows=2147483647,cols=2147483647", {"softmax", "GB"}},
                    BadInput{"run gemv_q --shape n_out=2147483647,n_in=2147483647,b=1", {"gemv_q", "GB"}},
                    BadInput{"run attn_decode --shape hd=2147483647", {"attn_decode", "GB"}},
                    BadInput{"run paged_attn --shape ctx=2147483647", {"paged_attn", "GB"}},
                    BadInput{"run moe_route --shape tokens=2147483647", {"moe_route", "GB"}},
                    BadInput{"run moe_ffn --shape tokens=2147483647", {"moe_ffn", "GB"}},
                    BadInput{"run train_step --shape d_model=2147483648", {"'d_model'", "2147483647"}},
                    BadInput{"run train_step --shape tokens=2147483392", {"train_step", "GB"}},
                    BadInput{"run gemm --shape m=2147483648", {"'m'", "2147483647"}},
                    BadInput{"run decode_step --shape batch=2147483647", {"batch = 2147483647", "1..256"}},
                    BadInput{"run transpose --shape rows=2147483647,cols=2147483647", {"transpose", "GB"}}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

// Shapes the op accepts but a CUDA kernel cannot take (shared memory, grid,
// registers): refused up front for that backend (Variant::accepts), not
// reported as a failed or incorrect rung.
INSTANTIATE_TEST_SUITE_P(
    Backends, CliBadInput,
    testing::Values(BadInput{"run attn_decode --backend cuda-emu --shape b=1,ctx=7,heads=2,kv_heads=1,hd=130",
                             {"'paged' (cuda-emu)", "hd > 128"}},
                    BadInput{"run moe_route --backend cuda-emu --shape tokens=3,d_model=4,experts=65,top_k=2",
                             {"'naive' (cuda-emu)", "experts > 64"}},
                    BadInput{"run attention --backend cuda-emu --variant flash2 --shape b=1,h=1,hk=1,s=3,d=129",
                             {"'flash2' (cuda-emu)", "d > 128"}},
                    BadInput{"run bias_gelu_ln --backend cuda-emu --shape rows=1,hidden=12289",
                             {"'fused' (cuda-emu)", "hidden > 12288"}},
                    BadInput{"run transpose --backend cuda-emu --shape rows=524281,cols=1",
                             {"'naive' (cuda-emu)", "rows > 524280"}}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

// The GPU kit's options of reproduce and report.
INSTANTIATE_TEST_SUITE_P(
    Kit, CliBadInput,
    testing::Values(BadInput{"reproduce --kind gpu", {"'gpu'", "formula", "cpu-experiment", "gpu-only"}},
                    BadInput{"report results --no-plots", {"--no-plots needs --html"}}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

// The model's commands: every option checked before the model or the corpus
// is read, exit 2 naming the value and the valid range; nothing written.
class CliBadModelInput : public testing::TestWithParam<BadInput> {};

TEST_P(CliBadModelInput, ExitsTwoNamesTheValue) {
    auto r = memwall(GetParam().args);
    EXPECT_EQ(r.status, 2) << r.output;
    for (auto& m : GetParam().must_mention) EXPECT_NE(r.output.find(m), std::string::npos) << "missing '" << m << "' in: " << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Generate, CliBadModelInput,
    testing::Values(BadInput{"generate --prompt hi --threads 100000", {"--threads 100000", "1.."}},
                    BadInput{"generate --prompt hi --threads -1", {"--threads -1"}},
                    BadInput{"generate --prompt hi --tokens 2147483647", {"--tokens 2147483647", "1.."}},
                    BadInput{"generate --prompt hi --tokens 0", {"--tokens 0"}},
                    BadInput{"generate --prompt hi --tokens 300", {"context", "256"}},
                    BadInput{"generate --prompt hi --temperature nan", {"--temperature nan", "finite"}},
                    BadInput{"generate --prompt hi --temperature inf", {"--temperature inf", "finite"}},
                    BadInput{"generate --prompt hi --temperature -1", {"--temperature -1"}},
                    BadInput{"generate --prompt hi --top-k -5", {"--top-k -5", "0..256"}},
                    BadInput{"generate --prompt hi --top-k 1000", {"--top-k 1000", "0..256"}},
                    BadInput{"generate --prompt hi --weights int3", {"int3", "int4"}},
                    BadInput{"generate --prompt hi --model no-such-model.safetensors", {"no-such-model", "no such file"}},
                    BadInput{"generate --prompt hi --out /tmp", {"/tmp", "directory"}},
                    BadInput{"generate --prompt hi --out result.txt", {"result.txt", ".json"}},
                    BadInput{"generate --prompt ''", {"--prompt"}},
                    BadInput{"generate --prompt hi --check --temperature 0.5", {"--check", "--temperature 0"}},
                    BadInput{"generate --prompt hi --speculative tiny", {"tiny", "small, int4, early_exit"}},
                    BadInput{"generate --prompt hi --speculative small --draft-k 0", {"--draft-k 0", "1..16"}},
                    BadInput{"generate --prompt hi --tokens 250 --speculative int4", {"--draft-k", "context"}}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

INSTANTIATE_TEST_SUITE_P(
    Train, CliBadModelInput,
    testing::Values(BadInput{"train --lr -1", {"--lr -1", "finite"}},
                    BadInput{"train --lr nan", {"--lr nan"}},
                    BadInput{"train --lr inf", {"--lr inf"}},
                    BadInput{"train --min-lr -1", {"--min-lr -1"}},
                    BadInput{"train --min-lr 1", {"--min-lr 1"}},
                    BadInput{"train --warmup -5", {"--warmup -5", "0.."}},
                    BadInput{"train --warmup 1000000000", {"--warmup 1000000000", "0..100000000"}},
                    BadInput{"train --stop-after -3", {"--stop-after -3"}},
                    BadInput{"train --steps 0", {"--steps 0"}},
                    BadInput{"train --batch 0", {"--batch 0"}},
                    BadInput{"train --seq 0", {"--seq 0"}},
                    BadInput{"train --seq 100000", {"--seq 100000", "1..256"}},
                    BadInput{"train --eval-every -1", {"--eval-every -1"}},
                    BadInput{"train --threads 100000", {"--threads 100000"}},
                    BadInput{"train --kv-heads 3", {"kv_heads = 3", "divide"}},
                    BadInput{"train --d-model 0", {"d_model = 0"}},
                    BadInput{"train --layers 0", {"layers = 0"}},
                    BadInput{"train --ceilings no-such-ceilings.json", {"no-such-ceilings.json", "no such file"}},
                    BadInput{"train --resume no-such-state.safetensors", {"no-such-state", "no such file"}},
                    BadInput{"train --out weights.bin", {"weights.bin", ".safetensors"}},
                    BadInput{"train --state state.json", {"state.json", ".safetensors"}},
                    BadInput{"train --out " MEMWALL_TEST_SOURCE_DIR "/results/model/default.safetensors",
                             {"default.safetensors", "exists", "--force"}},
                    BadInput{"export --hf /tmp --model no-such-model.safetensors", {"no-such-model", "--model"}},
                    BadInput{"export --hf " MEMWALL_TEST_SOURCE_DIR "/README.md", {"README.md", "not a folder"}},
                    BadInput{"export", {"--hf"}}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

// A NaN planted in a copy of the trained model: the checkpoint is refused on
// load (exit 2, naming the tensor), so neither greedy decoding (which would
// print NUL bytes) nor --check (whose margins would be NaN) can pass on it.
TEST(Cli, ANaNInTheCheckpointIsRefused) {
    const fs::path good = fs::path(MEMWALL_TEST_SOURCE_DIR) / "results/model/default.safetensors";
    const fs::path bad = fs::temp_directory_path() / ("memwall-nan-" + std::to_string(::getpid()) + ".safetensors");
    fs::copy_file(good, bad, fs::copy_options::overwrite_existing);
    {
        std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
        std::uint64_t header = 0;
        f.read(reinterpret_cast<char*>(&header), sizeof header);  // safetensors: little-endian header length
        const float nan = std::numeric_limits<float>::quiet_NaN();
        f.seekp(std::streamoff(8 + header + 4 * 1000));
        f.write(reinterpret_cast<const char*>(&nan), sizeof nan);
    }
    for (const std::string extra : {"", " --check"}) {
        auto r = memwall("generate --model " + bad.string() + " --prompt hi --tokens 4" + extra);
        EXPECT_EQ(r.status, 2) << r.output;
        EXPECT_NE(r.output.find("must be finite"), std::string::npos) << r.output;
        EXPECT_EQ(r.output.find("PASS"), std::string::npos) << r.output;
    }
    fs::remove(bad);
}

TEST(Cli, CudaBackendWithoutGpuIsAUsageError) {
    if (mw::gpu_count() > 0) GTEST_SKIP() << "a GPU is present";
    fs::remove(out_file());
    auto r = memwall("run gemm --backend cuda --out " + out_file().string());
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("GPU"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("cpu"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out_file()));
}

// Sampled speculative decoding from the command line: it runs, says what
// the draft did, and records it (the law itself: tests/speculative).
TEST(Cli, GenerateSpeculativelyAtATemperature) {
    const fs::path out = fs::temp_directory_path() / ("memwall-spec-" + std::to_string(getpid()) + ".json");
    auto r = memwall("generate --prompt 'Love is ' --tokens 24 --temperature 0.8 --top-k 40 --speculative small "
                     "--draft-k 3 --seed 7 --out " + out.string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("drafts accepted (alpha"), std::string::npos) << r.output;
    std::ifstream in(out);
    const auto doc = nlohmann::json::parse(in);
    EXPECT_EQ(doc["tokens"].size(), 24u);
    EXPECT_EQ(doc["speculative"]["draft"], "small");
    EXPECT_EQ(doc["speculative"]["k"], 3);
    EXPECT_LE(doc["speculative"]["accepted"].get<int>(), doc["speculative"]["drafted"].get<int>());
    fs::remove(out);
}

// The yardstick of the training record: a byte 6-gram on the training split
// scores the held-out split far below the ~3 nats/byte of byte frequencies
// alone, and far above zero; nothing is trained or written.
TEST(Cli, TrainBaselineScoresTheHeldOutSplit) {
    auto r = memwall("train --baseline");
    ASSERT_EQ(r.status, 0) << r.output;
    const auto at = r.output.find("validation loss ");
    ASSERT_NE(at, std::string::npos) << r.output;
    const double loss = std::stod(r.output.substr(at + 16));
    EXPECT_GT(loss, 1.0) << r.output;
    EXPECT_LT(loss, 2.5) << r.output;
    EXPECT_EQ(r.output.find("trained"), std::string::npos) << r.output;
}

TEST(Cli, UnknownCommandIsAUsageError) {
    auto r = memwall("frobnicate");
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("run"), std::string::npos) << r.output;
}

TEST(Cli, MissingResultsFileIsAnError) {
    auto r = memwall("report /nonexistent/results.json");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.output.find("/nonexistent/results.json"), std::string::npos) << r.output;
}

TEST(Cli, QuickRunWritesValidResults) {
    fs::remove(out_file());
    auto r = memwall("run gemm --shape m=33,n=17,k=9 --variant naive --variant blocked --threads 1 --budget 0.01 "
                     "--out " + out_file().string());
    ASSERT_EQ(r.status, 0) << r.output;
    ASSERT_TRUE(fs::exists(out_file()));
    auto md = fs::path(out_file()).replace_extension(".md");
    EXPECT_TRUE(fs::exists(md));
    auto rep = memwall("report " + out_file().string() + " --format csv");
    EXPECT_EQ(rep.status, 0) << rep.output;
    EXPECT_NE(rep.output.find(",blocked,"), std::string::npos) << rep.output;
    fs::remove(out_file());
    fs::remove(md);
    fs::remove(fs::path(out_file()).replace_extension(".csv"));
}

// --rounds 2: every variant timed in both rounds (twice the samples of one,
// a fixed count here), the DRAM read roof measured before each round; a
// shape's ratios use the best of its own rounds' figures, the ceilings block
// the best of the run's.
TEST(Cli, RoundsMergeSamplesAndRemeasureTheReadRoof) {
    fs::remove(out_file());
    auto r = memwall("run gemv_q --shape n_out=33,n_in=100,b=1 --shape n_out=7,n_in=64,b=2 --variant fp32 "
                     "--skip-naive --threads 1 --budget 0 --rounds 2 --out " + out_file().string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("round 2 of 2"), std::string::npos) << r.output;
    std::ifstream f(out_file());
    const auto doc = nlohmann::json::parse(f);
    ASSERT_EQ(doc["runs"].size(), 2u);
    for (const auto& run : doc["runs"]) {
        EXPECT_EQ(run["rounds"], 2);
        EXPECT_TRUE(run["correct"].get<bool>());
        EXPECT_EQ(run["time_s"]["samples"].get<int>() % 2, 0);  // budget 0: min_samples per round, both kept
        EXPECT_GE(run["time_s"]["samples"].get<int>(), 2 * mw::TimingOptions{}.min_samples);
    }
    const auto& c = doc["ceilings"];
    ASSERT_EQ(c["dram_read_rounds_gbps"].size(), 4u);  // 2 shapes x 2 rounds
    double best = 0;
    for (const auto& g : c["dram_read_rounds_gbps"]) {
        EXPECT_GT(g.get<double>(), 0.1);
        best = std::max(best, g.get<double>());
    }
    EXPECT_GE(c["dram_read_gbps"].get<double>(), best);
    // Google Benchmark's summary of each timing is kept, not its row per
    // repetition: time_s already summarises the samples.
    int aggregates = 0;
    for (const auto& b : doc["gbench"]["benchmarks"]) {
        EXPECT_NE(b.value("run_type", ""), "iteration") << b.dump();
        aggregates += b.value("run_type", "") == "aggregate";
    }
    EXPECT_GE(aggregates, 2) << doc["gbench"].dump();
    // shape 1 was timed in rounds 0 and 1, shape 2 in rounds 2 and 3; its
    // roof is also the best of the read probe made after its variant's
    // calls in each round (at least 3 passes a round).
    const auto& g = c["dram_read_rounds_gbps"];
    for (std::size_t i = 0; i < 2; ++i) {
        const auto& run = doc["runs"][i];
        ASSERT_EQ(run["read_probe_gbps"].size(), 2u) << run.dump();
        EXPECT_GE(run["read_probe_passes"].get<int>(), 6);
        double own = std::max(g[2 * i].get<double>(), g[2 * i + 1].get<double>());
        for (const auto& p : run["read_probe_gbps"]) own = std::max(own, p.get<double>());
        EXPECT_LE(own, c["dram_read_gbps"].get<double>());
        EXPECT_DOUBLE_EQ(run["dram_read_roof_gbps"].get<double>(), own) << "shape " << i;
        const double roof = std::min(run["mfu_peak_gflops"].get<double>(), run["intensity"].get<double>() * own);
        EXPECT_DOUBLE_EQ(run["roof_gflops"].get<double>(), roof) << "shape " << i;
    }
    fs::remove(out_file());
    fs::remove(fs::path(out_file()).replace_extension(".md"));
    fs::remove(fs::path(out_file()).replace_extension(".csv"));
}

// --cold on a read-dominated op, in rounds or one: a pass of the read probe
// before every timed call (as many passes as samples, at the same moments), the
// shape's roof the best of them and of the rounds' own figures, and the
// markdown says what the roof is the best of.
TEST(Cli, ColdRoundsProbeTheReadRoofBeforeEveryCall) {
    fs::remove(out_file());
    auto r = memwall("run gemv_q --shape n_out=33,n_in=100,b=1 --variant fp32 --variant int8_dot_repacked "
                     "--skip-naive --threads 1 --budget 0 --rounds 2 --cold --out " + out_file().string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("read probe between its calls"), std::string::npos) << r.output;
    std::ifstream f(out_file());
    const auto doc = nlohmann::json::parse(f);
    ASSERT_EQ(doc["runs"].size(), 2u);
    double best = 0;
    for (const auto& g : doc["ceilings"]["dram_read_rounds_gbps"]) best = std::max(best, g.get<double>());
    long passes = 0;
    for (const auto& run : doc["runs"]) {
        ASSERT_TRUE(run["correct"].get<bool>()) << run.dump();
        ASSERT_EQ(run["read_probe_gbps"].size(), 2u) << run.dump();
        EXPECT_EQ(run["read_probe_passes"].get<int>(), run["time_s"]["samples"].get<int>());
        passes += run["read_probe_passes"].get<int>();
        for (const auto& p : run["read_probe_gbps"]) {
            EXPECT_GT(p.get<double>(), 0.1);
            best = std::max(best, p.get<double>());
        }
    }
    for (const auto& run : doc["runs"]) EXPECT_DOUBLE_EQ(run["dram_read_roof_gbps"].get<double>(), best);
    std::ifstream md(fs::path(out_file()).replace_extension(".md"));
    const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("the best of " + std::to_string(passes) + " read-probe passes"), std::string::npos) << text;
    // One round, cold: the probe still runs beside each call, and the roof
    // is its best, not the ceilings file's, whose read figures (at every
    // thread count, not only the run's one) are absurd here.
    fs::remove(out_file());
    auto fixture = doc["ceilings"];
    fixture["dram_read_by_threads_gbps"] = {1e6, 1e6, 1e6};
    fixture.erase("dram_read_rounds_gbps");
    const fs::path ceilings = fs::path(out_file()).replace_extension(".ceilings.json");
    std::ofstream(ceilings) << nlohmann::json{{"ceilings", fixture}}.dump();
    r = memwall("run gemv_q --shape n_out=7,n_in=64,b=1 --variant fp32 --skip-naive --threads 1 --budget 0 --cold "
                "--ceilings " + ceilings.string() + " --out " + out_file().string());
    fs::remove(ceilings);
    ASSERT_EQ(r.status, 0) << r.output;
    std::ifstream f1(out_file());
    const auto one = nlohmann::json::parse(f1);
    ASSERT_EQ(one["runs"].size(), 1u);
    const auto& run = one["runs"][0];
    ASSERT_EQ(run["read_probe_gbps"].size(), 1u) << run.dump();
    EXPECT_EQ(run["read_probe_passes"].get<int>(), run["time_s"]["samples"].get<int>());
    EXPECT_DOUBLE_EQ(run["dram_read_roof_gbps"].get<double>(), run["read_probe_gbps"][0].get<double>());
    EXPECT_LT(run["dram_read_roof_gbps"].get<double>(), 1e5);
    // The pass is outside the timed span: a call on 7 x 64 floats takes far
    // less than one pass over the probe's 256 MiB.
    EXPECT_LT(run["time_s"]["best"].get<double>(), 0.25 * 256e6 / (run["read_probe_gbps"][0].get<double>() * 1e9));
    fs::remove(out_file());
    fs::remove(fs::path(out_file()).replace_extension(".md"));
    fs::remove(fs::path(out_file()).replace_extension(".csv"));
}

// A machine without oneDNN (the GPU kit's): its rungs are rows that did not
// run and say why, naming the library; the other rungs run; the machine block
// says it did not load. An empty file where the loader looks first
// (LD_LIBRARY_PATH) stands in for the missing library.
TEST(Cli, OneDnnRungWithoutTheLibraryIsNotRunAndSaysWhy) {
    if (!mw::onednn::kBuilt) GTEST_SKIP() << "built without oneDNN's headers";
    const fs::path dir = fs::temp_directory_path() / ("memwall-no-onednn-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / mw::onednn::kSoname).put('\n');
    fs::remove(out_file());
    auto r = mw::test::run_memwall("run softmax --shape rows=7,cols=33 --variant three_pass --variant onednn "
                                   "--threads 1 --budget 0 --out " + out_file().string(),
                                   "LD_LIBRARY_PATH=" + dir.string() + ":$LD_LIBRARY_PATH");
    fs::remove_all(dir);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find(std::string("not run: needs oneDNN: cannot load ") + mw::onednn::kSoname),
              std::string::npos)
        << r.output;
    std::ifstream f(out_file());
    const auto doc = nlohmann::json::parse(f);
    ASSERT_EQ(doc["runs"].size(), 2u);
    for (const auto& run : doc["runs"]) {
        if (run["variant"] == "onednn") {
            EXPECT_FALSE(run["ran"].get<bool>());
            EXPECT_NE(run["skip_reason"].get<std::string>().find("libdnnl"), std::string::npos) << run.dump();
        } else {
            EXPECT_TRUE(run["correct"].get<bool>()) << run.dump();
        }
    }
    EXPECT_EQ(doc["machine"]["onednn"].get<std::string>().rfind("not loaded: ", 0), 0u) << doc["machine"].dump();
    fs::remove(out_file());
    fs::remove(fs::path(out_file()).replace_extension(".md"));
    fs::remove(fs::path(out_file()).replace_extension(".csv"));
}

TEST(Cli, ListNamesEveryRung) {
    auto r = memwall("list");
    EXPECT_EQ(r.status, 0);
    for (const char* v : {"naive", "loop_order", "blocked", "simd", "threads", "openblas"})
        EXPECT_NE(r.output.find(v), std::string::npos) << v;
}

}  // namespace
