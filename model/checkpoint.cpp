// Model files (model/checkpoint.hpp).
#include "model/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <charconv>
#include <cstdio>

#include "harness/results.hpp"
#include "harness/runner.hpp"
#include "harness/strings.hpp"
#include "model/safetensors.hpp"

namespace mw::model {

namespace {

constexpr const char* kFormat = "memwall.model/1";

struct Field {
    const char* name;
    int Config::*member;
};
constexpr Field kIntFields[] = {{"d_model", &Config::d_model}, {"layers", &Config::layers},
                                {"heads", &Config::heads},     {"kv_heads", &Config::kv_heads},
                                {"d_ff", &Config::d_ff},       {"vocab", &Config::vocab},
                                {"max_seq", &Config::max_seq}};

}  // namespace

Config config_from_metadata(const std::map<std::string, std::string>& meta, const std::string& source) {
    auto get = [&](const std::string& key) -> const std::string& {
        auto it = meta.find(key);
        if (it == meta.end())
            throw st::FormatError(source + ": metadata field '" + key + "' missing (not a memwall model file?)");
        return it->second;
    };
    if (get("format") != kFormat)
        throw st::FormatError(source + ": metadata format '" + get("format") + "', expected '" + kFormat + "'");
    Config c;
    for (const auto& f : kIntFields) {
        const std::string& s = get(f.name);
        int v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || p != s.data() + s.size())
            throw st::FormatError(source + ": metadata field '" + f.name + "' = '" + s + "' is not an integer");
        c.*f.member = v;
    }
    try {
        c.rope_base = std::stod(get("rope_base"));
        c.norm_eps = std::stod(get("norm_eps"));
    } catch (const std::logic_error&) {
        throw st::FormatError(source + ": metadata rope_base / norm_eps not numbers");
    }
    if (auto e = validate(c); !e.empty()) throw st::FormatError(source + ": " + e);
    return c;
}

void save_model(const std::filesystem::path& path, const ModelFile& m) {
    require_valid(m.config);
    if (m.params.size() != param_count(m.config))
        throw std::invalid_argument("save_model: " + std::to_string(m.params.size()) + " parameters for a config of " +
                                    std::to_string(param_count(m.config)));
    st::File f;
    f.metadata = m.info;
    f.metadata["format"] = kFormat;
    for (const auto& fld : kIntFields) f.metadata[fld.name] = std::to_string(m.config.*fld.member);
    f.metadata["rope_base"] = fmt(m.config.rope_base, 17);
    f.metadata["norm_eps"] = fmt(m.config.norm_eps, 17);
    for (const auto& t : layout(m.config))
        f.tensors.push_back(st::make_f32(t.name, t.shape, {m.params.data() + t.offset, t.count}));
    if (m.optimizer) {
        const auto& o = *m.optimizer;
        const std::int64_t n = std::int64_t(o.m.size());
        f.tensors.push_back(st::make_f32("optimizer.m", {n}, o.m));
        f.tensors.push_back(st::make_f32("optimizer.v", {n}, o.v));
        f.metadata["optimizer.step"] = std::to_string(o.step);
        f.metadata["optimizer.weight_decay"] = fmt(o.weight_decay, 17);
    }
    st::save(path, f);
}

ModelFile load_model(const std::filesystem::path& path) {
    const st::File f = st::load(path);
    ModelFile m;
    m.config = config_from_metadata(f.metadata, f.source);
    m.params.resize(param_count(m.config));
    const auto t = layout(m.config);
    for (const auto& info : t) {
        const auto v = st::expect_f32(f, info.name, info.shape);
        for (std::size_t i = 0; i < v.size(); ++i)
            if (!std::isfinite(v[i]))
                throw st::FormatError(f.source + ": tensor '" + info.name + "' holds " + std::to_string(v[i]) +
                                      " at element " + std::to_string(i) + ": a model's weights must be finite");
        std::copy(v.begin(), v.end(), m.params.begin() + std::ptrdiff_t(info.offset));
    }
    std::size_t known = t.size();
    if (f.find("optimizer.m")) {
        const std::int64_t n = std::int64_t(m.params.size());
        cpu::AdamW o(m.config);
        const auto mm = st::expect_f32(f, "optimizer.m", {n});
        const auto vv = st::expect_f32(f, "optimizer.v", {n});
        o.m.assign(mm.begin(), mm.end());
        o.v.assign(vv.begin(), vv.end());
        auto it = f.metadata.find("optimizer.step");
        if (it == f.metadata.end()) throw st::FormatError(f.source + ": optimizer.m present but metadata optimizer.step missing");
        o.step = std::stoll(it->second);
        m.optimizer = std::move(o);
        known += 2;
    }
    if (f.tensors.size() != known)
        for (const auto& x : f.tensors) {
            bool ok = x.name == "optimizer.m" || x.name == "optimizer.v";
            for (const auto& info : t) ok = ok || info.name == x.name;
            if (!ok)
                throw st::FormatError(f.source + ": tensor '" + x.name + "' is not part of a model with this config");
        }
    for (const auto& [k, v] : f.metadata)
        if (k != "format" && !k.starts_with("optimizer.") && k != "rope_base" && k != "norm_eps" &&
            std::none_of(std::begin(kIntFields), std::end(kIntFields), [&](const Field& fl) { return k == fl.name; }))
            m.info[k] = v;
    return m;
}

const ModelFile& draft_small() {
    static const ModelFile m = [] {
        const auto p = source_root() / "results/model/draft-small.safetensors";
        if (!std::filesystem::exists(p))
            throw UsageError("draft model " + p.string() +
                             " not found: make it with `memwall train --d-model 64 --layers 2 --heads 4 --kv-heads 2 "
                             "--d-ff 192 --steps 600 --out results/model/draft-small.safetensors --name draft-small`");
        return load_model(p);
    }();
    return m;
}

}  // namespace mw::model
