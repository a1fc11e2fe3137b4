// The model's geometry: configuration checks, the parameter layout, FLOP
// counts, and seeded initialization (kernels/model/config.hpp). The ground
// every model kernel, rung and the model stack share.
#include "kernels/model/config.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "harness/inputs.hpp"
#include "harness/registry.hpp"

namespace mw::model {

std::string validate(const Config& c) {
    auto bad = [](const char* field, double v, const std::string& rule) {
        return std::string("model config: ") + field + " = " + std::to_string(std::int64_t(v)) + ": " + rule;
    };
    if (c.d_model <= 0) return bad("d_model", c.d_model, "must be positive");
    if (c.layers <= 0) return bad("layers", c.layers, "must be positive");
    if (c.heads <= 0) return bad("heads", c.heads, "must be positive");
    if (c.d_model % c.heads) return bad("heads", c.heads, "must divide d_model = " + std::to_string(c.d_model));
    if (c.head_dim() % 2) return bad("heads", c.heads, "d_model / heads must be even (RoPE rotates pairs)");
    if (c.kv_heads <= 0) return bad("kv_heads", c.kv_heads, "must be positive");
    if (c.heads % c.kv_heads)
        return bad("kv_heads", c.kv_heads, "must divide heads = " + std::to_string(c.heads));
    if (c.d_ff <= 0) return bad("d_ff", c.d_ff, "must be positive");
    if (c.vocab <= 1) return bad("vocab", c.vocab, "must be at least 2");
    if (c.max_seq <= 0) return bad("max_seq", c.max_seq, "must be positive");
    if (!(c.rope_base > 1)) return bad("rope_base", c.rope_base, "must be greater than 1");
    if (!(c.norm_eps > 0)) return "model config: norm_eps must be positive";
    return {};
}

void require_valid(const Config& c) {
    if (auto e = validate(c); !e.empty()) throw std::invalid_argument(e);
}

std::vector<TensorInfo> layout(const Config& c) {
    require_valid(c);
    std::vector<TensorInfo> t;
    std::size_t at = 0;
    auto add = [&](std::string name, std::vector<std::int64_t> shape) {
        std::size_t n = 1;
        for (auto s : shape) n *= std::size_t(s);
        t.push_back({std::move(name), std::move(shape), at, n});
        at += n;
    };
    const std::int64_t d = c.d_model, f = c.d_ff;
    add("embed", {c.vocab, d});
    for (int l = 0; l < c.layers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        add(p + "attn_norm", {d});
        add(p + "wq", {d, c.q_dim()});
        add(p + "wk", {d, c.kv_dim()});
        add(p + "wv", {d, c.kv_dim()});
        add(p + "wo", {c.q_dim(), d});
        add(p + "mlp_norm", {d});
        add(p + "w1", {d, f});
        add(p + "w3", {d, f});
        add(p + "w2", {f, d});
    }
    add("final_norm", {d});
    return t;
}

std::size_t param_count(const Config& c) {
    const auto t = layout(c);
    return t.back().offset + t.back().count;
}

double block_score_flops(const Config& c, std::int64_t T) {
    // Position i attends to i+1 positions.
    return 2.0 * c.heads * c.head_dim() * (double(T) * (T + 1) / 2);
}

double block_forward_flops(const Config& c, std::int64_t T) {
    const double d = c.d_model, matrices = d * (c.q_dim() + 2.0 * c.kv_dim()) + c.q_dim() * d + 3.0 * d * c.d_ff;
    return 2 * matrices * T + 2 * block_score_flops(c, T);  // scores, then the weighted sum of values
}

double forward_flops(const Config& c, std::int64_t T) {
    return c.layers * block_forward_flops(c, T) + 2.0 * c.d_model * c.vocab * T;
}

Config widened_config(const Config& c, int w) {
    if (w < 1 || w > 64) throw std::invalid_argument("widening factor " + std::to_string(w) + "; valid: 1..64");
    Config wc = c;
    wc.d_model *= w, wc.heads *= w, wc.kv_heads *= w, wc.d_ff *= w;
    require_valid(wc);
    return wc;
}

std::vector<float> init_params(const Config& c, std::uint64_t seed) {
    std::vector<float> p(param_count(c));
    for (const auto& t : layout(c)) {
        const bool norm = t.shape.size() == 1;
        const bool residual_out = t.name.ends_with(".wo") || t.name.ends_with(".w2");
        Buffer b = Buffer::make(t.name, DType::f32, t.count);
        if (norm) {
            std::fill(p.begin() + t.offset, p.begin() + t.offset + t.count, 1.0f);
            continue;
        }
        fill_normal(b, mix_seed(seed, t.name), 0.02 / (residual_out ? std::sqrt(2.0 * c.layers) : 1.0));
        std::copy(b.as<float>(), b.as<float>() + t.count, p.begin() + t.offset);
    }
    return p;
}

}  // namespace mw::model
