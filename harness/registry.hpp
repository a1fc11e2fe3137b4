// The op and variant registry: the vocabulary every lever is written in.
//
// An Op is a mathematical function with named shape axes; it knows its FLOPs,
// its compulsory bytes (inputs read once, outputs written once), how to make
// seeded inputs, and how to compute the fp64 oracle. A Variant is one
// implementation of an op, registered in one declaration next to its code:
//
//   MW_REGISTER_VARIANT(gemm_naive_cpu, {
//       .name = "naive", .op = "gemm", .lever = "vectorization",
//       .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
//       .rationale = "textbook i-j-k triple loop, one scalar FMA at a time",
//       .bytes = gemm_bytes_naive,
//       .prepare = gemm_cpu_adapter(&gemm_naive) });
//
// The harness discovers variants through this registry; adding a lever is a
// new folder plus registrations, never an edit to the harness.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mw {

enum class Role { reference, optimized, vendor, exercise };
enum class Backend { cpu, cuda, cuda_emu };
enum class DType { f32, f64, f16, bf16, i8, i4, i32, u8 };

std::string to_string(Role);
std::string to_string(Backend);
std::string to_string(DType);
std::optional<Backend> parse_backend(std::string_view);
std::optional<DType> parse_dtype(std::string_view);
std::vector<std::string> all_backend_names();
std::vector<std::string> all_dtype_names();
// Bytes one element of `t` occupies in memory (i4: 0.5).
double dtype_bytes(DType t);

// Named shape axes, ordered by name: {"k":1024,"m":1024,"n":1024}.
struct Shape {
    std::map<std::string, std::int64_t> axes;
    std::int64_t operator[](const std::string& axis) const;  // throws if absent
    std::string str() const;                                 // "m=1024,n=1024,k=1024"
    bool operator==(const Shape&) const = default;
};
// Prints str(): test names and failure messages show the axes, not bytes.
std::ostream& operator<<(std::ostream& os, const Shape& s);

// A host buffer, 64-byte aligned, with a dtype and an element count.
struct Buffer {
    std::string name;
    DType dtype = DType::f32;
    std::size_t count = 0;
    std::shared_ptr<std::byte[]> data;
    // Logical dimensions, outermost first ({M, N} for a matrix), so that a
    // failed check can name elements as C[3][517]. Empty = flat.
    std::vector<std::int64_t> dims;

    static Buffer make(std::string name, DType dtype, std::size_t count, std::vector<std::int64_t> dims = {});
    std::size_t size_bytes() const;
    template <class T> T* as() { return reinterpret_cast<T*>(data.get()); }
    template <class T> const T* as() const { return reinterpret_cast<const T*>(data.get()); }
    template <class T> std::span<T> span() { return {as<T>(), count}; }
    template <class T> std::span<const T> span() const { return {as<T>(), count}; }
};

// One instance of an op: its shape, dtype, seed, inputs and outputs.
struct Problem {
    Shape shape;
    DType dtype = DType::f32;
    std::uint64_t seed = 0;
    std::vector<Buffer> inputs;
    std::vector<Buffer> outputs;

    Buffer& in(const std::string& name);
    Buffer& out(const std::string& name);
    const Buffer& in(const std::string& name) const;
    const Buffer& out(const std::string& name) const;
};

// How the checker compares a candidate output with the oracle (docs/harness.md,
// "How a variant is checked"; harness/check.hpp). Filled in by the op.
//   tolerance       floating-point outputs: element-wise and Frobenius bounds
//   exact           integers, permutations, routing decisions: bit-for-bit
//   token_sequence  generated token ids (i32): exact, except that a sequence may
//                   diverge at a step where the fp64 oracle's top-2 logit margin
//                   is a near-tie; the oracle's vector for such an output is the
//                   ids followed by the per-step margins (mw::token_oracle)
//   distribution    a sampler's counts per category (or its samples, as category
//                   ids) against the oracle's probabilities: Pearson chi-square
//                   with false-failure probability `alpha`
enum class CheckMode { tolerance, exact, token_sequence, distribution };
struct CheckSpec {
    CheckMode mode = CheckMode::tolerance;
    // Outputs checked another way than `mode`, by output buffer name:
    // {{"tokens", CheckMode::token_sequence}}. Unlisted outputs use `mode`.
    std::map<std::string, CheckMode> per_output = {};
    // Length of the reduction behind one output element (K for GEMM); the
    // element-wise tolerance grows with sqrt(reduction_length).
    std::function<double(const Shape&)> reduction_length = [](const Shape&) { return 1.0; };
    // Extra multiplier on the per-dtype defaults, for ops whose conditioning is
    // known to be worse (e.g. exp in softmax). 1 = defaults.
    double tolerance_scale = 1.0;
    // Reordered math (tiled, fused, split reductions): a candidate's relative
    // Frobenius error vs the oracle must be at most this many times the naive
    // variant's in the same run. 0 = off.
    double baseline_factor = 0.0;
    // distribution: the probability that a correct sampler fails one check.
    double alpha = 1e-6;
    // distribution: how many samples the output must hold, from the shape
    // (empty: whatever it holds). A sampler that stops early, or counts that
    // were not all drawn, fail by that alone.
    std::function<double(const Shape&)> distribution_samples = {};
    // token_sequence: the magnitude of the logits, in logit units. A step is a
    // near-tie when its fp64 top-2 margin is below
    //   rtol(dtype, reduction_length) * tolerance_scale * logit_scale
    // (rtol as for the tolerance mode, dtype f32 unless the problem is wider).
    double logit_scale = 1.0;

    CheckMode mode_for(const std::string& output) const {
        auto it = per_output.find(output);
        return it == per_output.end() ? mode : it->second;
    }
};

// A unit of work for whole-workload ops (a training step, a decode loop, a
// serving trace): results then carry units/s beside GFLOP/s.
//   .unit = {"tokens", [](const mw::Shape& s) { return double(s["batch"] * s["steps"]); }}
struct Unit {
    std::string name;                               // "tokens", "steps", "requests"; empty = none
    std::function<double(const Shape&)> per_call;   // units one call of the op processes
};

struct Op {
    std::string name;   // "gemm"
    std::string lever;  // "vectorization"
    std::string summary;
    std::vector<std::string> axes;  // required shape axes, e.g. {"m","n","k"}
    Shape default_shape;            // what `memwall run` uses
    Shape quick_shape;              // what `--quick` uses
    std::vector<DType> dtypes;      // dtypes the op is defined for
    std::function<double(const Shape&)> flops;
    std::function<double(const Shape&, DType)> compulsory_bytes;
    // Optional unit of work (tokens, steps, ...); default none.
    Unit unit = {};
    // Allocates outputs and fills inputs deterministically from the seed.
    std::function<Problem(const Shape&, DType, std::uint64_t seed)> make_problem;
    // The fp64 oracle, one vector per output buffer, in order.
    std::function<std::vector<std::vector<double>>(const Problem&)> oracle;
    CheckSpec check;
    // Optional validation beyond "axes present and positive"; returns an
    // error message naming the bad value, or empty.
    std::function<std::string(const Shape&)> validate;
    // Axes that are switches rather than sizes (e.g. "causal"): 0 is allowed.
    std::vector<std::string> flag_axes;
    // The memory roof the op is judged by: false = the STREAM triad (reads and
    // writes), true = the calibrated read-only bandwidth, for ops whose traffic
    // is almost all reads (a GEMV streams W and writes a vector).
    bool read_dominated = false;
    // Inputs an exercise's contract takes in another form, prepared from a
    // problem outside any timed call, by name (a level manifest's
    // "prepared_inputs"): e.g. the weights quantized as the exercise's
    // signature reads them. The grader asks the op; it names no format.
    std::map<std::string, std::function<std::vector<Buffer>(const Problem&)>> prepared_inputs;
};

// What a variant hands the harness after preparing a problem: the timed call,
// and the glue around it that is not timed.
struct Instance {
    std::function<void()> run;           // the timed work; must be re-runnable
    std::function<void()> sync = [] {};  // wait for completion (GPU); no-op on CPU
    std::function<void()> fetch = [] {}; // bring outputs into Problem::outputs (GPU)
    // The code path prepare() chose on this machine when a variant has
    // several (e.g. "avx512_vnni (vpdpbusd)" or its AVX2 fallback); recorded
    // as the result row's `path`. Empty: one path only.
    std::string path;
    // The arithmetic that path computes in, when it depends on the path
    // (bf16 dot products by vdpbf16ps, or bf16 widened to fp32 FMAs on
    // AVX2): overrides Variant::compute for the row's compute_dtype and so
    // for its MFU, HFU and compute roof. Empty: Variant::compute.
    std::string compute;
    // GPU variants only: runs the work once on the device and returns its
    // time in seconds measured with CUDA events (flushing L2 first when
    // `cold`). Null on the CPU, where the harness times run() itself.
    std::function<double(bool cold)> device_time;
    // Memory the harness's allocation tracker cannot see, bytes: real device
    // memory (cudaMalloc on a GPU), std::aligned_alloc/malloc/mmap, a
    // library's own allocator. Everything from operator new (std::vector,
    // make_unique, ...) and Buffer::make is tracked and must not be declared.
    std::size_t workspace_bytes = 0;
    // Optional named counters of the work done (accepted tokens, cache bytes,
    // dropped tokens, latency percentiles, ...), read once after the timed
    // calls and the final checked call. Names: letters, digits, '_'.
    std::function<std::map<std::string, double>()> counters;
    // Optional named series, read with the counters: what one number cannot
    // say (a batch size over time, the ids of rejected requests). Names as
    // for counters.
    std::function<std::map<std::string, std::vector<double>>()> series;
    // Multi-process variants (MPI) only: every call is collective, so every
    // process must make the same number of timed calls. Given this process's
    // warm-up estimate of one call, returns the one every process uses (rank
    // 0's, broadcast). Null: the process decides alone.
    std::function<double(double)> agree_estimate;
};

struct Variant {
    std::string name;       // unique within (op, backend): "naive", "blocked", ...
    std::string op;
    std::string lever;
    Role role = Role::optimized;
    Backend backend = Backend::cpu;
    int rung = 0;           // position on the lever's ladder; 0 = naive
    std::string rationale;  // one sentence: what this rung changes and what it buys
    std::vector<std::string> needs;  // "avx512f", "avx2", "gpu", "sm_80", "tensor_cores", "ptx", "mpi", "gpu_per_rank",
                                     // "onednn" (the library loads: harness/onednn.hpp)
    std::vector<DType> dtypes = {DType::f32};
    // The traffic this variant incurs, bytes (null: the op's compulsory bytes).
    std::function<double(const Shape&, DType)> bytes;
    // The FLOPs this variant really executes (recomputation, padding, wasted
    // speculative work); null = the op's useful `flops`. Results report both,
    // MFU from the useful count and HFU from this one.
    std::function<double(const Shape&)> executed_flops;
    // The arithmetic the variant's FLOPs run in, when it is not the run's
    // dtype: the calibrated peak its MFU, HFU and compute roof are judged
    // against ("int8" for integer dot products such as vpdpbusd, whose
    // peak is 4x the fp32 FMA's). Empty: the run's dtype.
    std::string compute;
    // Builds the instance; may allocate device memory, pack weights, etc.
    std::function<Instance(Problem&)> prepare;
    // Shapes the op accepts that this variant's kernel cannot take (a GPU
    // kernel's shared memory or grid limit, MPI ranks against experts): a
    // message naming the axis and its limit, or empty. `memwall run` refuses
    // such a shape before anything runs (exit 2); null = every shape.
    std::function<std::string(const Shape&)> accepts;
    // Lossy variants (quantized weights): the function the variant really
    // computes, e.g. the GEMV of the dequantized weights, in fp64. When set,
    // correctness is judged against it with the standard tolerance, and the
    // error against the op's exact oracle is recorded as `error_vs_exact`
    // (information: the price of the format, not a bug).
    std::function<std::vector<std::vector<double>>(const Problem&)> contract_oracle;
    // A multiplier on the op's tolerance for this variant's check, for a
    // contract that is itself defined only up to a rounding step: an int8
    // cache's contract oracle rounds fp64 keys where the variant rounds fp32
    // ones, so a value on a rounding boundary may land one code apart.
    // Say why wherever it is not 1.
    double tolerance_scale = 1.0;
    // The name of another variant of the same op and backend whose outputs
    // this one must reproduce bit for bit on the same inputs: the same
    // arithmetic in the same order (a checkpointed training step vs the one
    // that keeps everything). Checked beside the oracle; empty = no such rule.
    std::string identical_to;
    // The memory this variant expects to hold beyond the problem's buffers,
    // by term, bytes ({"checkpoints", ...}, {"working", ...}): results record
    // the terms, their total and the measured peak_extra_bytes / total.
    std::function<std::map<std::string, double>(const Shape&)> memory_model;
    // Registered source file, for `memwall list` and error messages.
    std::string source;
};

// --- the registry -----------------------------------------------------------
void register_op(Op op);
void register_variant(Variant v);
const std::vector<Op>& ops();
const std::vector<Variant>& variants();
const Op* find_op(std::string_view name);
std::vector<std::string> lever_names();  // sorted, unique
std::vector<const Variant*> variants_of(std::string_view op, std::optional<Backend> backend = {});

// The process's rank and the number of processes when started by mpirun
// (Open MPI's or MPICH's environment), else 0 and 1. A variant that needs
// "mpi" runs only with 2 or more; under mpirun only rank 0 reports.
int launch_rank();
int launch_size();

// Whether this machine can run the variant; if not, `why` says what is missing.
bool runnable_here(const Variant& v, std::string* why = nullptr);

namespace detail {
// Takes a function that makes the Op, not the Op: the macro's aggregate is
// then built straight into register_op's argument, and GCC 12's false
// -Wmaybe-uninitialized on the destroyed temporary's std::function members
// has no temporary to point at.
struct OpRegistrar { explicit OpRegistrar(Op (*make)()) { register_op(make()); } };
struct VariantRegistrar { VariantRegistrar(Variant v, const char* file); };
}  // namespace detail

}  // namespace mw

#define MW_CONCAT_INNER(a, b) a##b
#define MW_CONCAT(a, b) MW_CONCAT_INNER(a, b)
// MW_NO_REGISTRATION: the grader's worker library (the same sources built
// for a worker program, which joins no registry) compiles every
// registration to nothing.
#ifdef MW_NO_REGISTRATION
#define MW_REGISTER_OP(id, ...) static_assert(true, "registration is off in the worker library")
#define MW_REGISTER_VARIANT(id, ...) static_assert(true, "registration is off in the worker library")
#else
#define MW_REGISTER_OP(id, ...)                                             \
    static const ::mw::detail::OpRegistrar MW_CONCAT(mw_op_registrar_, id)( \
        []() -> ::mw::Op { return ::mw::Op __VA_ARGS__; })
#define MW_REGISTER_VARIANT(id, ...) \
    static const ::mw::detail::VariantRegistrar MW_CONCAT(mw_variant_registrar_, id)(::mw::Variant __VA_ARGS__, __FILE__)
#endif
