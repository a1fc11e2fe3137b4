// `memwall export --hf DIR`: the model as a Hugging Face Llama, so that the
// same weights run in PyTorch / `transformers` (LlamaForCausalLM) and in any
// tool that reads that layout.
//
//   DIR/config.json        LlamaConfig: the widths, heads, key/value heads,
//                          a 256-byte vocabulary, RoPE base, RMSNorm eps,
//                          SiLU, the head tied to the embedding
//   DIR/model.safetensors  F32 tensors under the standard names
//                          (model.embed_tokens.weight, model.layers.N.
//                          self_attn.q_proj.weight, ..., model.norm.weight)
//
// Two conventions differ from ours (kernels/model/config.hpp), and the
// export converts both:
//   - a torch Linear stores its weight [d_out, d_in] (y = x W^T); ours are
//     [d_in, d_out] (y = x W): every matrix is transposed;
//   - ours rotates interleaved pairs (x[2j], x[2j+1]) of a head; Llama's
//     rotate_half rotates (x[j], x[j + hd/2]) by the same angle. Reordering
//     the output rows of q_proj and k_proj inside each head (ours 2j + h to
//     theirs h hd/2 + j) makes the two the same function: scores q.k are
//     unchanged because q and k are reordered alike, and v, o are untouched.
// The tokens are bytes: token id = byte value, no BOS/EOS added.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/command.hpp"
#include "harness/results.hpp"
#include "harness/runner.hpp"
#include "model/checkpoint.hpp"
#include "model/safetensors.hpp"

namespace mw {

namespace {

namespace fs = std::filesystem;

struct ExportOptions {
    std::string model;  // default: the committed model, found from the source tree
    std::string hf;     // output folder
    bool force = false;
};

// out[n][i] = w[i][n] of a row-major [rows, cols] matrix: torch's [d_out, d_in].
std::vector<float> transposed(const float* w, int rows, int cols) {
    std::vector<float> out(std::size_t(rows) * cols);
    for (int i = 0; i < rows; ++i)
        for (int n = 0; n < cols; ++n) out[std::size_t(n) * rows + i] = w[std::size_t(i) * cols + n];
    return out;
}

// Rows of a [heads * hd, d_in] projection reordered within each head from
// interleaved RoPE pairs to rotate_half's halves: row h hd/2 + j of a head
// is our row 2j + h.
std::vector<float> rope_halves(const std::vector<float>& w, int heads, int hd, int d_in) {
    std::vector<float> out(w.size());
    for (int head = 0; head < heads; ++head)
        for (int half = 0; half < 2; ++half)
            for (int j = 0; j < hd / 2; ++j) {
                const std::size_t to = std::size_t(head * hd + half * (hd / 2) + j) * d_in;
                const std::size_t from = std::size_t(head * hd + 2 * j + half) * d_in;
                std::copy_n(w.begin() + std::ptrdiff_t(from), d_in, out.begin() + std::ptrdiff_t(to));
            }
    return out;
}

nlohmann::json llama_config(const model::Config& c) {
    return {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"hidden_size", c.d_model},
            {"intermediate_size", c.d_ff},
            {"num_hidden_layers", c.layers},
            {"num_attention_heads", c.heads},
            {"num_key_value_heads", c.kv_heads},
            {"head_dim", c.head_dim()},
            {"vocab_size", c.vocab},
            {"max_position_embeddings", c.max_seq},
            {"rms_norm_eps", c.norm_eps},
            {"rope_theta", c.rope_base},
            {"hidden_act", "silu"},
            {"tie_word_embeddings", true},
            {"attention_bias", false},
            {"mlp_bias", false},
            {"torch_dtype", "float32"},
            {"bos_token_id", nullptr},
            {"eos_token_id", nullptr},
            {"memwall_tokens", "bytes: token id = byte value, nothing added"}};
}

st::File llama_tensors(const model::ModelFile& m) {
    const model::Config& c = m.config;
    const int d = c.d_model, hd = c.head_dim(), f = c.d_ff;
    const auto P = model::bind(c, m.params.data());
    st::File out;
    out.metadata = {{"format", "pt"}};  // what transformers expects of a torch checkpoint
    auto add = [&](const std::string& name, std::vector<std::int64_t> shape, const std::vector<float>& v) {
        out.tensors.push_back(st::make_f32(name, std::move(shape), v));
    };
    auto vec = [](const float* p, std::size_t n) { return std::vector<float>(p, p + n); };
    add("model.embed_tokens.weight", {c.vocab, d}, vec(P.embed, std::size_t(c.vocab) * d));
    for (int l = 0; l < c.layers; ++l) {
        const auto& W = P.layer[std::size_t(l)];
        const std::string at = "model.layers." + std::to_string(l) + ".";
        add(at + "input_layernorm.weight", {d}, vec(W.attn_norm, std::size_t(d)));
        add(at + "self_attn.q_proj.weight", {c.q_dim(), d}, rope_halves(transposed(W.wq, d, c.q_dim()), c.heads, hd, d));
        add(at + "self_attn.k_proj.weight", {c.kv_dim(), d},
            rope_halves(transposed(W.wk, d, c.kv_dim()), c.kv_heads, hd, d));
        add(at + "self_attn.v_proj.weight", {c.kv_dim(), d}, transposed(W.wv, d, c.kv_dim()));
        add(at + "self_attn.o_proj.weight", {d, c.q_dim()}, transposed(W.wo, c.q_dim(), d));
        add(at + "post_attention_layernorm.weight", {d}, vec(W.mlp_norm, std::size_t(d)));
        add(at + "mlp.gate_proj.weight", {f, d}, transposed(W.w1, d, f));
        add(at + "mlp.up_proj.weight", {f, d}, transposed(W.w3, d, f));
        add(at + "mlp.down_proj.weight", {d, f}, transposed(W.w2, f, d));
    }
    add("model.norm.weight", {d}, vec(P.final_norm, std::size_t(d)));
    return out;
}

int run_export(ExportOptions o) {
    if (o.model.empty()) o.model = (source_root() / "results/model/default.safetensors").string();
    check_input_file(o.model, "--model");
    if (o.hf.empty()) throw UsageError("export needs --hf DIR: the folder to write the Hugging Face model into");
    const fs::path dir = o.hf;
    if (fs::exists(dir) && !fs::is_directory(dir))
        throw UsageError("--hf '" + o.hf + "' is a file, not a folder");
    for (const char* name : {"config.json", "model.safetensors"})
        if (fs::exists(dir / name) && !o.force)
            throw UsageError("--hf '" + o.hf + "' already holds " + name + "; give --force to overwrite it");
    const model::ModelFile m = model::load_model(o.model);
    fs::create_directories(dir);
    st::save(dir / "model.safetensors", llama_tensors(m));
    write_file_atomic(dir / "config.json", llama_config(m.config).dump(2) + "\n");
    std::cout << "Hugging Face Llama (" << m.config.layers << " layers, d_model " << m.config.d_model << ", "
              << m.config.heads << " heads, " << m.config.kv_heads << " key/value heads, byte vocabulary) in "
              << dir.string() << ": config.json, model.safetensors\n";
    return 0;
}

}  // namespace

}  // namespace mw

MW_REGISTER_COMMAND(export, [](CLI::App& app) -> mw::CommandAction {
    auto* sub = app.add_subcommand("export", "Write the model in another program's format (--hf: a Hugging Face Llama)");
    auto o = std::make_shared<mw::ExportOptions>();
    sub->add_option("--hf", o->hf, "folder for config.json and model.safetensors (LlamaForCausalLM)")->required();
    sub->add_option("--model", o->model, "weights file from `memwall train` (default: the committed results/model/default.safetensors)");
    sub->add_flag("--force", o->force, "overwrite a config.json or model.safetensors already there");
    return [o] { return mw::run_export(*o); };
});
