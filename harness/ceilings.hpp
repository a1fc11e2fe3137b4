// Measured ceilings of the machine at hand (`memwall calibrate`) and the
// spec-sheet ceilings of known GPUs (drawn dashed on rooflines).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mw {

struct BandwidthPoint {
    double working_set_bytes = 0;
    double gbps = 0;
};

struct ComputePeak {
    std::string dtype;  // "fp32", "fp64", "int8", "fp16", "bf16"
    std::string isa;    // "avx512f", "avx2+fma", "avx512_vnni", "cublas", ...
    int threads = 1;
    double gflops = 0;  // GOP/s for int8
};

struct Ceilings {
    std::string source;  // "measured" or "quick"
    // DRAM triad bandwidth per thread count: dram_gbps[i] is with i+1 threads.
    std::vector<double> dram_triad_gbps;
    // DRAM read-only bandwidth (a streaming sum) per thread count, GB/s: the
    // roof of read-dominated ops (a GEMV reads W and writes one vector).
    std::vector<double> dram_read_by_threads_gbps;
    std::string dram_read_method;  // the access pattern behind the all-threads read figure
    std::string dram_pages;        // the pages the DRAM arrays sat on: "1024 of 1024 MiB on 2 MiB pages (...)"
    // Working-set sweep (one thread and all threads), read+write GB/s of an
    // in-place update a[i] += c. working_set_bytes is the total over threads.
    std::vector<BandwidthPoint> cache_sweep_1t;
    std::vector<BandwidthPoint> cache_sweep_all;
    double l1_gbps = 0, l2_gbps = 0, l3_gbps = 0;  // plateaus picked from the sweep (all threads)
    // l3_gbps is 0 when the L3 point cannot be told apart from DRAM.
    int threads = 0;                                     // max threads calibrated
    double l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;    // per-instance sizes the OS reports
    double l1_ws_bytes = 0, l2_ws_bytes = 0, l3_ws_bytes = 0;  // sweep points the plateaus come from
    std::string note;                                    // e.g. why l3_gbps is 0
    double seconds = 0;                                  // wall time of the calibration
    std::vector<ComputePeak> peaks;  // one per (dtype, threads)
    // Core clock while one thread runs, GHz, timed on a chain of dependent
    // integer adds (one cycle each on every x86 core): the cycles behind a
    // latency-bound prediction. 0 in files that predate it.
    double clock_ghz = 0;
    // GPU (only when a GPU ran the calibration)
    std::string gpu_name;
    double gpu_dram_gbps = 0, gpu_l2_gbps = 0;
    std::vector<ComputePeak> gpu_peaks;
};

// Spec-sheet numbers of known GPUs (dense, no sparsity), from vendor data sheets.
struct GpuSpec {
    std::string name;       // "A100-SXM4-80GB"
    double fp32_tflops;     // non-tensor FP32
    double tf32_tflops;     // tensor TF32 (dense)
    double fp16_tflops;     // tensor FP16/BF16 (dense)
    double int8_tops;       // tensor INT8 (dense)
    double hbm_gbps;        // memory bandwidth, GB/s
    double l2_mib;
    std::string source;     // where the figures come from
    // Words that identify the board in a CUDA device name, all of which must
    // appear ("h100" + "pcie"); see find_gpu_spec.
    std::vector<std::string> match = {};
};

const std::vector<GpuSpec>& known_gpus();
// The spec-table peak (TFLOP/s, dense) for a compute dtype: "fp32" (or
// empty), "tf32", "fp16"/"bf16" (tensor), "int8"/"fp8" (H100/H200/B200 FP8
// tensor peaks equal their INT8 ones; V100/A100 have no FP8).
double spec_peak_tflops(const GpuSpec& g, const std::string& dtype);
// The spec of a device name as CUDA reports it ("NVIDIA H100 80GB HBM3",
// "NVIDIA A100-SXM4-80GB") or as known_gpus() spells it ("h100"), matched
// without regard to case; nullptr when unknown.
const GpuSpec* find_gpu_spec(const std::string& name);

// Size in bytes of the data (or unified) cache at `level` (1, 2, 3) of cpu0,
// as the OS reports it (sysfs, else sysconf); 0 when neither knows.
double cache_bytes(int level);

// CPU calibration. `quick` shortens every measurement (for tests and smoke runs).
Ceilings calibrate_cpu(int max_threads, bool quick);
// The read-only DRAM bandwidth with `threads` threads, quick (256 MiB, best
// of 5 per access pattern, ~0.2 s): `memwall run --rounds` measures it
// between rounds, so the read roof is taken in the same minutes as the ops.
double measure_dram_read_gbps(int threads);
// The read probe `memwall run` takes beside each read-dominated variant
// (CPU; with --cold, or warm with --rounds): one pass is a read of a
// 256 MiB array (4x the L3 where that is more, up to 1 GiB) by `threads`
// threads, the access patterns in turn and then the fastest. With --cold a
// pass precedes every timed call (the eviction follows it), so the probe's
// best had the variant's chances at a fast moment of the memory, at the
// same moments: on the Zen 4 guest the memory switches between about 34
// and 65-70 GB/s from one second to the next, and a roof from fewer passes
// is beaten by luck (docs/harness.md, "Rounds").
struct ReadProbe {
    double gbps = 0;  // the best pass
    int passes = 0;   // how many were made
};
class ReadProber {
public:
    explicit ReadProber(int threads);  // throws std::runtime_error where its array does not fit
    void pass();
    ReadProbe result() const;  // of the passes since it was made or reset
    void reset();

private:
    int threads_;
    std::size_t n_;
    std::shared_ptr<float> array_;  // huge pages advised, but not among memtrack's mappings: no eviction flushes it
    std::array<double, 3> best_{};
    int passes_ = 0;
};

// vdpbf16ps's FLOP rate over the fp32 FMA's on one core (1.0: as many FLOP
// per second; 2.0: twice, one vdpbf16ps per FMA), measured once per process
// (~0.1 s) with calibrate's peak kernels; 0 on a CPU without AVX512_BF16.
// The repacked bf16 GEMV picks vdpbf16ps or widening + FMAs by it.
double bf16_dot_over_fma();

// The best measured fp32 peak (all threads) and DRAM bandwidth (all threads).
double peak_gflops(const Ceilings&, const std::string& dtype = "fp32");
double dram_gbps(const Ceilings&);
// The FMA datapath in words from fp32 FLOP per cycle per core and the vector
// width of the ISA the one-thread fp32 peak used: "1 512-bit FMA per cycle per
// core (512-bit instructions on a 256-bit-wide datapath, as on AMD Zen 4)".
std::string fma_datapath(const Ceilings&, double flops_per_cycle);
// The best read-only figure; the triad's where none was measured (older files).
double dram_read_gbps(const Ceilings&);

// JSON form of the ceilings (the `ceilings` block of a results file); the two
// round-trip.
nlohmann::json to_json(const Ceilings&);
Ceilings ceilings_from_json(const nlohmann::json&);

}  // namespace mw
