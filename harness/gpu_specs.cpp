// Spec-sheet ceilings of known GPUs, drawn dashed on rooflines beside the
// roofs measured on the machine at hand.
//
// All figures are dense (NVIDIA's tensor-core headlines are usually quoted
// "with sparsity", i.e. twice these), at boost clock, as NVIDIA publishes
// them; a 0 means the board has no such unit (V100: no TF32, no INT8 tensor
// cores). Where a figure is not on the data sheet the source says where it
// comes from. They are upper bounds no kernel reaches: compare measured
// numbers with measured roofs, and use these only to place them.
#include <algorithm>
#include <cctype>
#include <set>

#include "harness/ceilings.hpp"

namespace mw {

const std::vector<GpuSpec>& known_gpus() {
    // Ordered most specific first: find_gpu_spec takes the first whose match
    // words all occur, so "H100 PCIe" must precede plain "H100".
    static const std::vector<GpuSpec> gpus = {
        {"V100-SXM2-32GB", 15.7, 0, 125, 0, 900, 6,
         "NVIDIA V100 datasheet (SXM2); tensor = FP16 mixed precision; no TF32/INT8 tensor cores; "
         "L2 6 MiB from the Volta whitepaper",
         {"v100"}},
        {"A100-PCIe-80GB", 19.5, 156, 312, 624, 1935, 40,
         "NVIDIA A100 datasheet (PCIe 80GB); L2 40 MiB from the Ampere whitepaper", {"a100", "pcie"}},
        {"A100-SXM4-80GB", 19.5, 156, 312, 624, 2039, 40,
         "NVIDIA A100 datasheet (SXM4 80GB; the 40GB board has 1555 GB/s); L2 40 MiB from the Ampere "
         "whitepaper",
         {"a100"}},
        {"H100-PCIe-80GB", 51, 378, 756, 1513, 2000, 50,
         "NVIDIA H100 datasheet (PCIe; sparsity figures halved); L2 50 MiB from the Hopper whitepaper",
         {"h100", "pcie"}},
        {"H100-SXM5-80GB", 67, 494.7, 989.4, 1978.9, 3350, 50,
         "NVIDIA H100 datasheet (SXM5; sparsity figures halved); L2 50 MiB from the Hopper whitepaper",
         {"h100"}},
        {"H200-SXM-141GB", 67, 494.7, 989.4, 1978.9, 4800, 50,
         "NVIDIA H200 datasheet (SXM: 4.8 TB/s, compute as H100 SXM; sparsity figures halved); "
         "L2 50 MiB as GH100",
         {"h200"}},
        {"B200-SXM-180GB", 75, 1100, 2250, 4500, 7700, 126,
         "NVIDIA HGX B200 spec table (per GPU; sparsity figures halved; later material quotes 8 TB/s "
         "and FP32 80); L2 126 MiB not on the datasheet, from Chips and Cheese's B200 measurements",
         {"b200"}},
        {"L4", 30.3, 60, 121, 242.5, 300, 48,
         "NVIDIA L4 datasheet (sparsity figures halved); L2 48 MiB from third-party spec databases", {"l4"}},
        {"RTX-4090", 82.6, 82.6, 165.2, 660.6, 1008, 72,
         "NVIDIA Ada whitepaper (GeForce: FP16 tensor with FP32 accumulate; 330 with FP16 accumulate); "
         "L2 72 MiB",
         {"4090"}},
    };
    return gpus;
}

double spec_peak_tflops(const GpuSpec& g, const std::string& dtype) {
    if (dtype.empty() || dtype == "fp32" || dtype == "f32") return g.fp32_tflops;
    if (dtype == "tf32") return g.tf32_tflops;
    if (dtype == "fp16" || dtype == "bf16" || dtype == "f16") return g.fp16_tflops;
    return g.int8_tops;
}

namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

// "NVIDIA A100-SXM4-80GB" -> {nvidia, a100, sxm4, 80gb}: whole words, so
// that "l4" does not match "L40S".
std::set<std::string> words(const std::string& s) {
    std::set<std::string> out;
    std::string w;
    for (char c : lower(s) + " ") {
        if (std::isalnum(static_cast<unsigned char>(c))) {
            w += c;
        } else if (!w.empty()) {
            out.insert(w);
            w.clear();
        }
    }
    return out;
}

}  // namespace

const GpuSpec* find_gpu_spec(const std::string& name) {
    const std::string key = lower(name);
    if (key.empty()) return nullptr;
    const auto& gpus = known_gpus();
    for (const auto& g : gpus)
        if (lower(g.name) == key) return &g;
    const auto have = words(name);
    for (const auto& g : gpus) {
        bool all = !g.match.empty();
        for (const auto& m : g.match) all = all && have.count(m);
        if (all) return &g;
    }
    for (const auto& g : gpus)
        if (lower(g.name).find(key) != std::string::npos) return &g;
    return nullptr;
}

}  // namespace mw
