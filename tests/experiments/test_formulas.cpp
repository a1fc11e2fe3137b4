// Each formula against a hand computation written out here (not produced by
// the code), units (GB vs GiB), and the usage errors of bad parameters.
#include <gtest/gtest.h>

#include <cmath>

#include "commands/claims/formulas.hpp"
#include "harness/runner.hpp"

using namespace mw::calc;

namespace {

double out(const std::string& formula, std::map<std::string, std::string> params, const std::string& name) {
    const Formula* f = find_formula(formula);
    EXPECT_NE(f, nullptr) << formula;
    auto outs = evaluate(*f, params);
    const Output* o = find_output(outs, name);
    EXPECT_NE(o, nullptr) << formula << "." << name;
    return o ? o->value : NAN;
}

std::string text_out(const std::string& formula, std::map<std::string, std::string> params, const std::string& name) {
    auto outs = evaluate(*find_formula(formula), params);
    return find_output(outs, name)->text;
}

}  // namespace

TEST(Formulas, RidgeAndRoofline) {
    // 989e12 / 3.35e12 = 295.2238...
    EXPECT_NEAR(out("ridge", {{"peak_tflops", "989"}, {"bandwidth_tbs", "3.35"}}, "ridge"), 295.2238806, 1e-6);
    // 100 TFLOP/s, 2 TB/s: ridge 50. At I=10 the roof is 10 x 2e12 = 20e12; at I=100 it is the peak.
    std::map<std::string, std::string> p = {{"peak_tflops", "100"}, {"bandwidth_tbs", "2"}, {"intensity", "10"}};
    EXPECT_DOUBLE_EQ(out("roofline", p, "attainable"), 20e12);
    EXPECT_DOUBLE_EQ(out("roofline", p, "fraction_of_peak"), 0.2);
    EXPECT_EQ(text_out("roofline", p, "regime"), "memory-bound");
    p["intensity"] = "100";
    EXPECT_DOUBLE_EQ(out("roofline", p, "attainable"), 100e12);
    EXPECT_EQ(text_out("roofline", p, "regime"), "compute-bound");
    // log10(50 / 0.5) = 2 orders of magnitude
    p["intensity"] = "0.5";
    EXPECT_NEAR(out("roofline", p, "orders_below_ridge"), 2.0, 1e-12);
}

TEST(Formulas, RidgeFromSpecTable) {
    // The spec table's H100 SXM: 989.4 TFLOP/s FP16 over 3350 GB/s.
    EXPECT_NEAR(out("ridge", {{"gpu", "H100"}, {"dtype", "fp16"}}, "ridge"), 989.4 / 3.35, 1e-9);
    // An explicit peak overrides the table; the bandwidth still comes from it.
    EXPECT_NEAR(out("ridge", {{"gpu", "H100"}, {"peak_tflops", "670"}}, "ridge"), 200.0, 1e-9);
    EXPECT_THROW(out("ridge", {{"gpu", "Z9000"}}, "ridge"), mw::UsageError);
    EXPECT_THROW(out("ridge", {{"peak_tflops", "1"}}, "ridge"), mw::UsageError);  // no bandwidth
}

TEST(Formulas, GemmIntensity) {
    // 2 x 4096^3 = 137438953472 FLOP; 3 x 4096^2 x 2 B = 100663296 B
    std::map<std::string, std::string> p = {{"m", "4096"}, {"n", "4096"}, {"k", "4096"}, {"dtype_bytes", "2"}};
    EXPECT_DOUBLE_EQ(out("gemm_intensity", p, "flops"), 137438953472.0);
    EXPECT_DOUBLE_EQ(out("gemm_intensity", p, "bytes"), 100663296.0);
    EXPECT_NEAR(out("gemm_intensity", p, "intensity"), 1365.3333333, 1e-6);
    // Rectangular: m=2, n=3, k=4, fp32: 48 FLOP over (8 + 12 + 6) x 4 = 104 B
    EXPECT_NEAR(out("gemm_intensity", {{"m", "2"}, {"n", "3"}, {"k", "4"}, {"dtype_bytes", "4"}}, "intensity"), 48.0 / 104.0, 1e-12);
}

TEST(Formulas, ElementwiseAndDecodeIntensity) {
    EXPECT_DOUBLE_EQ(out("elementwise_intensity", {{"elements", "100"}, {"flops_per_element", "5"}}, "intensity"), 1.25);
    // P=1000, B=4, d=10, 2-byte weights and activations: 8000 FLOP over 2000 + 80 B.
    std::map<std::string, std::string> p = {{"params", "1000"}, {"batch", "4"}, {"d_model", "10"}};
    EXPECT_DOUBLE_EQ(out("decode_intensity", p, "flops"), 8000.0);
    EXPECT_DOUBLE_EQ(out("decode_intensity", p, "bytes"), 2080.0);
    // Step time at 1 TB/s: 2080 B / 1e12 B/s; 4 tokens per step.
    p["bandwidth_tbs"] = "1";
    EXPECT_DOUBLE_EQ(out("decode_intensity", p, "step_time"), 2080e-12);
    EXPECT_NEAR(out("decode_intensity", p, "tokens_per_s"), 4 / 2080e-12, 1e-3);
}

TEST(Formulas, KvCache) {
    // 2 x 2 layers x 3 heads x 4 dim x 5 tokens x 2 B x 6 batch = 2880 B
    std::map<std::string, std::string> p = {{"layers", "2"}, {"kv_heads", "3"}, {"head_dim", "4"},
                                            {"tokens", "5"}, {"dtype_bytes", "2"}, {"batch", "6"}};
    EXPECT_DOUBLE_EQ(out("kv_cache", p, "bytes"), 2880.0);
    EXPECT_DOUBLE_EQ(out("kv_cache", p, "bytes_per_token"), 96.0);
    // MQA with 8 query heads: one K/V head, 8x smaller than MHA.
    std::map<std::string, std::string> m = {{"layers", "2"}, {"attention", "mqa"}, {"q_heads", "8"}, {"head_dim", "4"}, {"tokens", "5"}};
    EXPECT_DOUBLE_EQ(out("kv_cache", m, "bytes"), 2 * 2 * 1 * 4 * 5 * 2.0);
    EXPECT_DOUBLE_EQ(out("kv_cache", m, "reduction_vs_mha"), 8.0);
    m["attention"] = "mha";
    EXPECT_DOUBLE_EQ(out("kv_cache", m, "bytes"), 2 * 2 * 8 * 4 * 5 * 2.0);
    // GQA: kv_heads must divide q_heads.
    EXPECT_THROW(out("kv_cache", {{"layers", "2"}, {"attention", "gqa"}, {"q_heads", "8"}, {"kv_heads", "3"},
                                  {"head_dim", "4"}, {"tokens", "5"}}, "bytes"), mw::UsageError);
    // Batch limit: 1 GB memory, 0.5 GB weights, 2880 B per request (1 shard): floor(5e8 / 2880).
    std::map<std::string, std::string> b = {{"layers", "2"}, {"kv_heads", "3"}, {"head_dim", "4"}, {"tokens", "30"},
                                            {"memory_gb", "1"}, {"weights_gb", "0.5"}};
    EXPECT_DOUBLE_EQ(out("kv_cache", b, "max_batch"), std::floor(5e8 / 2880.0));
    // Preallocating 4096 for 500 wastes 1 - 500/4096.
    EXPECT_DOUBLE_EQ(out("kv_cache", {{"layers", "1"}, {"kv_heads", "1"}, {"head_dim", "1"}, {"tokens", "500"},
                                      {"reserved_tokens", "4096"}}, "waste_fraction"), 1 - 500.0 / 4096.0);
}

TEST(Formulas, BlockQuant) {
    // 4 + 16/64 = 4.25 bits; 0.25/4 = 6.25%; 0.25/16 = 1.5625%
    std::map<std::string, std::string> p = {{"bits", "4"}, {"group_size", "64"}, {"scale_bits", "16"}};
    EXPECT_DOUBLE_EQ(out("block_quant", p, "effective_bits"), 4.25);
    EXPECT_DOUBLE_EQ(out("block_quant", p, "overhead_vs_payload"), 0.0625);
    EXPECT_DOUBLE_EQ(out("block_quant", p, "overhead_vs_reference"), 0.015625);
    EXPECT_DOUBLE_EQ(out("block_quant", p, "compression"), 16 / 4.25);
    // A zero point too: 4 + (16 + 4)/64 = 4.3125
    p["zero_bits"] = "4";
    EXPECT_DOUBLE_EQ(out("block_quant", p, "effective_bits"), 4.3125);
    // FP32 scale per 128 INT8: 32/1024 = 3.125%
    EXPECT_DOUBLE_EQ(out("block_quant", {{"bits", "8"}, {"group_size", "128"}, {"scale_bits", "32"}}, "overhead_vs_payload"), 0.03125);
    // 1000 weights at 4.25 bits on 2 shards: 1000 x 4.25 / 8 / 2 bytes
    EXPECT_DOUBLE_EQ(out("block_quant", {{"bits", "4"}, {"group_size", "64"}, {"weights", "1000"}, {"shards", "2"}}, "bytes_per_shard"),
                     1000 * 4.25 / 8 / 2);
}

TEST(Formulas, FlashAttention) {
    // S=8, H=2, d=4, 2 B: Q,K,V,Y = 4x8x4x2 = 256 B per head; one S x S matrix 128 B;
    // naive per head 256 + 4 x 128 = 768 B; reduction 3 = 1 + 8/4.
    std::map<std::string, std::string> p = {{"seq", "8"}, {"heads", "2"}, {"head_dim", "4"}, {"block", "2"}};
    EXPECT_DOUBLE_EQ(out("flash_attention", p, "flash_bytes_per_head"), 256.0);
    EXPECT_DOUBLE_EQ(out("flash_attention", p, "score_bytes_per_head"), 128.0);
    EXPECT_DOUBLE_EQ(out("flash_attention", p, "naive_bytes"), 1536.0);
    EXPECT_DOUBLE_EQ(out("flash_attention", p, "reduction"), 3.0);
    EXPECT_DOUBLE_EQ(out("flash_attention", p, "flops"), 2 * 4 * 64 * 4.0);
    EXPECT_DOUBLE_EQ(out("flash_attention", p, "tile_bytes"), 3 * 2 * 4 * 2.0);
}

TEST(Formulas, FusionTraffic) {
    // 10 elements of 2 B = 20 B per tensor; 2 intermediates; 100 B of weights in both versions.
    std::map<std::string, std::string> p = {{"elements", "10"}, {"intermediates", "2"}, {"extra_bytes", "100"}};
    EXPECT_DOUBLE_EQ(out("fusion_traffic", p, "intermediate_traffic"), 80.0);
    EXPECT_DOUBLE_EQ(out("fusion_traffic", p, "unfused_bytes"), 220.0);
    EXPECT_DOUBLE_EQ(out("fusion_traffic", p, "fused_bytes"), 140.0);
    EXPECT_DOUBLE_EQ(out("fusion_traffic", p, "unfused_round_trips"), 6.0);
    p["extra_bytes"] = "0";
    EXPECT_DOUBLE_EQ(out("fusion_traffic", p, "traffic_reduction"), 3.0);
}

TEST(Formulas, SpeculativeDecoding) {
    // Expected tokens = sum_{i=0..gamma} alpha^i: 1 + 0.5 + 0.25 = 1.75
    EXPECT_DOUBLE_EQ(out("speculative", {{"alpha", "0.5"}, {"gamma", "2"}}, "expected_tokens"), 1.75);
    EXPECT_DOUBLE_EQ(out("speculative", {{"alpha", "0"}, {"gamma", "4"}}, "expected_tokens"), 1.0);
    EXPECT_DOUBLE_EQ(out("speculative", {{"alpha", "1"}, {"gamma", "4"}}, "expected_tokens"), 5.0);
    // 0.78, 5: 1 + .78 + .6084 + .474552 + .37015056 + .2887174368
    EXPECT_NEAR(out("speculative", {{"alpha", "0.78"}, {"gamma", "5"}}, "expected_tokens"), 3.5218199968, 1e-9);
    EXPECT_THROW(out("speculative", {{"alpha", "1.5"}, {"gamma", "4"}}, "expected_tokens"), mw::UsageError);
    // The closed form: any gamma costs the same (2e9 drafts: 1 / (1 - alpha) to
    // within rounding), and near alpha = 1 it does not cancel: by hand,
    // 1 + a + ... + a^4 at a = 1 - 1e-12 is 5 - 10e-12.
    EXPECT_NEAR(out("speculative", {{"alpha", "0.5"}, {"gamma", "2e9"}}, "expected_tokens"), 2.0, 1e-12);
    EXPECT_NEAR(out("speculative", {{"alpha", "0.999999999999"}, {"gamma", "4"}}, "expected_tokens"), 5 - 10e-12, 1e-13);
    // A run's measurement beside the prediction: E(0.9, 4) = 4.0951 tokens
    // per 4 + 20 ms round = 5.8607 ms per token, 18 / 5.8607 = 3.0713x,
    // against a measured 2x.
    const std::map<std::string, std::string> measured = {{"alpha", "0.9"}, {"gamma", "4"}, {"draft_ms", "4"},
        {"verify_ms", "20"}, {"baseline_ms", "18"}, {"measured_speedup", "2"}, {"measured_tokens_per_pass", "4"}};
    EXPECT_NEAR(out("speculative", measured, "speedup_vs_measured"), 18 / (24 / 4.0951) / 2, 1e-9);
    EXPECT_NEAR(out("speculative", measured, "tokens_vs_measured"), 4.0951 / 4, 1e-9);
}

TEST(Formulas, Checkpoint) {
    // N=16, every 4: 4 checkpoints + 4 live = 8 layers stored; 12 recomputed of 16, forward = 1/3 of a step.
    std::map<std::string, std::string> p = {{"layers", "16"}, {"every", "4"}, {"activation_bytes", "10"}};
    EXPECT_DOUBLE_EQ(out("checkpoint", p, "stored_checkpointed"), 80.0);
    EXPECT_DOUBLE_EQ(out("checkpoint", p, "memory_reduction"), 2.0);
    EXPECT_DOUBLE_EQ(out("checkpoint", p, "extra_compute_fraction"), 0.25);
    EXPECT_DOUBLE_EQ(out("checkpoint", {{"layers", "16"}}, "every"), 4.0);  // round(sqrt(16))
    EXPECT_DOUBLE_EQ(out("checkpoint", p, "best_every"), 4.0);  // (16/k + k) x 10: least at k = 4
    // The two terms apart: a checkpoint (a block's input, 1 MiB) is far smaller
    // than a block's activations (24 MiB), the train_step default's ratio.
    // k = 4: 4 x 1 + 4 x 24 = 100 MiB of 16 x 24 = 384; best k = 1: 16 x 1 + 24 = 40.
    p = {{"layers", "16"}, {"every", "4"}, {"activation_bytes", "24"}, {"checkpoint_bytes", "1"}};
    EXPECT_DOUBLE_EQ(out("checkpoint", p, "stored_checkpointed"), 100.0);
    EXPECT_DOUBLE_EQ(out("checkpoint", p, "stored_naive"), 384.0);
    EXPECT_DOUBLE_EQ(out("checkpoint", p, "best_every"), 1.0);
}

TEST(Formulas, IronLawAmdahlPower) {
    // 1 GB at 100 GB/s = 10 ms; 1e12 FLOP at 1 TFLOP/s x 0.5 = 2 s; 1 ms fixed.
    std::map<std::string, std::string> p = {{"bytes", "1e9"}, {"bandwidth_gbs", "100"}, {"flops", "1e12"},
                                            {"peak_tflops", "1"}, {"efficiency", "0.5"}, {"latency_us", "1000"}};
    EXPECT_NEAR(out("iron_law", p, "time"), 0.010 + 2.0 + 0.001, 1e-12);
    p["overlap"] = "1";
    EXPECT_NEAR(out("iron_law", p, "time"), 2.0 + 0.001, 1e-12);
    // 50 launches x 10 us around 2 ms: 0.5 / 2.5
    EXPECT_NEAR(out("iron_law", {{"compute_us", "2000"}, {"launches", "50"}, {"launch_us", "10"}}, "overhead_fraction"), 0.2, 1e-12);
    // Half the time, halved: 1 / 0.75
    EXPECT_NEAR(out("amdahl", {{"fraction_a", "0.5"}, {"keep_a", "0.5"}}, "speedup"), 4.0 / 3.0, 1e-12);
    EXPECT_NEAR(out("movement_power", {{"accesses_per_s", "1e12"}, {"pj_per_access", "640"}}, "power"), 640.0, 1e-9);
}

TEST(Units, DecimalVersusBinaryBytes) {
    EXPECT_DOUBLE_EQ(to_unit(1073741824.0, "B", "GiB"), 1.0);
    EXPECT_DOUBLE_EQ(to_unit(1073741824.0, "B", "GB"), 1.073741824);
    EXPECT_DOUBLE_EQ(to_unit(524288.0, "B", "MiB"), 0.5);
    EXPECT_DOUBLE_EQ(to_unit(524288.0, "B", "MB"), 0.524288);
    EXPECT_DOUBLE_EQ(to_unit(2.5e-3, "s", "ms"), 2.5);
    EXPECT_DOUBLE_EQ(to_unit(0.0625, "1", "%"), 6.25);
    EXPECT_EQ(byte_unit_counterpart("GB"), "GiB");
    EXPECT_EQ(byte_unit_counterpart("MiB"), "MB");
    EXPECT_EQ(byte_unit_counterpart("ms"), "");
    EXPECT_THROW(to_unit(1, "B", "ms"), std::invalid_argument);
    EXPECT_THROW(to_unit(1, "B", "furlongs"), std::invalid_argument);
    // The 7B KV cache of the practitioner guide: 4.194e9 B is 3.906 GiB, not 3.9 GB... it is 4.19 GB.
    const double kv = 2.0 * 32 * 32 * 8000 * 128 * 2;
    EXPECT_NEAR(to_unit(kv, "B", "GiB"), 3.90625, 1e-12);
    EXPECT_NEAR(to_unit(kv, "B", "GB"), 4.194304, 1e-12);
}

TEST(Params, BadInputNamesTheProblem) {
    const Formula& f = *find_formula("kv_cache");
    auto msg = [&](std::map<std::string, std::string> raw) {
        try {
            resolve_params(f, raw);
        } catch (const mw::UsageError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(msg({{"layerz", "2"}}).find("valid parameters"), std::string::npos);
    EXPECT_NE(msg({{"layers", "2"}, {"tokens", "5"}}).find("--head_dim"), std::string::npos);
    EXPECT_NE(msg({{"layers", "abc"}}).find("'abc'"), std::string::npos);
    EXPECT_NE(msg({{"layers", "-3"}}).find("> 0"), std::string::npos);
    EXPECT_NE(msg({{"layers", "2"}, {"head_dim", "4"}, {"tokens", "5"}, {"attention", "xqa"}}).find("mha, gqa, mqa"), std::string::npos);
    EXPECT_EQ(find_formula("nosuch"), nullptr);
}

// ---- the formulas of issue 17, each against a hand calculation --------------

TEST(Formulas, CollectiveRing) {
    // 16.1e9 B on 8 GPUs: 2 x 7/8 = 1.75 payloads; 1.75 x 16.1e9 / 450e9 = 0.062611 s.
    std::map<std::string, std::string> p = {{"bytes", "16.1e9"}, {"gpus", "8"}, {"bandwidth_gbs", "450"}};
    EXPECT_DOUBLE_EQ(out("collective", p, "ring_factor"), 1.75);
    EXPECT_NEAR(out("collective", p, "wire_time"), 0.0626111, 1e-6);
    p["op"] = "allgather";  // (N-1)/N = 0.875
    EXPECT_DOUBLE_EQ(out("collective", p, "ring_factor"), 0.875);
}

TEST(Formulas, OverlapExposedTimeTest) {
    // comm 62.5, backward 166.3, forward 83.1 ms: serial 311.9, hidden -> 249.4, 311.9 / 249.4 = 1.25060.
    std::map<std::string, std::string> p = {{"comm_ms", "62.5"}, {"compute_ms", "166.3"}, {"other_ms", "83.1"}};
    EXPECT_NEAR(out("overlap", p, "step_serial"), 0.3119, 1e-12);
    EXPECT_NEAR(out("overlap", p, "step_overlapped"), 0.2494, 1e-12);
    EXPECT_NEAR(out("overlap", p, "speedup"), 1.2506014, 1e-6);
    EXPECT_EQ(text_out("overlap", p, "verdict"), "hidden");
    // Split over 4 GPUs the window is 41.575 ms: 20.925 ms stay exposed.
    p["gpus"] = "4";
    EXPECT_NEAR(out("overlap", p, "exposed"), 0.020925, 1e-12);
    EXPECT_EQ(text_out("overlap", p, "verdict"), "exposed");
}

TEST(Formulas, SmPartitionPagedKvQuantScale) {
    EXPECT_NEAR(out("sm_partition", {{"sms", "132"}, {"comm_sms", "8"}}, "loss"), 8.0 / 132, 1e-15);
    // max 4096, avg 500, pages of 16: 1 - 500/4096 = 0.8779296875; 512 allocated -> 1 - 500/512 = 0.0234375.
    std::map<std::string, std::string> k = {{"max_tokens", "4096"}, {"avg_tokens", "500"}, {"page_tokens", "16"}};
    EXPECT_DOUBLE_EQ(out("paged_kv", k, "contiguous_waste"), 0.8779296875);
    EXPECT_DOUBLE_EQ(out("paged_kv", k, "paged_waste"), 0.0234375);
    EXPECT_DOUBLE_EQ(out("paged_kv", k, "paged_waste_bound"), 15.0 / 515);
    EXPECT_DOUBLE_EQ(out("paged_kv", k, "batch_gain"), 8.0);
    // [-1, 2] in 4 bits: scale 3/15 = 0.2, zero = round(1/0.2) = 5, error 0.1.
    std::map<std::string, std::string> q = {{"x_min", "-1"}, {"x_max", "2"}, {"bits", "4"}};
    EXPECT_DOUBLE_EQ(out("quant_scale", q, "scale"), 0.2);
    EXPECT_DOUBLE_EQ(out("quant_scale", q, "zero_point"), 5);
    EXPECT_DOUBLE_EQ(out("quant_scale", q, "max_error"), 0.1);
}

TEST(Formulas, SpeculativeAcceptanceInvertsExpectedTokens) {
    // alpha 0.5, gamma 3: E = (1 - 0.5^4) / 0.5 = 1.875; the inverse must find 0.5.
    EXPECT_NEAR(out("spec_acceptance", {{"gamma", "3"}, {"expected_tokens", "1.875"}}, "alpha"), 0.5, 1e-9);
    EXPECT_NEAR(out("spec_acceptance", {{"gamma", "3"}, {"expected_tokens", "1.875"}}, "draft_acceptance"), 0.875 / 3, 1e-12);
}

TEST(Formulas, ScalingTaxServingCostTraining) {
    // 1 - 48/65 = 0.2615385; a node 10% slower: 1 - 1/1.1 = 0.0909091.
    std::map<std::string, std::string> t = {{"local_mfu", "0.65"}, {"fleet_mfu", "0.48"}, {"straggler_slowdown", "0.1"}};
    EXPECT_NEAR(out("scaling_tax", t, "tax"), 0.2615385, 1e-7);
    EXPECT_NEAR(out("scaling_tax", t, "straggler_mfu_loss"), 0.0909091, 1e-7);
    // 8 GPUs at $2.70/h for 50 tokens/s: 8 x 2.7 / 3600 x 1000 / 50 = $0.12 per 1,000 tokens.
    EXPECT_NEAR(out("serving_cost", {{"gpus", "8"}, {"tokens_per_s", "50"}, {"usd_per_gpu_hour", "2.7"}}, "usd_per_1000_tokens"), 0.12, 1e-12);
    // 64 streams at 120 ms: 533.33 tokens/s.
    EXPECT_NEAR(out("serving_cost", {{"gpus", "4"}, {"batch", "64"}, {"itl_ms", "120"}}, "tokens_per_s"), 533.3333, 1e-3);
    // 7e9 params, 1e12 tokens: 6 x 7e9 x 1e12 = 4.2e22 FLOP; 16 B/param = 112 GB; ZeRO-2 on 8: (2 + 14/8)/16.
    std::map<std::string, std::string> r = {{"params", "7e9"}, {"tokens", "1e12"}, {"gpus", "8"}, {"zero_stage", "2"}};
    EXPECT_DOUBLE_EQ(out("training", r, "flops"), 4.2e22);
    EXPECT_DOUBLE_EQ(out("training", r, "state_bytes_ddp"), 112e9);
    EXPECT_DOUBLE_EQ(out("training", r, "fraction_of_ddp"), 3.75 / 16);
}

TEST(Formulas, ActivationMemoryAndMoe) {
    // s 4096, h 8192, a 64, b 1: 34 s h = 1140850688 B; 5 a s^2 = 5368709120 B.
    std::map<std::string, std::string> a = {{"seq", "4096"}, {"hidden", "8192"}, {"heads", "64"}};
    EXPECT_DOUBLE_EQ(out("activation_memory", a, "per_layer_flash"), 1140850688.0);
    EXPECT_DOUBLE_EQ(out("activation_memory", a, "per_layer"), 1140850688.0 + 5368709120.0);
    // 1024 tokens, 8 experts, top-2, cf 1.25: ceil(1.25 x 2048 / 8) = 320 slots. Balanced aux = alpha = 0.01.
    std::map<std::string, std::string> m = {{"tokens", "1024"}, {"experts", "8"}, {"top_k", "2"}, {"capacity_factor", "1.25"},
                                            {"d_model", "4096"}, {"dtype_bytes", "2"}, {"gpus", "8"}};
    EXPECT_DOUBLE_EQ(out("moe", m, "capacity"), 320);
    EXPECT_NEAR(out("moe", m, "aux_loss"), 0.01, 1e-15);
    // 2 x 1024 x 2 x 4096 x 2 x 7/8 = 29360128 B.
    EXPECT_DOUBLE_EQ(out("moe", m, "alltoall_bytes"), 29360128.0);
    // Half the routing to one expert: 0.5 x 2048 = 1024 > 320 slots, 704 dropped; aux = 0.01 x 8 x (0.25 + 0.25/7).
    m["top_expert_share"] = "0.5";
    EXPECT_DOUBLE_EQ(out("moe", m, "dropped"), 704);
    EXPECT_NEAR(out("moe", m, "aux_loss"), 0.08 * (0.25 + 0.25 / 7), 1e-15);
}

TEST(Formulas, ShareSumNumberFormat) {
    EXPECT_DOUBLE_EQ(out("share", {{"part", "20"}, {"whole", "120"}}, "ratio"), 6.0);
    EXPECT_DOUBLE_EQ(out("sum", {{"a", "0.38"}, {"b", "0.24"}, {"c", "0.14"}, {"d", "0.12"}, {"e", "0.12"}}, "total"), 1.0);
    EXPECT_DOUBLE_EQ(out("number_format", {{"format", "fp16"}}, "max"), 65504);
    EXPECT_DOUBLE_EQ(out("number_format", {{"format", "tf32"}}, "bits"), 19);  // 1 + 8 + 10
    EXPECT_DOUBLE_EQ(out("number_format", {{"format", "bf16"}}, "range_exponent"), 38);
}

// A restatement is the defining line's number, converted: 90 s -> 1.5 min.
TEST(Formulas, Restated) {
    EXPECT_DOUBLE_EQ(out("restated", {{"value", "30"}}, "value"), 30.0);
    EXPECT_DOUBLE_EQ(out("restated", {{"value", "90"}, {"factor", "0.0166666666666666667"}}, "value"), 1.5);
    EXPECT_DOUBLE_EQ(out("restated", {{"value", "30"}, {"unit", "min"}}, "value"), 1800.0);  // in base units: s
    EXPECT_DOUBLE_EQ(out("restated", {{"value", "14"}, {"unit", "%"}}, "value"), 0.14);
}

// FFN block, T = 8192 tokens, d = 4096, e = 4, FP16, by hand:
// unfused = (2*4*4096^2 + 4*8192*4096 + 16*8192*4096) * 2 = (134,217,728 + 134,217,728 + 536,870,912) * 2
//         = 1,610,612,736 B; GELU epilogue saves 2*4*8192*4096*2 = 536,870,912 B -> 1/3;
// LayerNorm epilogue too saves 2*8192*4096*2 = 134,217,728 B more -> 671,088,640 / 1,610,612,736 = 5/12.
TEST(Formulas, FfnTraffic) {
    std::map<std::string, std::string> m = {{"tokens", "8192"}, {"d_model", "4096"}};
    EXPECT_DOUBLE_EQ(out("ffn_traffic", m, "unfused_bytes"), 1610612736.0);
    EXPECT_NEAR(out("ffn_traffic", m, "reduction"), 1.0 / 3.0, 1e-12);
    EXPECT_DOUBLE_EQ(out("ffn_traffic", m, "kernels_fused"), 3);
    m["fuse"] = "both_epilogues";
    EXPECT_NEAR(out("ffn_traffic", m, "reduction"), 5.0 / 12.0, 1e-12);
    EXPECT_DOUBLE_EQ(out("ffn_traffic", m, "kernels_fused"), 2);
    EXPECT_DOUBLE_EQ(out("ffn_traffic", m, "kernels_unfused"), 4);
}

TEST(Formulas, WholeCountsFractionsAndPeaks) {
    // A count must be whole, a fraction at most 1, a measurement at most its peak.
    EXPECT_THROW(out("kv_cache", {{"layers", "32.5"}, {"kv_heads", "8"}, {"head_dim", "128"}, {"tokens", "10"}}, "bytes"), mw::UsageError);
    EXPECT_THROW(out("scaling_tax", {{"local_mfu", "65"}, {"fleet_mfu", "0.48"}}, "tax"), mw::UsageError);
    EXPECT_THROW(out("roofline", {{"peak_tflops", "989"}, {"bandwidth_tbs", "3.35"}, {"achieved_tbs", "4"}}, "bandwidth_utilization"),
                 mw::UsageError);
    EXPECT_NO_THROW(out("kv_cache", {{"layers", "32"}, {"kv_heads", "8"}, {"head_dim", "128"}, {"tokens", "10"}}, "bytes"));
}

// GELU(x) = x Phi(x): Phi(1) = 0.8413447461 and Phi(-2) = 0.0227501319 from
// a normal table, so GELU(1) = 0.8413447461 and GELU(-2) = -0.0455002639.
// The tanh form at 1: 0.5 (1 + tanh(0.7978845608 x 1.044715)) = 0.5 (1 +
// tanh(0.8335622)) = 0.5 x 1.6823840 = 0.8411920.
TEST(Formulas, Gelu) {
    EXPECT_NEAR(out("gelu", {{"x", "1"}}, "gelu"), 0.8413447461, 1e-9);
    EXPECT_NEAR(out("gelu", {{"x", "-2"}}, "gelu"), -0.0455002639, 1e-9);
    EXPECT_NEAR(out("gelu", {{"x", "1"}}, "gelu_tanh"), 0.8411920, 1e-7);
    EXPECT_NEAR(out("gelu", {{"x", "1"}}, "tanh_error"), 0.8411920 - 0.8413447, 2e-7);
    EXPECT_DOUBLE_EQ(out("gelu", {{"x", "0"}}, "gelu"), 0.0);
    // Far left, 1 + erf cancels; the tail does not: Phi(-8) = 6.2209606e-16 (a
    // normal table), so GELU(-8) = -4.9767685e-15.
    EXPECT_NEAR(out("gelu", {{"x", "-8"}}, "gelu"), -4.9767685e-15, 1e-21);
}

// Row (1, 3): mean 2, variance ((1-2)^2 + (3-2)^2) / 2 = 1 (over n, not n - 1);
// with eps 1e-12, gamma 2, beta 1: y = -1 x 2 + 1 = -1 and 1 x 2 + 1 = 3.
// Row (1, 2, 3, 4): mean 2.5, variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25.
TEST(Formulas, LayerNorm) {
    std::map<std::string, std::string> m = {{"a", "1"}, {"b", "3"}, {"eps", "1e-12"}, {"gamma", "2"}, {"beta", "1"}};
    EXPECT_DOUBLE_EQ(out("layernorm", m, "mean"), 2.0);
    EXPECT_DOUBLE_EQ(out("layernorm", m, "variance"), 1.0);
    EXPECT_NEAR(out("layernorm", m, "y_a"), -1.0, 1e-9);
    EXPECT_NEAR(out("layernorm", m, "y_b"), 3.0, 1e-9);
    EXPECT_DOUBLE_EQ(out("layernorm", {{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}}, "variance"), 1.25);
}

// Part 1 holds the values 1 and 0: m1 = 1, l1 = e^0 + e^-1 = 1.3678794412.
// Part 2 holds 3: m2 = 3, l2 = 1. The whole row: m = 3, l = e^-2 + e^-3 + 1
// = 0.1353352832 + 0.0497870684 + 1 = 1.1851223516; part 1's share
// 0.1851223516 / 1.1851223516 = 0.1562053. With o1 = 0.5, o2 = 1.5:
// o = (0.0925611758 + 1.5) / 1.1851223516 = 1.5925611758 / 1.1851223516 = 1.3437947.
TEST(Formulas, SoftmaxMerge) {
    std::map<std::string, std::string> m = {{"m1", "1"}, {"l1", "1.3678794412"}, {"m2", "3"}, {"l2", "1"},
                                            {"o1", "0.5"}, {"o2", "1.5"}};
    EXPECT_DOUBLE_EQ(out("softmax_merge", m, "m"), 3.0);
    EXPECT_NEAR(out("softmax_merge", m, "l"), 1.1851223516, 1e-9);
    EXPECT_NEAR(out("softmax_merge", m, "share_1"), 0.1562053, 1e-6);
    EXPECT_NEAR(out("softmax_merge", m, "o"), 1.3437947, 1e-6);
    std::swap(m["m1"], m["m2"]), std::swap(m["l1"], m["l2"]);  // in either order
    EXPECT_NEAR(out("softmax_merge", m, "l"), 1.1851223516, 1e-9);
}

// Target p = (0.6, 0.4), draft q = (0.8, 0.2): token 1 is kept with
// min(1, 0.6 / 0.8) = 0.75; alpha = min(.6,.8) + min(.4,.2) = 0.8; after a
// rejection the residual (0, 0.2) / 0.2 = (0, 1). Token 1 comes out with
// 0.8 x 0.75 = 0.6 = p1: the rule keeps the target's law.
TEST(Formulas, SpeculativeRule) {
    std::map<std::string, std::string> m = {{"p1", "0.6"}, {"q1", "0.8"}, {"p2", "0.4"}, {"q2", "0.2"}};
    EXPECT_DOUBLE_EQ(out("spec_rule", m, "accept"), 0.75);
    EXPECT_NEAR(out("spec_rule", m, "alpha"), 0.8, 1e-12);
    EXPECT_DOUBLE_EQ(out("spec_rule", m, "residual_1"), 0.0);
    EXPECT_NEAR(out("spec_rule", m, "residual_2"), 1.0, 1e-12);
    m["q1"] = "0.5";  // q no longer sums to 1
    EXPECT_THROW(out("spec_rule", m, "accept"), mw::UsageError);
}

// 6e15 model FLOPs in 10 s at 1000 TFLOP/s: MFU 0.6; recomputing half the
// model's FLOPs again (9e15 executed): HFU 0.9.
TEST(Formulas, MfuAndHfu) {
    std::map<std::string, std::string> m = {{"model_flops", "6e15"}, {"time_s", "10"}, {"peak_tflops", "1000"},
                                            {"recompute_fraction", "0.5"}};
    EXPECT_DOUBLE_EQ(out("utilization", m, "mfu"), 0.6);
    EXPECT_DOUBLE_EQ(out("utilization", m, "hfu"), 0.9);
    m.erase("recompute_fraction");
    m["executed_flops"] = "5e15";  // fewer than the model's: refused
    EXPECT_THROW(out("utilization", m, "hfu"), mw::UsageError);
}

// 90% of the time sped up, 5x overall wanted: 1 / 5 = 0.1 + 0.9 / s, so
// s = 0.9 / 0.1 = 9; the limit is 1 / 0.1 = 10, which no part speed reaches.
TEST(Formulas, InverseAmdahl) {
    EXPECT_NEAR(out("inverse_amdahl", {{"fraction", "0.9"}, {"target_speedup", "5"}}, "part_speedup"), 9.0, 1e-12);
    EXPECT_NEAR(out("inverse_amdahl", {{"fraction", "0.9"}, {"target_speedup", "5"}}, "limit"), 10.0, 1e-12);
    EXPECT_THROW(out("inverse_amdahl", {{"fraction", "0.9"}, {"target_speedup", "10"}}, "part_speedup"), mw::UsageError);
    // All of the time sped up: the part needs the target itself, and there is no limit.
    EXPECT_NEAR(out("inverse_amdahl", {{"fraction", "1"}, {"target_speedup", "7"}}, "part_speedup"), 7.0, 1e-12);
    EXPECT_NEAR(out("amdahl", {{"fraction_a", "0.9"}, {"keep_a", "0.1111111111111111"}}, "speedup"), 5.0, 1e-12);  // and back
}

// A 7e9-parameter model, 1000 prompt tokens, fp16, 989 TFLOP/s, 3.35 TB/s:
// 2 x 7e9 x 1000 = 1.4e13 FLOP -> 14.1557 ms; 1.4e10 B -> 4.1791 ms: the
// compute floor, 70,643 tokens/s. With 32 layers of width 4096 the causal
// scores add 2 x 32 x 1000^2 x 4096 = 2.62144e11 FLOP.
TEST(Formulas, Prefill) {
    std::map<std::string, std::string> m = {{"params", "7e9"}, {"tokens", "1000"}, {"peak_tflops", "989"},
                                            {"bandwidth_tbs", "3.35"}};
    EXPECT_DOUBLE_EQ(out("prefill", m, "flops"), 1.4e13);
    EXPECT_NEAR(out("prefill", m, "time"), 1.4e13 / 989e12, 1e-12);
    EXPECT_NEAR(out("prefill", m, "memory_time"), 1.4e10 / 3.35e12, 1e-12);
    EXPECT_NEAR(out("prefill", m, "tokens_per_s"), 70642.857, 1e-2);
    EXPECT_EQ(text_out("prefill", m, "regime"), "compute-bound");
    m["layers"] = "32", m["d_model"] = "4096";
    EXPECT_DOUBLE_EQ(out("prefill", m, "attention_flops"), 2.62144e11);
}
