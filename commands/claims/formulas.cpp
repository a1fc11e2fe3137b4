// The formulas behind `memwall calc` and `memwall reproduce`; see formulas.hpp.
//
// Each formula is a small table entry: its parameters (with units and
// defaults), the formula in words, and a function from parameters to
// outputs in canonical units. The entry (NAME_formula()) sits right after
// its function (eval_*), and build() lists the entries. The functions are deliberately plain
// arithmetic, so that a reader can check them against the seed texts line
// by line, and tests/experiments/ checks them against hand computations.
#include "commands/claims/formulas.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <regex>
#include <stdexcept>

#include "harness/ceilings.hpp"
#include "harness/command.hpp"
#include "harness/strings.hpp"
#include "kernels/speculative/expected_tokens.hpp"

namespace mw::calc {

namespace {

ParamSpec req(std::string name, std::string unit, std::string help) {
    return {std::move(name), std::move(unit), std::move(help), true, std::nullopt, {}, true};
}
ParamSpec opt(std::string name, std::string unit, std::string help, std::optional<double> def = std::nullopt,
              bool positive = true) {
    return {std::move(name), std::move(unit), std::move(help), false, def, {}, positive};
}
ParamSpec choice(std::string name, std::string help, std::vector<std::string> choices) {
    return {std::move(name), "choice", std::move(help), false, std::nullopt, std::move(choices), true};
}
// A numeric parameter that may also be 0, or be of any sign.
ParamSpec zero_ok(ParamSpec s) {
    s.positive = false;
    return s;
}
ParamSpec any_sign_ok(ParamSpec s) {
    s.any_sign = true;
    return s;
}

Output out(std::string name, double v, std::string dim, std::string words) {
    return {std::move(name), v, std::move(dim), std::move(words), {}};
}
Output text(std::string name, std::string t, std::string words) {
    return {std::move(name), 0, "text", std::move(words), std::move(t)};
}

double num_or(const Params& p, const std::string& k, double d) { return p.num.count(k) ? p.num.at(k) : d; }

// The one lookup by name this file makes, of formulas, their parameters and
// outputs, units and number formats: the element of `v` called `name`, or
// nullptr.
template <class T>
const T* find_named(const std::vector<T>& v, const std::string& name) {
    for (auto& x : v)
        if (x.name == name) return &x;
    return nullptr;
}

// ---- peaks: given, or looked up in the project's GPU spec table ------------

const std::vector<std::string> kPeakDtypes = {"fp32", "tf32", "fp16", "bf16", "fp8", "int8"};

// The spec-table column for a dtype: spec_peak_tflops (harness/ceilings.hpp).

std::vector<std::string> gpu_names() {
    std::vector<std::string> v;
    for (auto& g : known_gpus()) v.push_back(g.name);
    return v;
}

const GpuSpec& lookup_gpu(const Params& p) {
    const std::string& name = p.str.at("gpu");
    const GpuSpec* g = find_gpu_spec(name);
    if (!g) throw UsageError("unknown gpu '" + name + "'; known GPUs: " + join(gpu_names()));
    return *g;
}

// Peak FLOP/s and bandwidth B/s from --peak_tflops/--bandwidth_tbs, or from
// --gpu (+ --dtype) when those are absent.
std::pair<double, double> peaks(const Params& p) {
    double peak = 0, bw = 0;
    if (p.num.count("peak_tflops")) peak = p.at("peak_tflops") * 1e12;
    if (p.num.count("bandwidth_tbs")) bw = p.at("bandwidth_tbs") * 1e12;
    if ((peak == 0 || bw == 0) && p.str.count("gpu")) {
        const GpuSpec& g = lookup_gpu(p);
        const std::string dtype = p.str.count("dtype") ? p.str.at("dtype") : "fp16";
        if (peak == 0) peak = spec_peak_tflops(g, dtype) * 1e12;
        if (bw == 0) bw = g.hbm_gbps * 1e9;
        if (peak == 0)
            throw UsageError("the spec table has no " + dtype + " peak for " + g.name + "; pass --peak_tflops");
    }
    if (peak == 0) throw UsageError("missing required parameter --peak_tflops (or --gpu NAME)");
    if (bw == 0) throw UsageError("missing required parameter --bandwidth_tbs (or --gpu NAME)");
    return {peak, bw};
}

std::vector<ParamSpec> peak_params() {
    return {opt("peak_tflops", "TFLOP/s", "peak compute (or take it from --gpu)"),
            opt("bandwidth_tbs", "TB/s", "peak memory bandwidth, decimal TB/s (or take it from --gpu)"),
            // --gpu choices are the spec table's names (matched loosely by find_gpu_spec).
            choice("gpu", "a GPU of the spec table (harness/gpu_specs.cpp) for the peaks", gpu_names()),
            choice("dtype", "which peak of --gpu (default fp16)", kPeakDtypes)};
}

// ---- the formulas ----------------------------------------------------------

std::vector<Output> eval_ridge(const Params& p) {
    auto [peak, bw] = peaks(p);
    return {out("ridge", peak / bw, "FLOP/B", "ridge point: the intensity where the two roofs meet"),
            out("peak", peak, "FLOP/s", "peak compute used"), out("bandwidth", bw, "B/s", "bandwidth used")};
}

Formula ridge_formula() {
    return {"ridge", "ridge point of a roofline", "ridge = peak FLOP/s / memory bandwidth B/s", peak_params(),
            eval_ridge};
}

std::vector<Output> eval_roofline(const Params& p) {
    auto [peak, bw] = peaks(p);
    std::vector<Output> o;
    const double ridge = peak / bw;
    o.push_back(out("ridge", ridge, "FLOP/B", "ridge point = peak / bandwidth"));
    o.push_back(out("peak", peak, "FLOP/s", "peak compute used"));
    o.push_back(out("bandwidth", bw, "B/s", "bandwidth used"));
    if (p.num.count("intensity")) {
        const double I = p.at("intensity");
        const double att = std::min(peak, I * bw);
        o.push_back(out("attainable", att, "FLOP/s", "attainable = min(peak, intensity x bandwidth)"));
        o.push_back(out("fraction_of_peak", att / peak, "1", "attainable / peak"));
        o.push_back(text("regime", I < ridge ? "memory-bound" : "compute-bound", "below the ridge: memory-bound"));
        o.push_back(out("orders_below_ridge", std::log10(ridge / I), "1", "log10(ridge / intensity)"));
    }
    // A measured figure above its peak is a misread profile or a wrong peak: say so.
    if (p.num.count("achieved_tflops") && p.at("achieved_tflops") * 1e12 > peak * (1 + 1e-9))
        throw UsageError("--achieved_tflops " + fmt(p.at("achieved_tflops")) + " exceeds the peak " + fmt(peak / 1e12) +
                         " TFLOP/s; a measurement cannot beat its roof");
    if (p.num.count("achieved_tbs") && p.at("achieved_tbs") * 1e12 > bw * (1 + 1e-9))
        throw UsageError("--achieved_tbs " + fmt(p.at("achieved_tbs")) + " exceeds the peak bandwidth " + fmt(bw / 1e12) +
                         " TB/s; a measurement cannot beat its roof");
    if (p.num.count("achieved_tflops") && p.num.count("achieved_tbs")) {
        const double f = p.at("achieved_tflops") * 1e12, b = p.at("achieved_tbs") * 1e12;
        o.push_back(out("observed_intensity", f / b, "FLOP/B", "achieved FLOP/s / achieved B/s"));
        o.push_back(out("bandwidth_utilization", b / bw, "1", "achieved bandwidth / peak bandwidth"));
        o.push_back(out("compute_utilization", f / peak, "1", "achieved FLOP/s / peak"));
    } else if (p.num.count("achieved_tbs")) {
        o.push_back(out("bandwidth_utilization", p.at("achieved_tbs") * 1e12 / bw, "1",
                        "achieved bandwidth / peak bandwidth"));
    }
    if (!p.num.count("intensity") && !p.num.count("achieved_tbs"))
        throw UsageError("missing required parameter --intensity (FLOP/B) (or --achieved_tbs); "
                         "for the ridge point alone use `memwall calc ridge`");
    return o;
}

Formula roofline_formula() {
    auto ps = peak_params();
    ps.insert(ps.begin(), opt("intensity", "FLOP/B", "arithmetic intensity of the kernel"));
    ps.push_back(opt("achieved_tflops", "TFLOP/s", "measured FLOP/s (observed intensity)"));
    ps.push_back(opt("achieved_tbs", "TB/s", "measured bandwidth (utilization)"));
    return {"roofline", "attainable FLOP/s of a kernel on a roofline",
            "attainable = min(peak, intensity x bandwidth); memory-bound below ridge = peak / bandwidth", ps,
            eval_roofline};
}

std::vector<Output> eval_gemm(const Params& p) {
    const double m = p.at("m"), n = p.at("n"), k = p.at("k"), b = p.at("dtype_bytes");
    const double flops = 2 * m * n * k;
    const double bytes = (m * k + k * n + m * n) * b;  // A and B read once, C written once
    return {out("flops", flops, "FLOP", "2 x m x n x k"),
            out("bytes", bytes, "B", "(m*k + k*n + m*n) x dtype_bytes: each matrix crosses memory once"),
            out("intensity", flops / bytes, "FLOP/B", "flops / bytes")};
}

Formula gemm_intensity_formula() {
    return {"gemm_intensity", "arithmetic intensity of C[m,n] = A[m,k] B[k,n]",
            "intensity = 2mnk / ((mk + kn + mn) x dtype_bytes)",
            {req("m", "count", "rows of A and C"), req("n", "count", "columns of B and C"),
             req("k", "count", "reduction length"), opt("dtype_bytes", "bytes", "bytes per element", 2)},
            eval_gemm};
}

std::vector<Output> eval_elementwise(const Params& p) {
    const double n = p.at("elements"), f = p.at("flops_per_element"), b = p.at("dtype_bytes");
    const double bytes = n * b * (p.at("reads") + p.at("writes"));
    return {out("flops", n * f, "FLOP", "elements x flops_per_element"),
            out("bytes", bytes, "B", "elements x dtype_bytes x (reads + writes)"),
            out("intensity", n * f / bytes, "FLOP/B", "flops / bytes")};
}

Formula elementwise_intensity_formula() {
    return {"elementwise_intensity", "arithmetic intensity of an element-wise op",
            "intensity = flops_per_element / (dtype_bytes x (reads + writes))",
            {req("elements", "count", "tensor elements"), req("flops_per_element", "FLOP", "work per element"),
             opt("dtype_bytes", "bytes", "bytes per element", 2), opt("reads", "count", "tensors read", 1),
             opt("writes", "count", "tensors written", 1)},
            eval_elementwise};
}

std::vector<Output> eval_decode(const Params& p) {
    const double P = p.at("params"), B = p.at("batch"), d = p.at("d_model");
    const double bp = p.at("param_bytes"), be = p.at("act_bytes");
    const double flops = 2 * P * B;
    const double bytes = P * bp + B * d * be;  // weights once per step + one activation row per request
    std::vector<Output> o = {out("flops", flops, "FLOP", "2 x params x batch (one multiply-add per weight per request)"),
                             out("bytes", bytes, "B", "params x param_bytes + batch x d_model x act_bytes"),
                             out("intensity", flops / bytes, "FLOP/B", "2PB / (P b_param + B d b_elem)")};
    if (p.num.count("bandwidth_tbs")) {
        const double bw = p.at("bandwidth_tbs") * 1e12;
        double t = bytes / bw;
        if (p.num.count("peak_tflops")) t = std::max(t, flops / (p.at("peak_tflops") * 1e12));
        o.push_back(out("step_time", t, "s", "max(bytes / bandwidth, flops / peak)"));
        o.push_back(out("tokens_per_s", B / t, "1", "batch / step_time"));
        if (p.num.count("peak_tflops"))
            o.push_back(out("compute_utilization", flops / t / (p.at("peak_tflops") * 1e12), "1",
                            "achieved FLOP/s / peak"));
    }
    return o;
}

Formula decode_intensity_formula() {
    return {"decode_intensity", "arithmetic intensity of one decode step at batch B",
            "I(B) = 2 P B / (P b_param + B d_model b_elem); time = max(bytes/BW, flops/peak)",
            {req("params", "count", "parameters read per step (P)"), opt("batch", "count", "requests per step (B)", 1),
             opt("d_model", "count", "hidden width", 4096), opt("param_bytes", "bytes", "bytes per weight", 2),
             opt("act_bytes", "bytes", "bytes per activation element", 2),
             opt("bandwidth_tbs", "TB/s", "memory bandwidth (for step time and tokens/s)"),
             opt("peak_tflops", "TFLOP/s", "peak compute (for step time and utilization)")},
            eval_decode};
}

std::vector<Output> eval_kv(const Params& p) {
    const std::string att = p.str.count("attention") ? p.str.at("attention") : "";
    const bool have_q = p.num.count("q_heads"), have_kv = p.num.count("kv_heads");
    double kv = 0;
    if (att == "mha") {
        if (!have_q && !have_kv) throw UsageError("attention=mha needs --q_heads (K/V heads = query heads)");
        kv = have_q ? p.at("q_heads") : p.at("kv_heads");
        if (have_q && have_kv && p.at("kv_heads") != p.at("q_heads"))
            throw UsageError("attention=mha has kv_heads = q_heads; drop --kv_heads or use --attention gqa");
    } else if (att == "mqa") {
        kv = 1;
        if (have_kv && p.at("kv_heads") != 1) throw UsageError("attention=mqa has one K/V head; drop --kv_heads");
    } else {
        if (!have_kv) throw UsageError("missing required parameter --kv_heads (or --attention mha|mqa)");
        kv = p.at("kv_heads");
        if (have_q && std::fmod(p.at("q_heads"), kv) != 0)
            throw UsageError("--kv_heads must divide --q_heads (each K/V head serves a whole group of query heads)");
    }
    const double L = p.at("layers"), d = p.at("head_dim"), n = p.at("tokens"), b = p.at("dtype_bytes");
    const double B = p.at("batch"), shards = p.at("shards");
    const double per_token = 2 * L * kv * d * b;  // K and V, every layer
    const double per_request = per_token * n;
    std::vector<Output> o = {
        out("bytes", per_request * B, "B", "2 (K and V) x layers x kv_heads x head_dim x tokens x dtype_bytes x batch"),
        out("bytes_per_token", per_token, "B", "2 x layers x kv_heads x head_dim x dtype_bytes"),
        out("bytes_per_request", per_request, "B", "one sequence of `tokens`"),
        out("bytes_per_request_per_shard", per_request / shards, "B", "K/V heads split over `shards` GPUs"),
        out("kv_heads", kv, "1", "K/V heads cached per layer")};
    if (have_q) o.push_back(out("reduction_vs_mha", p.at("q_heads") / kv, "1", "MHA cache / this cache = q_heads / kv_heads"));
    // Batch limit: (memory - weights) per shard / cache per request per shard.
    if (p.num.count("memory_gb")) {
        double weights = num_or(p, "weights_gb", 0) * 1e9;
        if (p.num.count("model_params"))
            weights = p.at("model_params") * p.at("weight_bits") / 8 / shards;
        const double budget = p.at("memory_gb") * 1e9 - weights;
        if (budget <= 0) throw UsageError("the weights fill the memory: nothing left for the KV cache");
        o.push_back(out("weights_per_shard", weights, "B", "model_params x weight_bits / 8 / shards"));
        o.push_back(out("kv_budget_per_shard", budget, "B", "memory - weights"));
        o.push_back(out("max_batch", std::floor(budget / (per_request / shards)), "1",
                        "floor(kv budget / cache per request), per shard"));
    }
    if (p.num.count("reserved_tokens"))
        o.push_back(out("waste_fraction", 1 - n / p.at("reserved_tokens"), "1",
                        "1 - tokens / reserved_tokens: a contiguous slab sized for the maximum"));
    return o;
}

Formula kv_cache_formula() {
    return {"kv_cache", "KV-cache bytes (MHA / GQA / MQA) and the batch it allows",
            "bytes = 2 x layers x kv_heads x head_dim x tokens x dtype_bytes x batch; "
            "max_batch = floor((memory - weights) / cache per request), per shard",
            {req("layers", "count", "transformer layers"), req("head_dim", "count", "dimension of one head"),
             req("tokens", "count", "cached tokens per sequence"), opt("dtype_bytes", "bytes", "bytes per cached value", 2),
             opt("batch", "count", "sequences", 1), choice("attention", "mha, gqa or mqa", {"mha", "gqa", "mqa"}),
             opt("q_heads", "count", "query heads"), opt("kv_heads", "count", "K/V heads (gqa)"),
             opt("shards", "count", "GPUs the K/V heads are split over", 1),
             opt("memory_gb", "GB", "memory per shard (decimal GB) for max_batch"),
             opt("weights_gb", "GB", "weights per shard (decimal GB)", std::nullopt, false),
             opt("model_params", "count", "parameters (weights per shard = model_params x weight_bits / 8 / shards)"),
             opt("weight_bits", "bits", "bits per stored weight", 16),
             opt("reserved_tokens", "count", "tokens a contiguous slab reserves (waste_fraction)")},
            eval_kv};
}

std::vector<Output> eval_quant(const Params& p) {
    const double bits = p.at("bits"), G = p.at("group_size"), ref = p.at("reference_bits");
    const double meta = (p.at("scale_bits") + p.at("zero_bits")) / G;  // per-group metadata spread over G weights
    const double eff = bits + meta;
    std::vector<Output> o = {
        out("effective_bits", eff, "bit", "bits + (scale_bits + zero_bits) / group_size"),
        out("metadata_bits", meta, "bit", "(scale_bits + zero_bits) / group_size"),
        out("overhead_vs_payload", meta / bits, "1", "metadata bits / payload bits"),
        out("overhead_vs_reference", meta / ref, "1", "metadata bits / reference_bits"),
        out("payload_compression", ref / bits, "1", "reference_bits / bits (metadata ignored)"),
        out("compression", ref / eff, "1", "reference_bits / effective_bits (metadata counted)"),
        out("size_vs_reference", eff / ref, "1", "effective_bits / reference_bits: the share of the original size")};
    if (p.num.count("weights"))
        o.push_back(out("bytes_per_shard", p.at("weights") * eff / 8 / p.at("shards"), "B",
                        "weights x effective_bits / 8 / shards"));
    return o;
}

Formula block_quant_formula() {
    return {"block_quant", "effective bits per weight of block (group) quantization",
            "effective_bits = bits + (scale_bits + zero_bits) / group_size",
            {req("bits", "bits", "payload bits per weight"), req("group_size", "count", "weights sharing one scale"),
             opt("scale_bits", "bits", "bits of one scale", 16, false),
             opt("zero_bits", "bits", "bits of one zero point", 0, false),
             opt("reference_bits", "bits", "the format it replaces", 16),
             opt("weights", "count", "weights (for bytes)"), opt("shards", "count", "GPUs they are split over", 1)},
            eval_quant};
}

std::vector<Output> eval_flash(const Params& p) {
    const double S = p.at("seq"), H = p.at("heads"), d = p.at("head_dim"), b = p.at("dtype_bytes");
    const double blk = p.at("block");
    const double qkvy = 4 * S * d * b;  // Q, K, V read, Y written: the state both versions keep in HBM
    const double scores = S * S * b;    // one S x S matrix (scores or probabilities)
    const double naive_head = qkvy + 4 * scores;  // scores and probabilities, each written then read back
    const double flops_head = 4 * S * S * d;      // QK^T and PV, 2 S^2 d each (softmax not counted)
    return {
        out("score_bytes_per_head", scores, "B", "S x S x dtype_bytes"),
        out("naive_bytes_per_head", naive_head, "B", "4 S d b (Q,K,V,Y) + 4 S^2 b (scores and probabilities written and read)"),
        out("naive_bytes", naive_head * H, "B", "per head x heads"),
        out("flash_bytes_per_head", qkvy, "B", "4 S d b: Q, K, V, Y only"),
        out("flash_bytes", qkvy * H, "B", "per head x heads"),
        out("reduction", naive_head / qkvy, "1", "naive / flash = 1 + S / d"),
        out("flops", flops_head * H, "FLOP", "4 S^2 d x heads (two matmuls; softmax not counted)"),
        out("naive_intensity", flops_head / naive_head, "FLOP/B", "flops / naive bytes (tends to d / b)"),
        out("flash_intensity", flops_head / qkvy, "FLOP/B", "flops / flash bytes (= S / b)"),
        out("tile_bytes", 3 * blk * d * b, "B", "one Q, K and V tile of block x head_dim"),
        out("tiles_per_side", std::ceil(S / blk), "1", "ceil(S / block)")};
}

Formula flash_attention_formula() {
    return {"flash_attention", "HBM-visible attention state: naive (materialized S x S) vs FlashAttention",
            "naive = heads x (4 S d b + 4 S^2 b); flash = heads x 4 S d b; reduction = 1 + S/d",
            {req("seq", "count", "sequence length S"), req("heads", "count", "attention heads"),
             req("head_dim", "count", "head dimension d"), opt("dtype_bytes", "bytes", "bytes per element", 2),
             opt("block", "count", "tile edge (tile_bytes)", 128)},
            eval_flash};
}

std::vector<Output> eval_fusion(const Params& p) {
    const double t = p.at("elements") * p.at("dtype_bytes");
    const double k = p.at("intermediates"), extra = p.at("extra_bytes"), layers = p.at("layers");
    const double unfused = extra + (2 + 2 * k) * t;  // input read, output written, each intermediate written + read
    const double fused = extra + 2 * t;
    return {out("tensor_bytes", t, "B", "elements x dtype_bytes (one intermediate)"),
            out("materialized_bytes", k * t, "B", "intermediates x tensor_bytes"),
            out("intermediate_traffic", 2 * k * t, "B", "each intermediate written once and read once"),
            out("intermediate_traffic_all_layers", 2 * k * t * layers, "B", "x layers"),
            out("unfused_round_trips", 2 * (k + 1), "1", "activation-sized HBM transfers unfused: 2 (k+1)"),
            out("fused_round_trips", 2, "1", "read the input, write the output"),
            out("unfused_bytes", unfused, "B", "extra_bytes + (2 + 2k) x tensor_bytes"),
            out("fused_bytes", fused, "B", "extra_bytes + 2 x tensor_bytes"),
            out("traffic_reduction", unfused / fused, "1", "unfused_bytes / fused_bytes")};
}

Formula fusion_traffic_formula() {
    return {"fusion_traffic", "HBM traffic of a chain of ops unfused vs fused",
            "intermediate traffic = 2 x intermediates x elements x dtype_bytes; "
            "unfused = extra + (2 + 2k) x tensor, fused = extra + 2 x tensor",
            {req("elements", "count", "elements of one activation tensor"),
             opt("dtype_bytes", "bytes", "bytes per element", 2),
             opt("intermediates", "count", "tensors the unfused chain writes and rereads (k)", 2),
             opt("extra_bytes", "bytes", "traffic both versions pay (e.g. GEMM weights)", 0, false),
             opt("layers", "count", "layers (for the all-layer total)", 1)},
            eval_fusion};
}

std::vector<Output> eval_spec(const Params& p) {
    const double a = p.at("alpha"), g = p.at("gamma");
    // Geometric acceptance: token i (1..gamma) survives with alpha^i, plus
    // one token from the target at the first rejection (or a bonus token).
    const double E = speculative::expected_tokens(a, g);
    std::vector<Output> o = {out("expected_tokens", E, "1", "(1 - alpha^(gamma+1)) / (1 - alpha)")};
    if (p.num.count("measured_tokens_per_pass"))
        o.push_back(out("tokens_vs_measured", E / p.at("measured_tokens_per_pass"), "1",
                        "expected_tokens / measured_tokens_per_pass (1 = the geometric model is exact)"));
    if (p.num.count("verify_ms")) {
        const double per = (num_or(p, "draft_ms", 0) + p.at("verify_ms")) * 1e-3 / E;
        o.push_back(out("time_per_token", per, "s", "(draft_ms + verify_ms) / expected_tokens"));
        if (p.num.count("baseline_ms")) {
            const double sp = p.at("baseline_ms") * 1e-3 / per;
            o.push_back(out("speedup", sp, "1", "baseline_ms / time_per_token"));
            if (p.num.count("measured_speedup"))
                o.push_back(out("speedup_vs_measured", sp / p.at("measured_speedup"), "1",
                                "predicted speedup / measured_speedup (1 = the prediction is exact)"));
        }
    }
    return o;
}

Formula speculative_formula() {
    return {"speculative", "expected tokens per target pass in speculative decoding",
            "E = (1 - alpha^(gamma+1)) / (1 - alpha); time per token = (draft + verify) / E",
            {zero_ok(req("alpha", "probability", "acceptance rate of one draft token")),  // 0: every draft rejected
             req("gamma", "count", "draft tokens per round"),
             opt("draft_ms", "ms", "draft time per round", std::nullopt, false),
             opt("verify_ms", "ms", "target verification pass"),
             opt("baseline_ms", "ms", "one plain decode step (for speedup)"),
             opt("measured_tokens_per_pass", "x", "tokens per target pass a run measured, printed beside the prediction"),
             opt("measured_speedup", "x", "speedup a run measured, printed beside the prediction")},
            eval_spec};
}

std::vector<Output> eval_checkpoint(const Params& p) {
    const double N = p.at("layers"), a = p.at("activation_bytes"), r = p.at("backward_ratio");
    // A checkpoint is one block's input; without a figure of its own it costs
    // a whole layer's activations (the seeds' scheme).
    // The best k is searched over 1..N: bounded, with N at most a million layers.
    if (N > 1e6) throw UsageError("--layers " + fmt(N) + " is out of range; valid: 1..1000000");
    const double cb = p.num.count("checkpoint_bytes") ? p.at("checkpoint_bytes") : a;
    const double k = p.num.count("every") ? p.at("every") : std::max(1.0, std::round(std::sqrt(N)));
    if (k > N) throw UsageError("--every must be at most --layers");
    const double kept = std::ceil(N / k);  // the checkpoints
    // Backward over one segment rebuilds its k activations from the checkpoint before it.
    auto stored_at = [&](double e) { return std::ceil(N / e) * cb + e * a; };
    const double stored = stored_at(k);
    double best = 1;
    for (double e = 2; e <= N; ++e)
        if (stored_at(e) < stored_at(best)) best = e;
    const double recomputed = N - kept;
    return {out("stored_naive", N * a, "B", "layers x activation_bytes"),
            out("stored_checkpointed", stored, "B",
                "ceil(N/k) checkpoints x checkpoint_bytes + k live in one segment x activation_bytes"),
            out("memory_reduction", N * a / stored, "1", "stored_naive / stored_checkpointed"),
            out("best_every", best, "1", "the k in 1..N that stores least (near sqrt(N checkpoint_bytes / activation_bytes))"),
            out("every", k, "1", "checkpoint every k layers (default round(sqrt(N)))"),
            out("extra_forward_fraction", 1 / (1 + r), "1",
                "one whole extra forward pass / (forward + backward), backward = backward_ratio x forward"),
            out("extra_compute_fraction", recomputed / N / (1 + r), "1",
                "recomputed layers / N x forward / (forward + backward)")};
}

Formula checkpoint_formula() {
    return {"checkpoint", "activation memory with a checkpoint every k layers (sqrt-N scheme)",
            "stored = ceil(N/k) x checkpoint bytes + k x per-layer bytes; extra compute = recomputed forward / (forward + backward)",
            {req("layers", "count", "layers N"), opt("activation_bytes", "bytes", "activation bytes per layer", 1),
             opt("checkpoint_bytes", "bytes", "bytes of one checkpoint, a block's input (default: activation_bytes)"),
             opt("every", "count", "checkpoint every k layers (default round(sqrt(N)))"),
             opt("backward_ratio", "x", "backward cost / forward cost", 2)},
            eval_checkpoint};
}

std::vector<Output> eval_iron(const Params& p) {
    double bytes = num_or(p, "bytes", 0);
    if (p.num.count("elements")) bytes = p.at("elements") * p.at("dtype_bytes") * p.at("copies");
    const double data = p.num.count("bandwidth_gbs") ? bytes / (p.at("bandwidth_gbs") * 1e9) : 0;
    if (bytes > 0 && !p.num.count("bandwidth_gbs")) throw UsageError("missing required parameter --bandwidth_gbs");
    double compute = num_or(p, "compute_us", 0) * 1e-6;
    if (p.num.count("flops")) {
        if (!p.num.count("peak_tflops")) throw UsageError("missing required parameter --peak_tflops");
        compute += p.at("flops") / (p.at("peak_tflops") * 1e12 * p.at("efficiency"));
    }
    const double lat = num_or(p, "latency_us", 0) * 1e-6 + p.at("launches") * p.at("launch_us") * 1e-6;
    const bool overlap = p.at("overlap") != 0;
    const double T = (overlap ? std::max(data, compute) : data + compute) + lat;
    if (T <= 0) throw UsageError("nothing to time: give --bytes/--elements with --bandwidth_gbs, --flops, --compute_us or --latency_us");
    std::vector<Output> o = {
        out("time", T, "s", overlap ? "max(D/BW, O/(R eta)) + L" : "D/BW + O/(R eta) + L"),
        out("data_time", data, "s", "bytes / bandwidth"), out("compute_time", compute, "s", "flops / (peak x efficiency) + compute_us"),
        out("overhead_time", lat, "s", "latency_us + launches x launch_us"),
        out("overhead_fraction", lat / T, "1", "overhead / total")};
    if (bytes > 0) o.push_back(out("bytes", bytes, "B", "elements x dtype_bytes x copies (or --bytes)"));
    if (data > 0 && lat > 0) o.push_back(out("overhead_to_data", lat / data, "1", "overhead / data time"));
    if (data > 0 && compute > 0) o.push_back(out("compute_to_data", compute / data, "1", "compute / data time"));
    const double m = std::max({data, compute, lat});
    o.push_back(text("bound", m == data ? "memory-bound" : m == compute ? "compute-bound" : "overhead-bound",
                     "the largest term"));
    return o;
}

Formula iron_law_formula() {
    return {"iron_law", "execution time = data + compute + overhead (the seeds' ML iron law)",
            "T = D/BW + O/(R_peak eta) + L (or max(D/BW, O/(R eta)) + L with --overlap 1)",
            {opt("bytes", "bytes", "data volume D"), opt("elements", "count", "or D = elements x dtype_bytes x copies"),
             opt("dtype_bytes", "bytes", "bytes per element", 2), opt("copies", "count", "times the data crosses", 1),
             opt("bandwidth_gbs", "GB/s", "bandwidth BW"), opt("flops", "FLOP", "operations O"),
             opt("peak_tflops", "TFLOP/s", "R_peak"), opt("efficiency", "fraction", "eta", 1),
             opt("compute_us", "us", "compute time given directly", std::nullopt, false),
             opt("latency_us", "us", "fixed overhead L", std::nullopt, false),
             opt("launches", "count", "kernel launches", 0, false), opt("launch_us", "us", "overhead per launch", 0, false),
             opt("overlap", "0|1", "1: data and compute overlap", 0, false)},
            eval_iron};
}

std::vector<Output> eval_amdahl(const Params& p) {
    const double fa = p.at("fraction_a"), ka = p.at("keep_a"), fb = p.at("fraction_b"), kb = p.at("keep_b");
    if (fa + fb > 1 + 1e-12) throw UsageError("--fraction_a + --fraction_b must be at most 1");
    const double rest = 1 - fa - fb;
    const double after = rest + fa * ka + fb * kb;  // as a fraction of the old time
    std::vector<Output> o = {out("speedup", 1 / after, "1", "1 / (rest + fraction_a x keep_a + fraction_b x keep_b)"),
                             out("untouched_share_after", rest / after, "1", "share of the new time in the untouched part")};
    if (p.num.count("base_ms")) {
        o.push_back(out("time_after", p.at("base_ms") * 1e-3 * after, "s", "base time x the fraction left"));
        o.push_back(out("rate_after", 1 / (p.at("base_ms") * 1e-3 * after), "1", "1 / time_after (per second)"));
    }
    return o;
}

Formula amdahl_formula() {
    return {"amdahl", "speedup when parts of the time shrink",
            "speedup = 1 / (rest + fraction_a x keep_a + fraction_b x keep_b)",
            {req("fraction_a", "fraction", "share of time of part a"), req("keep_a", "fraction", "part a keeps this share of its time"),
             opt("fraction_b", "fraction", "share of time of part b", 0, false),
             opt("keep_b", "fraction", "part b keeps this share", 1, false),
             opt("base_ms", "ms", "time before (for time_after)")},
            eval_amdahl};
}

std::vector<Output> eval_power(const Params& p) {
    const double n = p.at("accesses_per_s"), e = p.at("pj_per_access") * 1e-12;
    const double f = p.at("moved_fraction"), e2 = p.at("moved_pj") * 1e-12;
    const double before = n * e, after = n * ((1 - f) * e + f * e2);
    return {out("power", before, "W", "accesses_per_s x energy per access"),
            out("power_after", after, "W", "with moved_fraction of the accesses at moved_pj"),
            out("savings", before - after, "W", "power - power_after"),
            out("energy_ratio", e / (e2 > 0 ? e2 : e), "1", "pj_per_access / moved_pj")};
}

Formula movement_power_formula() {
    return {"movement_power", "power spent moving data, and what moving some of it on chip saves",
            "power = accesses/s x pJ per access",
            {req("accesses_per_s", "1/s", "memory accesses per second"), req("pj_per_access", "pJ", "energy per access"),
             opt("moved_fraction", "fraction", "share moved to the cheaper memory", 0, false),
             opt("moved_pj", "pJ", "energy per access there", 0.5)},
            eval_power};
}


// ---- communication, serving, training, MoE ------------------------------------

// A collective's time on a ring: allreduce moves 2 (N-1)/N of the payload per
// GPU, allgather, reduce-scatter and alltoall (N-1)/N.
std::vector<Output> eval_collective(const Params& p) {
    const double bytes = p.at("bytes"), N = p.at("gpus"), bw = p.at("bandwidth_gbs") * 1e9;
    const std::string op = p.str.count("op") ? p.str.at("op") : "allreduce";
    const double factor = (op == "allreduce" ? 2 : 1) * (N - 1) / N;
    const double wire = factor * bytes / bw, launch = p.at("launch_us") * 1e-6;
    return {out("ring_factor", factor, "1", "allreduce 2 (N-1)/N, others (N-1)/N: payloads each GPU sends"),
            out("bytes_on_wire", factor * bytes, "B", "ring_factor x bytes, per GPU"),
            out("wire_time", wire, "s", "ring_factor x bytes / bandwidth"),
            out("payload_time", bytes / bw, "s", "bytes / bandwidth (no ring factor)"),
            out("time", wire + launch, "s", "wire_time + launch_us"),
            out("launch_to_payload", launch / (bytes / bw), "1", "launch_us / (bytes / bandwidth)")};
}

Formula collective_formula() {
    return {"collective", "time of a ring collective (allreduce, allgather, alltoall)",
            "time = ring_factor x bytes / bandwidth + launch; allreduce ring_factor = 2 (N-1)/N",
            {req("bytes", "bytes", "payload per GPU"), req("gpus", "count", "GPUs in the ring (N)"),
             req("bandwidth_gbs", "GB/s", "link bandwidth per GPU"),
             choice("op", "allreduce (default), allgather, reducescatter or alltoall",
                    {"allreduce", "allgather", "reducescatter", "alltoall"}),
             opt("launch_us", "us", "fixed launch latency", 0, false)},
            eval_collective};
}

// The seeds' exposed-time test: communication leaves the critical path when
// T_comm - T_overlap <= T_compute / N.
std::vector<Output> eval_overlap(const Params& p) {
    const double comm = p.at("comm_ms") * 1e-3, compute = p.at("compute_ms") * 1e-3;
    const double window = compute / p.at("gpus"), other = p.at("other_ms") * 1e-3;
    const double exposed = std::max(0.0, comm - p.at("overlap_ms") * 1e-3 - window);
    const double serial = other + compute + comm, overlapped = other + compute + exposed;
    return {out("window", window, "s", "compute_ms / gpus: the compute communication can hide behind"),
            out("exposed", exposed, "s", "max(0, comm - overlap - window)"),
            text("verdict", exposed == 0 ? "hidden" : "exposed", "hidden when comm - overlap <= compute / N"),
            out("compute_to_comm", window / comm, "1", "window / comm_ms"),
            out("hidden_fraction", (comm - exposed) / comm, "1", "share of the communication that overlap hides"),
            out("step_serial", serial, "s", "other_ms + compute_ms + comm_ms"),
            out("step_overlapped", overlapped, "s", "other_ms + compute_ms + exposed"),
            out("speedup", serial / overlapped, "1", "step_serial / step_overlapped")};
}

Formula overlap_formula() {
    return {"overlap", "communication-computation overlap: the exposed-time test",
            "hidden when T_comm - T_overlap <= T_compute / N; step = other + compute + exposed",
            {req("comm_ms", "ms", "communication time T_comm"), req("compute_ms", "ms", "compute it can hide behind"),
             opt("gpus", "count", "N: the compute is split over N GPUs", 1),
             opt("overlap_ms", "ms", "communication already overlapped T_overlap", 0, false),
             opt("other_ms", "ms", "step time that cannot overlap (e.g. forward)", 0, false)},
            eval_overlap};
}

// Compute lost to the SMs a communication kernel occupies while it overlaps.
std::vector<Output> eval_sm_partition(const Params& p) {
    const double sms = p.at("sms"), busy = p.at("comm_sms");
    if (busy > sms) throw UsageError("--comm_sms (" + fmt(busy) + ") exceeds --sms (" + fmt(sms) + ")");
    std::vector<Output> o = {out("loss", busy / sms, "1", "comm_sms / sms: compute throughput lost while overlapping")};
    if (p.num.count("compute_ms") && p.num.count("comm_ms")) {
        const double c = p.at("compute_ms") * 1e-3, m = p.at("comm_ms") * 1e-3;
        const double slowed = c / (1 - busy / sms);
        o.push_back(out("step_overlapped", std::max(slowed, m), "s", "max(compute / (1 - loss), comm)"));
        o.push_back(out("step_serial", c + m, "s", "compute + comm"));
        o.push_back(out("gain", (c + m) / std::max(slowed, m), "1", "step_serial / step_overlapped"));
    }
    return o;
}

Formula sm_partition_formula() {
    return {"sm_partition", "compute lost to the SMs a communication kernel occupies",
            "loss = comm_sms / sms; step = max(compute / (1 - loss), comm)",
            {req("sms", "count", "SMs of the GPU"), req("comm_sms", "count", "SMs the collective occupies"),
             opt("compute_ms", "ms", "compute time alone"), opt("comm_ms", "ms", "communication time alone")},
            eval_sm_partition};
}

// Paged vs contiguous KV-cache allocation for sequences of avg_tokens.
std::vector<Output> eval_paged_kv(const Params& p) {
    const double max_t = p.at("max_tokens"), avg = p.at("avg_tokens"), page = p.at("page_tokens");
    if (avg > max_t) throw UsageError("--avg_tokens (" + fmt(avg) + ") exceeds --max_tokens (" + fmt(max_t) + ")");
    const double paged_alloc = std::ceil(avg / page) * page;
    return {out("contiguous_waste", 1 - avg / max_t, "1", "1 - avg_tokens / max_tokens: a slab per request sized for the maximum"),
            out("paged_waste", 1 - avg / paged_alloc, "1", "1 - avg / (ceil(avg / page) x page): only the last page is partly empty"),
            out("paged_waste_bound", (page - 1) / (avg + page - 1), "1", "(page - 1) / (avg + page - 1): last page holds one token"),
            out("batch_gain", max_t / paged_alloc, "1", "requests that fit in the same memory, paged / contiguous")};
}

Formula paged_kv_formula() {
    return {"paged_kv", "KV-cache waste: contiguous slabs vs pages",
            "contiguous waste = 1 - avg / max; paged waste <= (page - 1) / (avg + page - 1)",
            {req("max_tokens", "count", "tokens a contiguous slab reserves"),
             req("avg_tokens", "count", "tokens a request actually holds"),
             opt("page_tokens", "count", "tokens per page", 16)},
            eval_paged_kv};
}

// Asymmetric (min-max) quantization of one block: scale and zero point.
std::vector<Output> eval_quant_scale(const Params& p) {
    const double lo = p.at("x_min"), hi = p.at("x_max"), b = p.at("bits");
    if (hi <= lo) throw UsageError("--x_max (" + fmt(hi) + ") must exceed --x_min (" + fmt(lo) + ")");
    const double levels = std::pow(2.0, b), s = (hi - lo) / (levels - 1);
    return {out("scale", s, "1", "(x_max - x_min) / (2^bits - 1)"),
            out("zero_point", std::round(-lo / s), "1", "round(-x_min / scale): the code that stores 0.0"),
            out("levels", levels, "1", "2^bits"),
            out("max_error", s / 2, "1", "scale / 2: worst rounding error inside the block")};
}

Formula quant_scale_formula() {
    return {"quant_scale", "scale and zero point of min-max block quantization",
            "scale = (x_max - x_min) / (2^bits - 1); zero = round(-x_min / scale); error <= scale / 2",
            {any_sign_ok(req("x_min", "value", "smallest weight of the block")),
             any_sign_ok(req("x_max", "value", "largest weight")), req("bits", "count", "bits per code")},
            eval_quant_scale};
}

// The acceptance rate that gives `expected_tokens` per round (inverse of
// `speculative`), by bisection on the monotone E(alpha).
std::vector<Output> eval_spec_acceptance(const Params& p) {
    const double g = p.at("gamma"), E = p.at("expected_tokens");
    if (E < 1 || E > g + 1)
        throw UsageError("--expected_tokens (" + fmt(E) + ") out of range; valid: 1.." + fmt(g + 1) + " (gamma + 1)");
    auto tokens = [&](double a) { return a >= 1 ? g + 1 : (1 - std::pow(a, g + 1)) / (1 - a); };
    double lo = 0, hi = 1;
    for (int i = 0; i < 100; ++i) (tokens((lo + hi) / 2) < E ? lo : hi) = (lo + hi) / 2;
    return {out("alpha", (lo + hi) / 2, "1", "the per-token acceptance with (1 - a^(g+1)) / (1 - a) = expected_tokens"),
            out("accepted_drafts", E - 1, "1", "expected_tokens - 1: draft tokens kept per round"),
            out("draft_acceptance", (E - 1) / g, "1", "(expected_tokens - 1) / gamma: share of drafted tokens kept")};
}

Formula spec_acceptance_formula() {
    return {"spec_acceptance", "the acceptance rate behind an expected number of tokens per round",
            "solve (1 - a^(gamma+1)) / (1 - a) = expected_tokens for a",
            {req("gamma", "count", "draft tokens per round"), req("expected_tokens", "tokens", "tokens per target pass")},
            eval_spec_acceptance};
}

// Fleet MFU against the single-node MFU.
std::vector<Output> eval_scaling_tax(const Params& p) {
    const double local = p.at("local_mfu");
    std::vector<Output> o;
    double fleet = p.num.count("fleet_mfu") ? p.at("fleet_mfu") : 0;
    if (p.num.count("local_step_ms") && p.num.count("fleet_step_ms")) {
        const double predicted = local * p.at("local_step_ms") / p.at("fleet_step_ms");
        o.push_back(out("fleet_mfu_from_steps", predicted, "1", "local_mfu x local_step / fleet_step (same work per GPU)"));
        if (fleet == 0) fleet = predicted;
    }
    if (fleet == 0) throw UsageError("missing required parameter --fleet_mfu (or --local_step_ms and --fleet_step_ms)");
    if (fleet > local) throw UsageError("--fleet_mfu (" + fmt(fleet) + ") exceeds --local_mfu (" + fmt(local) + ")");
    o.push_back(out("tax", 1 - fleet / local, "1", "1 - fleet_mfu / local_mfu"));
    if (p.num.count("local_step_ms"))
        o.push_back(out("fleet_step", p.at("local_step_ms") * 1e-3 * local / fleet, "s", "local_step x local_mfu / fleet_mfu"));
    if (p.num.count("straggler_slowdown"))
        o.push_back(out("straggler_mfu_loss", 1 - 1 / (1 + p.at("straggler_slowdown")), "1",
                        "1 - 1 / (1 + slowdown): a synchronous step waits for the slowest node"));
    if (p.num.count("gpus") && p.num.count("mfu_gain")) {
        o.push_back(out("peak_gpu_equivalent", p.at("gpus") * p.at("mfu_gain"), "1", "gpus x mfu_gain: GPUs of peak FLOP/s"));
        o.push_back(out("useful_gpu_equivalent", p.at("gpus") * p.at("mfu_gain") / fleet, "1",
                        "gpus x mfu_gain / fleet_mfu: GPUs of useful work at the current MFU"));
    }
    return o;
}

Formula scaling_tax_formula() {
    return {"scaling_tax", "fleet MFU against single-node MFU",
            "tax = 1 - fleet_mfu / local_mfu; fleet_mfu = local_mfu x local_step / fleet_step",
            {req("local_mfu", "fraction", "MFU of one node"), opt("fleet_mfu", "fraction", "MFU of the fleet"),
             opt("local_step_ms", "ms", "step time on one node"), opt("fleet_step_ms", "ms", "step time of the fleet"),
             opt("straggler_slowdown", "fraction", "one node this much slower (0.1 = 10%)"),
             opt("gpus", "count", "GPUs of the fleet (for the GPU equivalent of an MFU gain)"),
             opt("mfu_gain", "fraction", "MFU gain in points of peak (0.01 = one point)")},
            eval_scaling_tax};
}

// Cost per 1,000 tokens of a serving replica.
std::vector<Output> eval_serving_cost(const Params& p) {
    const double gpus = p.at("gpus");
    double tps = 0;
    if (p.num.count("tokens_per_s")) tps = p.at("tokens_per_s");
    else if (p.num.count("tokens_per_s_per_gpu")) tps = p.at("tokens_per_s_per_gpu") * gpus;
    else if (p.num.count("itl_ms")) tps = p.at("batch") / (p.at("itl_ms") * 1e-3);
    else throw UsageError("missing required parameter --tokens_per_s (or --tokens_per_s_per_gpu, or --batch with --itl_ms)");
    std::vector<Output> o = {out("tokens_per_s", tps, "1", "given, tokens_per_s_per_gpu x gpus, or batch / itl"),
                             out("tokens_per_s_per_gpu", tps / gpus, "1", "tokens_per_s / gpus"),
                             out("gpu_seconds_per_1000", gpus * 1000 / tps, "s", "gpus x 1000 / tokens_per_s")};
    if (p.num.count("usd_per_gpu_hour"))
        o.push_back(out("usd_per_1000_tokens", p.at("usd_per_gpu_hour") / 3600 * gpus * 1000 / tps, "USD",
                        "usd_per_gpu_hour / 3600 x gpus x 1000 / tokens_per_s"));
    if (p.num.count("usd_per_1000_tokens"))
        o.push_back(out("implied_usd_per_gpu_hour", p.at("usd_per_1000_tokens") * tps / 1000 / gpus * 3600, "USD",
                        "the GPU-hour price that the stated cost per 1,000 tokens implies"));
    return o;
}

Formula serving_cost_formula() {
    return {"serving_cost", "cost per 1,000 tokens from GPU count, price and throughput",
            "USD per 1,000 tokens = usd_per_gpu_hour / 3600 x gpus x 1000 / tokens_per_s; tokens_per_s = batch / ITL",
            {req("gpus", "count", "GPUs of the replica"), opt("tokens_per_s", "tokens/s", "aggregate throughput"),
             opt("tokens_per_s_per_gpu", "tokens/s", "throughput per GPU"),
             opt("batch", "count", "concurrent streams (with --itl_ms)", 1), opt("itl_ms", "ms", "inter-token latency"),
             opt("usd_per_gpu_hour", "USD", "price of one GPU-hour"),
             opt("usd_per_1000_tokens", "USD", "a stated cost (gives the implied GPU-hour price)")},
            eval_serving_cost};
}

// Training compute (6 N D) and per-GPU state of mixed-precision Adam under ZeRO.
std::vector<Output> eval_training(const Params& p) {
    const double N = p.at("params"), G = p.at("gpus"), stage = p.at("zero_stage");
    if (stage > 3) throw UsageError("--zero_stage (" + fmt(stage) + ") out of range; valid: 0, 1, 2, 3");
    const double w = p.at("weight_bytes"), g = p.at("grad_bytes"), s = p.at("optimizer_bytes");
    const double ddp = N * (w + g + s);
    const double rank = N * ((stage >= 3 ? w / G : w) + (stage >= 2 ? g / G : g) + (stage >= 1 ? s / G : s));
    std::vector<Output> o = {out("state_bytes_ddp", ddp, "B", "params x (weight + grad + optimizer bytes): every rank"),
                             out("state_bytes_per_rank", rank, "B", "ZeRO stage 1 shards the optimizer, 2 + gradients, 3 + weights over gpus"),
                             out("fraction_of_ddp", rank / ddp, "1", "per rank / DDP"),
                             out("allreduce_factor", 2 * (G - 1) / G, "1", "DDP gradient allreduce: 2 (N-1)/N x gradient bytes per step")};
    if (p.num.count("tokens")) {
        const double flops = 6 * N * p.at("tokens");
        o.push_back(out("flops", flops, "FLOP", "6 x params x tokens (forward 2, backward 4)"));
        if (p.num.count("peak_tflops") && p.num.count("mfu"))
            o.push_back(out("time", flops / (G * p.at("peak_tflops") * 1e12 * p.at("mfu")), "s", "flops / (gpus x peak x mfu)"));
    }
    return o;
}

Formula training_formula() {
    return {"training", "training FLOPs (6 N D) and optimizer-state memory under ZeRO",
            "flops = 6 x params x tokens; state = params x (weight + grad + optimizer bytes), sharded by ZeRO stage",
            {req("params", "count", "parameters N"), opt("tokens", "count", "training tokens D"),
             opt("gpus", "count", "data-parallel ranks", 1), opt("zero_stage", "count", "0 (DDP), 1, 2 or 3", 0, false),
             opt("weight_bytes", "bytes", "bytes per weight (BF16 2)", 2), opt("grad_bytes", "bytes", "bytes per gradient", 2),
             opt("optimizer_bytes", "bytes", "Adam: FP32 master + m + v = 12", 12, false),
             opt("peak_tflops", "TFLOP/s", "peak per GPU (for time)"), opt("mfu", "fraction", "model FLOPs utilization (for time)")},
            eval_training};
}

// Activation memory of one transformer layer (Korthikanti et al. 2022, 16-bit
// activations): s b h (34 + 5 a s / h) bytes; FlashAttention drops the 5 a s / h
// term (scores, softmax and its dropout mask are never stored).
std::vector<Output> eval_activation(const Params& p) {
    const double s = p.at("seq"), b = p.at("batch"), h = p.at("hidden"), a = p.at("heads"), L = p.at("layers");
    const double linear = 34 * s * b * h, quad = 5 * a * s * s * b;
    return {out("per_layer", linear + quad, "B", "s b h (34 + 5 a s / h)"),
            out("per_layer_flash", linear, "B", "34 s b h: FlashAttention keeps no S x S tensor"),
            out("total", (linear + quad) * L, "B", "per_layer x layers"),
            out("total_flash", linear * L, "B", "per_layer_flash x layers"),
            out("flash_saving", (linear + quad) / linear, "1", "per_layer / per_layer_flash = 1 + 5 a s / (34 h)")};
}

Formula activation_memory_formula() {
    return {"activation_memory", "activation memory per layer, with and without FlashAttention",
            "per layer = s b h (34 + 5 a s / h) bytes (16-bit); FlashAttention: 34 s b h",
            {req("seq", "count", "sequence length s"), opt("batch", "count", "micro-batch b", 1),
             req("hidden", "count", "hidden width h"), req("heads", "count", "attention heads a"),
             opt("layers", "count", "layers", 1)},
            eval_activation};
}

// Expert capacity, the load-balancing loss and AllToAll traffic of an MoE layer.
std::vector<Output> eval_moe(const Params& p) {
    const double T = p.at("tokens"), E = p.at("experts"), k = p.at("top_k"), cf = p.at("capacity_factor");
    if (k > E) throw UsageError("--top_k (" + fmt(k) + ") exceeds --experts (" + fmt(E) + ")");
    const double cap = std::ceil(cf * T * k / E);
    const double share = p.num.count("top_expert_share") ? p.at("top_expert_share") : 1 / E;
    // Switch-style loss alpha E sum f_i P_i with f = P: one expert gets `share`, the rest split evenly.
    const double rest = E > 1 ? (1 - share) * (1 - share) / (E - 1) : 0;
    const double G = p.at("gpus"), bytes = T * k * p.at("d_model") * p.at("dtype_bytes");
    return {out("capacity", cap, "1", "ceil(capacity_factor x tokens x top_k / experts) token slots per expert"),
            out("dropped", std::max(0.0, share * T * k - cap), "1", "tokens over capacity at the busiest expert"),
            out("aux_loss", p.at("aux_alpha") * E * (share * share + rest), "1",
                "alpha x E x sum f_i P_i (= alpha when balanced, alpha x E when collapsed)"),
            out("alltoall_bytes", 2 * bytes * (G - 1) / G, "B",
                "2 (dispatch + combine) x tokens x top_k x d_model x dtype_bytes x (G-1)/G leave each GPU group"),
            out("active_fraction", k / E, "1", "top_k / experts of the expert parameters touched per token")};
}

Formula moe_formula() {
    return {"moe", "MoE expert capacity, load-balancing loss and AllToAll bytes",
            "capacity = ceil(cf T k / E); aux = alpha E sum f_i P_i; AllToAll = 2 T k d b (G-1)/G",
            {req("tokens", "count", "tokens in the batch T"), req("experts", "count", "experts E"),
             opt("top_k", "count", "experts per token k", 2), opt("capacity_factor", "x", "slots per balanced share", 1.25),
             opt("d_model", "count", "hidden width", 4096), opt("dtype_bytes", "bytes", "bytes per element", 2),
             opt("gpus", "count", "expert-parallel GPUs G", 8),
             opt("top_expert_share", "fraction", "share of routing to the busiest expert (default balanced 1/E)"),
             opt("aux_alpha", "x", "weight of the auxiliary loss", 0.01)},
            eval_moe};
}

// Two stated numbers against each other: the share one is of the other, the
// rest, and the ratio (percentages, "6x higher", "85 percent missing").
std::vector<Output> eval_share(const Params& p) {
    const double part = p.at("part"), whole = p.at("whole");
    // --dim gives the quotient and product a unit (12 / 1.98e9 Hz in "s").
    const std::string d = p.str.count("dim") ? p.str.at("dim") : "1";
    return {out("share", part / whole, d, "part / whole"), out("rest", 1 - part / whole, "1", "1 - part / whole"),
            out("ratio", whole / part, d, "whole / part"), out("difference", whole - part, d, "whole - part"),
            out("product", part * whole, d, "part x whole")};
}

Formula share_formula() {
    return {"share", "two stated numbers against each other (percentages, ratios)",
            "share = part / whole; rest = 1 - share; ratio = whole / part",
            {req("part", "value", "the smaller or the later number"), req("whole", "value", "the number it is compared with"),
             choice("dim", "unit of share, ratio and product (default 1)", {"1", "s", "B", "FLOP", "FLOP/s", "B/s", "W", "USD"})},
            eval_share};
}

std::vector<Output> eval_sum(const Params& p) {
    double t = 0;
    for (const char* k : {"a", "b", "c", "d", "e"}) t += num_or(p, k, 0);
    return {out("total", t, "1", "a + b + c + d + e")};
}

Formula sum_formula() {
    return {"sum", "the shares or terms a text adds up", "total = a + b + c + d + e",
            {any_sign_ok(req("a", "value", "first term")), any_sign_ok(req("b", "value", "second term")),
             any_sign_ok(opt("c", "value", "third term")), any_sign_ok(opt("d", "value", "fourth term")),
             any_sign_ok(opt("e", "value", "fifth term"))},
            eval_sum};
}

// A number one line of a text states again, read as the line it comes from
// defines it (factor converts units, 60 s -> 1 min). A restatement that
// changes the number is an inconsistency between the two lines.
std::vector<Output> eval_restated(const Params& p) {
    const double v = p.at("value") * p.at("factor");
    if (!p.str.count("unit")) return {out("value", v, "1", "value x factor")};
    const Unit* u = find_unit(p.str.at("unit"));
    if (!u || u->dim == "text") throw UsageError("--unit '" + p.str.at("unit") + "' is not a unit of `memwall calc`");
    return {out("value", v * u->factor, u->dim, "value x factor, in --unit")};
}

Formula restated_formula() {
    return {"restated", "a number a line states again, from the line that defines it",
            "value = value stated there x factor (unit conversion)",
            {req("value", "value", "the number as the defining line states it"),
             opt("factor", "x", "unit conversion to the restating line's unit", 1),
             choice("unit", "unit of the value (default dimensionless)", unit_names())},
            eval_restated};
}

// HBM traffic of a transformer FFN block (x @ W1, GELU, @ W2, LayerNorm), the
// unfused chain against epilogue fusion. Each kernel reads its inputs and
// writes its output once: GEMM1 T d + e d^2 + e T d, GELU 2 e T d, GEMM2
// e T d + e d^2 + T d, LayerNorm 2 T d (its weights ignored).
std::vector<Output> eval_ffn_traffic(const Params& p) {
    const double T = p.at("tokens"), d = p.at("d_model"), e = p.at("expansion"), b = p.at("dtype_bytes");
    const std::string fuse = p.str.count("fuse") ? p.str.at("fuse") : "gelu_epilogue";
    const double unfused = (2 * e * d * d + 4 * T * d + 4 * e * T * d) * b;
    double saved = 2 * e * T * d * b;  // GELU applied in GEMM1's epilogue: h is neither written nor reread
    double kernels = 3;
    if (fuse == "both_epilogues") saved += 2 * T * d * b, kernels = 2;  // LayerNorm in GEMM2's epilogue too
    return {out("unfused_bytes", unfused, "B", "(2 e d^2 + 4 T d + 4 e T d) x dtype_bytes"),
            out("fused_bytes", unfused - saved, "B", "unfused - the intermediates fusion keeps on chip"),
            out("reduction", saved / unfused, "1", "share of the unfused traffic fusion removes"),
            out("kernels_unfused", 4, "1", "GEMM, GELU, GEMM, LayerNorm"),
            out("kernels_fused", kernels, "1", "gelu_epilogue: 3; both_epilogues: 2")};
}

Formula ffn_traffic_formula() {
    return {"ffn_traffic", "HBM traffic of a transformer FFN block (GEMM, GELU, GEMM, LayerNorm), unfused vs epilogue-fused",
            "unfused = (2 e d^2 + 4 T d + 4 e T d) b; GELU in GEMM1's epilogue saves 2 e T d b; LayerNorm in GEMM2's saves 2 T d b more",
            {req("tokens", "count", "tokens T (batch x sequence)"), req("d_model", "count", "hidden width d"),
             opt("expansion", "count", "FFN width / d (e)", 4), opt("dtype_bytes", "bytes", "bytes per element", 2),
             choice("fuse", "gelu_epilogue (default) or both_epilogues", {"gelu_epilogue", "both_epilogues"})},
            eval_ffn_traffic};
}

// Bits, mantissa and largest finite value of a number format.
struct NumberFormat {
    const char* name;
    int bits, exponent, mantissa;
    double max;  // largest finite value
};
const std::vector<NumberFormat>& number_formats() {
    // IEEE-style max = (2 - 2^-m) 2^(2^(e-1) - 1); FP8 E4M3 keeps one NaN code
    // instead of infinities, so its max is 448; integers are two's complement.
    static const std::vector<NumberFormat> v = {
        {"fp32", 32, 8, 23, (2 - std::pow(2.0, -23)) * std::pow(2.0, 127)},
        {"tf32", 19, 8, 10, (2 - std::pow(2.0, -10)) * std::pow(2.0, 127)},
        {"fp16", 16, 5, 10, 65504},
        {"bf16", 16, 8, 7, (2 - std::pow(2.0, -7)) * std::pow(2.0, 127)},
        {"fp8_e4m3", 8, 4, 3, 448},
        {"fp8_e5m2", 8, 5, 2, 57344},
        {"int8", 8, 0, 0, 127},
        {"int4", 4, 0, 0, 7}};
    return v;
}

std::vector<Output> eval_number_format(const Params& p) {
    const NumberFormat* f = find_named(number_formats(), p.str.at("format"));
    if (!f) throw UsageError("missing required parameter --format");
    return {out("bits", f->bits, "bit", "bits per value (TF32 sits in a 32-bit slot)"),
            out("mantissa_bits", f->mantissa, "bit", "stored fraction bits (0 for integers)"),
            out("max", f->max, "1", "largest finite value"),
            out("range_exponent", std::floor(std::log10(f->max)), "1", "floor(log10(max)): the 10^k of the range"),
            out("min_int", f->exponent == 0 ? -std::pow(2.0, f->bits - 1) : 0, "1", "integers: -2^(bits-1)")};
}

Formula number_format_formula() {
    return {"number_format", "bits, mantissa bits and range of a number format",
            "IEEE max = (2 - 2^-m) x 2^(2^(e-1) - 1); FP8 E4M3 max 448; INTb: -2^(b-1) .. 2^(b-1) - 1",
            {choice("format", "the format", {"fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "int4"})},
            eval_number_format};
}

// ---- the kernels' own arithmetic: GELU, LayerNorm, online softmax, the
// speculative rule; utilization, inverse Amdahl, prefill ----------------------

// GELU at one x: the exact form (erf) and the tanh approximation the fusion
// lever's kernels use, and how far apart they are.
std::vector<Output> eval_gelu(const Params& p) {
    const double x = p.at("x");
    const double exact = 0.5 * x * std::erfc(-x / std::sqrt(2.0));  // = 0.5 x (1 + erf(x / sqrt 2)), without its cancellation for x << 0
    const double c = std::sqrt(2 / std::numbers::pi);
    const double approx = 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x)));
    return {out("gelu", exact, "1", "0.5 x (1 + erf(x / sqrt 2))"),
            out("gelu_tanh", approx, "1", "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"),
            out("tanh_error", approx - exact, "1", "gelu_tanh - gelu")};
}

Formula gelu_formula() {
    return {"gelu", "GELU of one value, exact and tanh-approximated",
            "gelu = 0.5 x (1 + erf(x / sqrt 2)); tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
            {any_sign_ok(req("x", "value", "the input"))},
            eval_gelu};
}

// LayerNorm of a short row (2 to 5 values), with one gamma and beta.
std::vector<Output> eval_layernorm(const Params& p) {
    std::vector<std::pair<std::string, double>> row;
    for (const char* k : {"a", "b", "c", "d", "e"})
        if (p.num.count(k)) row.emplace_back(k, p.at(k));
    const double n = double(row.size());
    double mean = 0, var = 0;
    for (auto& [k, v] : row) mean += v / n;
    for (auto& [k, v] : row) var += (v - mean) * (v - mean) / n;
    const double rstd = 1 / std::sqrt(var + p.at("eps"));
    std::vector<Output> o = {out("mean", mean, "1", "the row's mean"),
                             out("variance", var, "1", "mean of (v - mean)^2 (biased, as LayerNorm divides by n)"),
                             out("rstd", rstd, "1", "1 / sqrt(variance + eps)")};
    for (auto& [k, v] : row)
        o.push_back(out("y_" + k, (v - mean) * rstd * p.at("gamma") + p.at("beta"), "1", "(" + k + " - mean) x rstd x gamma + beta"));
    return o;
}

Formula layernorm_formula() {
    return {"layernorm", "LayerNorm of a row of up to five values",
            "y = (v - mean) / sqrt(variance + eps) x gamma + beta, variance over n (not n - 1)",
            {any_sign_ok(req("a", "value", "first value")), any_sign_ok(req("b", "value", "second value")),
             any_sign_ok(opt("c", "value", "third value")), any_sign_ok(opt("d", "value", "fourth value")),
             any_sign_ok(opt("e", "value", "fifth value")), opt("eps", "value", "added to the variance", 1e-5),
             any_sign_ok(opt("gamma", "value", "scale", 1)), any_sign_ok(opt("beta", "value", "shift", 0))},
            eval_layernorm};
}

// Two partial softmax states over disjoint parts of a row: running max m,
// sum l of exp(v - m) and (optionally) the weighted value o = sum exp(v - m)
// x value / l. Merged, they are the state of the whole row: the step of
// online softmax and FlashAttention.
std::vector<Output> eval_softmax_merge(const Params& p) {
    const double m1 = p.at("m1"), l1 = p.at("l1"), m2 = p.at("m2"), l2 = p.at("l2");
    const double m = std::max(m1, m2);
    const double w1 = l1 * std::exp(m1 - m), w2 = l2 * std::exp(m2 - m);
    std::vector<Output> o = {out("m", m, "1", "max(m1, m2)"),
                             out("l", w1 + w2, "1", "l1 e^(m1 - m) + l2 e^(m2 - m)"),
                             out("share_1", w1 / (w1 + w2), "1", "the first part's share of the row's softmax mass")};
    if (p.num.count("o1") && p.num.count("o2"))
        o.push_back(out("o", (p.at("o1") * w1 + p.at("o2") * w2) / (w1 + w2), "1",
                        "(o1 l1 e^(m1 - m) + o2 l2 e^(m2 - m)) / l"));
    return o;
}

Formula softmax_merge_formula() {
    return {"softmax_merge", "online softmax: two partial (max, sum) states merged into one",
            "m = max(m1, m2); l = l1 e^(m1 - m) + l2 e^(m2 - m); o = (o1 l1 e^(m1 - m) + o2 l2 e^(m2 - m)) / l",
            {any_sign_ok(req("m1", "value", "first part's max")), req("l1", "value", "first part's sum of exp(v - m1)"),
             any_sign_ok(req("m2", "value", "second part's max")), req("l2", "value", "second part's sum of exp(v - m2)"),
             any_sign_ok(opt("o1", "value", "first part's normalized weighted value")),
             any_sign_ok(opt("o2", "value", "second part's normalized weighted value"))},
            eval_softmax_merge};
}

// The speculative acceptance rule over a vocabulary of up to four tokens:
// token 1 drafted with probability q1, kept with min(1, p1 / q1); the
// chance any draft is kept, alpha = sum min(p_i, q_i); on a rejection the
// next token is drawn from norm(max(0, p - q)), which makes the output
// follow p exactly.
std::vector<Output> eval_spec_rule(const Params& p) {
    std::vector<double> P, Q;
    for (int i = 1; i <= 4; ++i) {
        const std::string n = std::to_string(i), pi = "p" + n, qi = "q" + n;
        if (p.num.count(pi) != p.num.count(qi)) throw UsageError("give --" + pi + " and --" + qi + " together");
        if (!p.num.count(pi)) break;
        P.push_back(p.at(pi)), Q.push_back(p.at(qi));
    }
    double sp = 0, sq = 0, alpha = 0;
    for (std::size_t i = 0; i < P.size(); ++i) sp += P[i], sq += Q[i], alpha += std::min(P[i], Q[i]);
    if (std::fabs(sp - 1) > 1e-9 || std::fabs(sq - 1) > 1e-9)
        throw UsageError(std::string("the target's p and the draft's q must each sum to 1 (p: ") + fmt(sp, 10) + ", q: " +
                         fmt(sq, 10) + ")");
    if (!(Q[0] > 0)) throw UsageError("--q1 must be > 0: the draft proposed token 1");
    std::vector<Output> o = {out("accept", std::min(1.0, P[0] / Q[0]), "1", "min(1, p1 / q1): token 1, drafted, is kept"),
                             out("alpha", alpha, "1", "sum min(p_i, q_i): a draft from q is kept (1 - total variation)")};
    for (std::size_t i = 0; i < P.size(); ++i) {
        const std::string n = std::to_string(i + 1);
        o.push_back(out("residual_" + n, alpha < 1 ? std::max(0.0, P[i] - Q[i]) / (1 - alpha) : 0, "1",
                        "max(0, p - q) / (1 - alpha): drawn after a rejection"));
    }
    return o;
}

Formula spec_rule_formula() {
    std::vector<ParamSpec> ps;
    for (int i = 1; i <= 4; ++i) {
        const std::string n = std::to_string(i);
        auto pp = zero_ok(i <= 2 ? req("p" + n, "probability", "target's probability of token " + n)
                                 : opt("p" + n, "probability", "target's probability of token " + n));
        auto qq = zero_ok(i <= 2 ? req("q" + n, "probability", "draft's probability of token " + n)
                                 : opt("q" + n, "probability", "draft's probability of token " + n));
        ps.push_back(pp), ps.push_back(qq);
    }
    return {"spec_rule", "the speculative acceptance rule over a small vocabulary (token 1 drafted)",
            "accept = min(1, p1 / q1); alpha = sum min(p_i, q_i); after a rejection draw from max(0, p - q) / (1 - alpha)",
            ps, eval_spec_rule};
}

// Model FLOPs utilization against hardware FLOPs utilization: the same
// time, the model's FLOPs or the ones executed (recomputation included).
std::vector<Output> eval_utilization(const Params& p) {
    const double model = p.at("model_flops"), t = p.at("time_s"), peak = p.at("peak_tflops") * 1e12;
    const double executed = p.num.count("executed_flops") ? p.at("executed_flops")
                                                         : model * (1 + num_or(p, "recompute_fraction", 0));
    if (executed < model) throw UsageError("--executed_flops must be at least --model_flops (recomputation adds, never removes)");
    return {out("mfu", model / (t * peak), "1", "model_flops / (time x peak)"),
            out("hfu", executed / (t * peak), "1", "executed_flops / (time x peak)"),
            out("executed_flops", executed, "FLOP", "given, or model_flops x (1 + recompute_fraction)")};
}

Formula utilization_formula() {
    return {"utilization", "MFU and HFU of one step",
            "MFU = model FLOPs / (time x peak); HFU = executed FLOPs (recomputation included) / (time x peak)",
            {req("model_flops", "FLOP", "the model's FLOPs of the step (6 N D for training)"),
             req("time_s", "s", "the step's time"), req("peak_tflops", "TFLOP/s", "the hardware's peak"),
             opt("executed_flops", "FLOP", "FLOPs the hardware ran (default: model_flops x (1 + recompute_fraction))"),
             zero_ok(opt("recompute_fraction", "fraction", "extra FLOPs of recomputation, as a share of model_flops"))},
            eval_utilization};
}

// Amdahl backwards: how fast must a part get for the whole to reach a target.
std::vector<Output> eval_inverse_amdahl(const Params& p) {
    const double f = p.at("fraction"), S = p.at("target_speedup");
    if (!(f > 0)) throw UsageError("--fraction must be > 0: a part that takes no time speeds nothing up");
    const double limit = f < 1 ? 1 / (1 - f) : INFINITY;
    // What the part must save, as a share of the old time: none left (to
    // rounding: 0.9 and 10 leave 3e-17) means no part speed will do.
    const double slack = 1 / S - (1 - f);
    if (!(slack > 1e-12 / S))
        throw UsageError("--target_speedup " + fmt(S) + " cannot be reached: with " + fmt(f) + " of the time sped up, the "
                         "whole gains at most 1 / (1 - fraction) = " + fmt(limit) + " (an infinitely fast part)");
    std::vector<Output> o = {out("part_speedup", f / slack, "1", "fraction / (1 / target - (1 - fraction))")};
    if (f < 1)  // all of the time sped up: no limit but the part's own
        o.push_back(out("limit", limit, "1", "1 / (1 - fraction): the whole's speedup with the part at zero time"));
    return o;
}

Formula inverse_amdahl_formula() {
    return {"inverse_amdahl", "the speedup a part needs for the whole to reach a target",
            "part = fraction / (1 / target - (1 - fraction)); at most 1 / (1 - fraction) overall",
            {req("fraction", "fraction", "share of the time the part takes now"),
             req("target_speedup", "x", "the whole's speedup wanted")},
            eval_inverse_amdahl};
}

// Prefill of a prompt: its matmul FLOPs (2 per parameter per token), the
// attention scores' FLOPs where the shape is given (causal: half of QK^T
// and PV), against reading the weights once; the larger time is the floor.
std::vector<Output> eval_prefill(const Params& p) {
    const double n = p.at("params"), T = p.at("tokens");
    const double matmul = 2 * n * T;
    const double attention = p.num.count("layers") && p.num.count("d_model")
                                 ? 2.0 * p.at("layers") * T * T * p.at("d_model")  // 4 L T^2 d, halved by the mask
                                 : 0;
    const double flops = matmul + attention;
    const double bytes = n * p.at("dtype_bytes");
    const auto [peak, bw] = peaks(p);
    const double tc = flops / peak, tm = bytes / bw;
    return {out("flops", flops, "FLOP", "2 x params x tokens + 2 x layers x tokens^2 x d_model (causal attention)"),
            out("attention_flops", attention, "FLOP", "2 x layers x tokens^2 x d_model (0 without --layers and --d_model)"),
            out("weight_bytes", bytes, "B", "params x dtype_bytes, read once"),
            out("compute_time", tc, "s", "flops / peak"), out("memory_time", tm, "s", "weight_bytes / bandwidth"),
            out("time", std::max(tc, tm), "s", "max(compute_time, memory_time): the roofline floor"),
            out("tokens_per_s", T / std::max(tc, tm), "1", "tokens / time"),
            text("regime", tc >= tm ? "compute-bound" : "memory-bound", "which time is the larger")};
}

Formula prefill_formula() {
    std::vector<ParamSpec> ps = {req("params", "count", "parameters"), req("tokens", "count", "prompt tokens"),
                                 opt("dtype_bytes", "bytes", "bytes per weight", 2),
                                 opt("layers", "count", "layers (with --d_model: the attention scores' FLOPs)"),
                                 opt("d_model", "count", "model width")};
    for (auto& s : peak_params()) ps.push_back(s);
    return {"prefill", "the time floor of a prompt's prefill: compute against reading the weights",
            "time = max((2 params tokens + 2 layers tokens^2 d_model) / peak, params x bytes / bandwidth)",
            ps, eval_prefill};
}

// Every formula, in the order `memwall calc --list` shows them.
std::vector<Formula> build() {
    return {ridge_formula(), roofline_formula(), gemm_intensity_formula(), elementwise_intensity_formula(),
            decode_intensity_formula(), kv_cache_formula(), block_quant_formula(), flash_attention_formula(),
            fusion_traffic_formula(), speculative_formula(), checkpoint_formula(), iron_law_formula(),
            amdahl_formula(), movement_power_formula(), collective_formula(), overlap_formula(),
            sm_partition_formula(), paged_kv_formula(), quant_scale_formula(), spec_acceptance_formula(),
            scaling_tax_formula(), serving_cost_formula(), training_formula(), activation_memory_formula(),
            moe_formula(), share_formula(), sum_formula(), restated_formula(), ffn_traffic_formula(),
            number_format_formula(), gelu_formula(), layernorm_formula(), softmax_merge_formula(),
            spec_rule_formula(), utilization_formula(), inverse_amdahl_formula(), prefill_formula()};
}

}  // namespace

const std::vector<Formula>& formulas() {
    static const std::vector<Formula> f = build();
    return f;
}

const Formula* find_formula(const std::string& name) { return find_named(formulas(), name); }

std::vector<std::string> formula_names() {
    std::vector<std::string> v;
    for (auto& f : formulas()) v.push_back(f.name);
    return v;
}

Params resolve_params(const Formula& f, const std::map<std::string, std::string>& raw) {
    Params p;
    for (auto& [k, v] : raw) {
        const ParamSpec* spec = find_named(f.params, k);
        if (!spec) {
            std::vector<std::string> names;
            for (auto& s : f.params) names.push_back(s.name);
            throw UsageError("unknown parameter '" + k + "' for " + f.name + "; valid parameters: " + join(names));
        }
        if (!spec->choices.empty() || spec->name == "gpu") {
            if (spec->name == "gpu") {
                if (!find_gpu_spec(v)) throw UsageError("unknown gpu '" + v + "'; known GPUs: " + join(spec->choices));
            } else if (std::find(spec->choices.begin(), spec->choices.end(), v) == spec->choices.end()) {
                throw UsageError("bad value '" + v + "' for --" + k + "; valid: " + join(spec->choices));
            }
            p.str[k] = v;
            continue;
        }
        // Plain decimal only: digits, one point, an exponent (std::stod alone
        // also takes hex, "inf", "nan" and leading blanks).
        static const std::regex decimal(R"([+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)");
        double x = 0;
        const bool looks = std::regex_match(v, decimal);
        if (looks) {
            try {
                x = std::stod(v);
            } catch (const std::exception&) {  // out of double's range
                x = std::numeric_limits<double>::infinity();
            }
        }
        if (!looks || !std::isfinite(x))
            throw UsageError("bad value '" + v + "' for --" + k + "; expected a decimal number (" + spec->unit +
                             "), such as 12, 0.5 or 4e9");
        if (!spec->any_sign && (spec->positive ? !(x > 0) : !(x >= 0)))
            throw UsageError("bad value '" + v + "' for --" + k + "; valid: " + (spec->positive ? "> 0" : ">= 0"));
        if (spec->unit == "count" && x != std::floor(x))
            throw UsageError("bad value '" + v + "' for --" + k + "; a count must be a whole number");
        if ((spec->unit == "fraction" || spec->unit == "probability") && x > 1)
            throw UsageError("bad value '" + v + "' for --" + k + "; a " + spec->unit + " lies in 0..1 (write 0.1 for 10%)");
        p.num[k] = x;
    }
    for (auto& s : f.params) {
        if (p.has(s.name)) continue;
        if (s.required) throw UsageError("missing required parameter --" + s.name + " (" + s.unit + ") for " + f.name);
        if (s.def) p.num[s.name] = *s.def;
    }
    return p;
}

std::vector<Output> evaluate(const Formula& f, const Params& p) {
    std::vector<Output> outs = f.eval(p);
    for (const Output& o : outs) {
        if (o.dim == "text" || std::isfinite(o.value)) continue;
        std::vector<std::string> given;
        for (auto& [k, v] : p.num) given.push_back("--" + k + " " + fmt(v));
        throw UsageError(f.name + ": " + o.name + " is not finite (" + fmt(o.value) + ") with these inputs: " +
                         join(given) + "; one of them is too large or too small for this formula");
    }
    return outs;
}

std::vector<Output> evaluate(const Formula& f, const std::map<std::string, std::string>& raw) {
    return evaluate(f, resolve_params(f, raw));
}

const Output* find_output(const std::vector<Output>& outs, const std::string& name) { return find_named(outs, name); }

// ---- units -----------------------------------------------------------------

namespace {
const std::vector<Unit>& units() {
    static const std::vector<Unit> u = {
        {"B", "B", 1},          {"KB", "B", 1e3},        {"MB", "B", 1e6},       {"GB", "B", 1e9},
        {"TB", "B", 1e12},      {"KiB", "B", 1024.0},    {"MiB", "B", 1048576.0}, {"GiB", "B", 1073741824.0},
        {"TiB", "B", 1099511627776.0},
        {"FLOP", "FLOP", 1},    {"GFLOP", "FLOP", 1e9},  {"TFLOP", "FLOP", 1e12},
        {"FLOP/B", "FLOP/B", 1},
        {"FLOP/s", "FLOP/s", 1}, {"GFLOP/s", "FLOP/s", 1e9}, {"TFLOP/s", "FLOP/s", 1e12},
        {"B/s", "B/s", 1},      {"GB/s", "B/s", 1e9},    {"TB/s", "B/s", 1e12},
        {"days", "s", 86400},
        {"min", "s", 60},        {"s", "s", 1},          {"ms", "s", 1e-3},       {"us", "s", 1e-6},      {"ns", "s", 1e-9},
        {"bits", "bit", 1},
        {"W", "W", 1},          {"kW", "W", 1e3},
        {"x", "1", 1},          {"fraction", "1", 1},    {"%", "1", 0.01},       {"tokens", "1", 1},
        {"tokens/s", "1", 1},   {"requests", "1", 1},    {"kernels", "1", 1},     {"count", "1", 1},    {"orders of magnitude", "1", 1}, {"round trips", "1", 1},
        {"USD", "USD", 1},
        {"text", "text", 1},
    };
    return u;
}
}  // namespace

const Unit* find_unit(const std::string& name) { return find_named(units(), name); }

std::vector<std::string> unit_names() {
    std::vector<std::string> v;
    for (auto& u : units()) v.push_back(u.name);
    return v;
}

std::string byte_unit_counterpart(const std::string& unit) {
    static const std::vector<std::pair<std::string, std::string>> pairs = {
        {"KB", "KiB"}, {"MB", "MiB"}, {"GB", "GiB"}, {"TB", "TiB"}};
    for (auto& [d, b] : pairs) {
        if (unit == d) return b;
        if (unit == b) return d;
    }
    return "";
}

double to_unit(double value, const std::string& dim, const std::string& unit) {
    const Unit* u = find_unit(unit);
    if (!u) throw std::invalid_argument("unknown unit '" + unit + "'");
    if (u->dim != dim) throw std::invalid_argument("cannot express a " + dim + " quantity in " + unit);
    return value / u->factor;
}

std::string fmt(double v, int sig) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*g", sig, v);
    return b;
}

std::string pretty(const Output& o) {
    if (o.dim == "text") return o.text;
    const double v = o.value;
    auto with = [&](const char* u) { return fmt(to_unit(v, o.dim, u)) + " " + u; };
    if (o.dim == "B") {
        if (v < 1e3) return fmt(v) + " B";
        const char* dec = v < 1e6 ? "KB" : v < 1e9 ? "MB" : v < 1e12 ? "GB" : "TB";
        const char* bin = v < 1048576.0 ? "KiB" : v < 1073741824.0 ? "MiB" : v < 1099511627776.0 ? "GiB" : "TiB";
        return fmt(v, 10) + " B = " + with(dec) + " = " + with(bin);
    }
    if (o.dim == "s") {
        if (v == 0) return "0 s";
        if (v < 1e-6) return with("ns");
        if (v < 1e-3) return with("us");
        if (v < 1) return with("ms");
        return with("s");
    }
    if (o.dim == "FLOP/s") return v >= 1e12 ? with("TFLOP/s") : with("GFLOP/s");
    if (o.dim == "B/s") return v >= 1e12 ? with("TB/s") : with("GB/s");
    if (o.dim == "FLOP") return v >= 1e12 ? with("TFLOP") : v >= 1e9 ? with("GFLOP") : fmt(v) + " FLOP";
    if (o.dim == "FLOP/B") return fmt(v) + " FLOP/B";
    if (o.dim == "bit") return fmt(v) + " bits";
    if (o.dim == "W") return v >= 1e3 ? with("kW") : with("W");
    return fmt(v);
}

}  // namespace mw::calc
