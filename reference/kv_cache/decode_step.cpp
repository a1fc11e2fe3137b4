// decode_step, rung 0 (the reference): one decode step without a cache.
//
// The op: `batch` sequences, each with a prefix of ctx tokens, get their next
// token's logits — one decode step of the model at context length ctx. A
// decoder with a cache has the prefix's keys and values already; this rung
// has nothing kept, so it runs the model's forward pass over all ctx + 1
// positions (the training step's forward, kernels/model/model_cpu.hpp) and
// keeps the last row: it re-projects K and V of the whole prefix, and its
// attention is the full [ctx+1, ctx+1] causal one. Work per step grows
// linearly with ctx in the projections and quadratically in attention, where
// a cached step's grows only in attention's read of the cache
// (optimized/kv_cache/decode_step_*.cpp). Executed FLOPs are declared; the
// op's useful FLOPs are one cached step's. Like the cached rungs' Decoder,
// a step runs on the threads other processes leave free (FreeCores).
#include <algorithm>
#include <map>
#include <mutex>

#include "harness/disturbance.hpp"
#include "harness/inputs.hpp"
#include "kernels/kv_cache/attend.hpp"
#include "kernels/model/model_cpu.hpp"
#include "reference/kv_cache/generate.hpp"
#include "model/model.hpp"

namespace mw::kv_cache {

const DecodeModel& decode_model(int kv_heads, int max_pos) {
    static std::mutex mu;
    static std::map<std::pair<int, int>, std::unique_ptr<DecodeModel>> cache;
    std::lock_guard<std::mutex> lock(mu);
    auto& slot = cache[{kv_heads, max_pos}];
    if (!slot) {
        const auto& m = default_model();
        auto d = std::make_unique<DecodeModel>();
        d->config = m.config;
        d->config.max_seq = std::max(m.config.max_seq, max_pos);
        if (kv_heads == m.config.kv_heads) {
            d->params = m.params;
        } else {
            d->config.kv_heads = kv_heads;
            d->params = model::init_params(d->config, 20261125);
            d->trained = false;
        }
        slot = std::move(d);
    }
    return *slot;
}

void round_kv_int8(double* row, int kv_heads, int hd) {
    std::vector<float> x(static_cast<std::size_t>(hd));
    std::vector<std::int8_t> q(static_cast<std::size_t>(hd));
    for (int h = 0; h < kv_heads; ++h) {
        double* r = row + std::ptrdiff_t(h) * hd;
        for (int e = 0; e < hd; ++e) x[std::size_t(e)] = float(r[e]);
        const double scale = quantize_row_int8(x.data(), hd, q.data());
        for (int e = 0; e < hd; ++e) r[e] = scale * q[std::size_t(e)];
    }
}

namespace {

const DecodeModel& model_for(const Shape& s) { return decode_model(int(s["kv_heads"]), int(s["ctx"] + 1)); }

Problem make_decode_step(const Shape& s, DType, std::uint64_t seed) {
    Problem p;
    p.shape = s;
    p.seed = seed;
    const std::int64_t B = s["batch"], T = s["ctx"] + 1;
    Buffer t = Buffer::make("tokens", DType::i32, std::size_t(B * T), {B, T});
    const std::string text = kPromptText;
    // Each sequence starts at its own offset of the text (seeded), so the
    // batch's sequences differ.
    for (std::int64_t b = 0; b < B; ++b) {
        const std::size_t off = std::size_t(mix_seed(seed, "offset" + std::to_string(b)) % text.size());
        for (std::int64_t i = 0; i < T; ++i)
            t.as<std::int32_t>()[b * T + i] = (unsigned char)text[(off + std::size_t(i)) % text.size()];
    }
    p.inputs.push_back(std::move(t));
    p.outputs.push_back(Buffer::make("logits", DType::f32, std::size_t(B * model_for(s).config.vocab), {B, model_for(s).config.vocab}));
    return p;
}

// The last position's logits of every sequence, by the fp64 cached decoder
// (model/model.hpp), its cache rows passed through `round`.
std::vector<std::vector<double>> decode_oracle(const Problem& p, const std::function<void(double*, int, int)>& round) {
    const auto& dm = model_for(p.shape);
    const auto& c = dm.config;
    const std::int64_t B = p.shape["batch"], T = p.shape["ctx"] + 1;
    const std::vector<double> w(dm.params.begin(), dm.params.end());
    std::vector<double> out(std::size_t(B * c.vocab));
    const std::int32_t* tok = p.in("tokens").as<std::int32_t>();
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < B; ++b) {
        model::RefCache cache = model::ref_cache(c);
        cache.round = round;
        std::vector<double> z;
        for (std::int64_t i = 0; i < T; ++i) z = model::ref_step(c, w.data(), tok[b * T + i], cache);
        std::copy(z.begin(), z.end(), out.begin() + b * c.vocab);
    }
    return {std::move(out)};
}

std::string validate_decode_step(const Shape& s) {
    const int heads = default_model().config.heads;
    if (s["ctx"] < 1 || s["ctx"] > 32768) return "ctx = " + std::to_string(s["ctx"]) + ": valid 1..32768";
    if (s["batch"] < 1 || s["batch"] > 256) return "batch = " + std::to_string(s["batch"]) + ": valid 1..256";
    if (s["kv_heads"] < 1 || heads % s["kv_heads"])
        return "kv_heads = " + std::to_string(s["kv_heads"]) + " must divide the model's heads = " + std::to_string(heads);
    return {};
}

// Useful FLOPs of one cached step per sequence: the forward's growth from ctx
// to ctx + 1 positions (every weight once, attention over ctx + 1 positions).
double step_flops(const Shape& s) {
    const auto& c = model_for(s).config;
    return double(s["batch"]) * (model::forward_flops(c, s["ctx"] + 1) - model::forward_flops(c, s["ctx"]));
}

Instance prepare_recompute(Problem& p) {
    const auto& dm = model_for(p.shape);
    const std::int64_t B = p.shape["batch"], T = p.shape["ctx"] + 1;
    const int V = dm.config.vocab;
    auto step = std::make_shared<model::cpu::TrainStep>(dm.config, int(B), int(T));
    auto logits = std::make_shared<std::vector<float>>(std::size_t(B * T * V));
    const std::int32_t* tok = p.in("tokens").as<std::int32_t>();
    auto tokens = std::make_shared<std::vector<int>>(tok, tok + B * T);
    float* out = p.out("logits").as<float>();
    auto free = std::make_shared<FreeCores>();
    Instance inst;
    inst.run = [=, &dm] {
        const FreeThreadsScope threads(*free);  // a busy core costs its share, not a stall at every barrier
        step->forward(dm.params.data(), tokens->data(), tokens->data(), logits->data());
        for (std::int64_t b = 0; b < B; ++b)
            std::copy_n(logits->data() + ((b + 1) * T - 1) * V, V, out + b * V);
    };
    inst.counters = [free] {
        std::map<std::string, double> c;
        free->add_counter(c);
        return c;
    };
    return inst;
}

}  // namespace
}  // namespace mw::kv_cache

MW_REGISTER_OP(decode_step, {
    .name = "decode_step", .lever = "kv_cache",
    .summary = "one decode step of the trained model for `batch` sequences at context length ctx: the next token's logits",
    .axes = {"ctx", "batch", "kv_heads"},
    .default_shape = {{{"ctx", 512}, {"batch", 1}, {"kv_heads", 4}}},
    .quick_shape = {{{"ctx", 64}, {"batch", 1}, {"kv_heads", 4}}},
    .dtypes = {mw::DType::f32},
    .flops = mw::kv_cache::step_flops,
    // Every weight once, and the cache of every sequence read once.
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        const auto& dm = mw::kv_cache::decode_model(int(s["kv_heads"]), int(s["ctx"] + 1));
        const auto& c = dm.config;
        const mw::kv_cache::KvGeometry g{c.layers, c.kv_heads, c.head_dim()};
        return 4.0 * double(dm.params.size()) +
               double(s["batch"]) * double(s["ctx"]) * mw::kv_cache::bytes_per_position(g, mw::kv_cache::Elem::f32);
    },
    .unit = {"tokens", [](const mw::Shape& s) { return double(s["batch"]); }},
    .make_problem = mw::kv_cache::make_decode_step,
    .oracle = [](const mw::Problem& p) { return mw::kv_cache::decode_oracle(p, {}); },
    // The longest reduction chains behind a logit: every block's MLP and its
    // attention over the context.
    .check = {.reduction_length = [](const mw::Shape& s) {
                  const auto& c = mw::kv_cache::default_model().config;
                  return double(c.d_ff + s["ctx"]) * c.layers;
              },
              .tolerance_scale = 2.0},
    .validate = mw::kv_cache::validate_decode_step });

MW_REGISTER_VARIANT(decode_step_recompute_cpu, {
    .name = "recompute", .op = "decode_step", .lever = "kv_cache",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "no cache: the forward pass over all ctx + 1 positions, re-projecting the whole prefix's keys "
                 "and values, for the last position's logits",
    .needs = {"avx2"},
    .executed_flops = [](const mw::Shape& s) {
        const auto& c = mw::kv_cache::decode_model(int(s["kv_heads"]), int(s["ctx"] + 1)).config;
        return double(s["batch"]) * mw::model::forward_flops(c, s["ctx"] + 1);
    },
    .prepare = mw::kv_cache::prepare_recompute });

namespace mw::kv_cache {
// The int8 rung's contract oracle (optimized/kv_cache/decode_step_int8.cpp).
std::vector<std::vector<double>> decode_step_int8_oracle(const Problem& p) { return decode_oracle(p, round_kv_int8); }
}  // namespace mw::kv_cache
