// Model files: the weights in the safetensors layout (model/safetensors.hpp),
// one F32 tensor per parameter under its layout() name ("layers.0.wq",
// shape [d_in, d_out]), the configuration in the metadata ("d_model", ...,
// "format": "memwall.model/1"). A training checkpoint adds the optimizer's
// state ("optimizer.m", "optimizer.v", flat, and metadata "optimizer.step")
// so that a run resumes bit-identically.
//
// Loading checks everything against the configuration the metadata states:
// a missing tensor, a wrong shape or dtype, an unknown tensor name, or a
// truncated file is a st::FormatError (exit status 2) naming the tensor.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/model/model_cpu.hpp"
#include "kernels/model/config.hpp"

namespace mw::model {

struct ModelFile {
    Config config;
    std::vector<float> params;
    std::optional<cpu::AdamW> optimizer;  // training checkpoints only
    std::map<std::string, std::string> info;  // other metadata (training run, corpus, ...)
};

void save_model(const std::filesystem::path& path, const ModelFile& m);
ModelFile load_model(const std::filesystem::path& path);

// The configuration stated in a file's metadata (throws st::FormatError
// naming the missing or bad field).
Config config_from_metadata(const std::map<std::string, std::string>& meta, const std::string& source);

// The committed draft model of the speculative lever
// (results/model/draft-small.safetensors: trained by `memwall train` on the
// same corpus, 26x smaller than the default model), loaded once; UsageError
// naming the command that trains it when it is missing.
const ModelFile& draft_small();

}  // namespace mw::model
