// `memwall grade <level> --submission FILE`: grade a student's exercise.
//
// Why it cannot be fooled or escaped (each item is something a submission,
// written by someone who has read this file, could otherwise exploit):
//   - the submission is compiled and run in a bubblewrap sandbox (sandbox.hpp):
//     its own PID, mount, IPC and network namespaces, a read-only /usr with
//     BLAS hidden, a private /tmp, nothing of the grader's files; as `nobody`
//     when the grader is root; with cgroup caps on processes, total memory and
//     total CPU time where the machine has them, and frozen between calls;
//   - it sees only a shared mapping holding the current call's inputs and a
//     poisoned (NaN) output area, every buffer between guard pages and
//     canaries; the oracle is computed by the grader after the call, in the
//     grader's own memory;
//   - inputs come from a seed the submission never sees (--seed for practice,
//     an instructor's secret, or a fresh random one); every correctness shape
//     is called twice with different inputs, so an answer cached from the
//     first call is wrong on the second;
//   - after every call the inputs are compared byte for byte with the
//     grader's private copy and the canaries around every buffer are checked;
//   - crashes, exceptions, endless loops and limits cost the calls they hit,
//     never the grader, and never the report: it is written after every
//     process of the submission is gone;
//   - speed: every time is taken by the grader's clock around the call (the
//     round trip's fixed cost is measured on the reference worker, which runs
//     no submission code); the reference variant runs outside the sandbox, on
//     the same inputs, interleaved round by round with the submission, best of
//     N each; every timed call gets fresh inputs and its output is compared
//     with the reference's (exactly, for exact exercises; samples with the
//     oracle's law, their number exactly), so a fast-but-wrong
//     (or cached) timed call earns nothing; the speed shape is checked against
//     the oracle before and after timing;
//   - grading oracle "reference" (bit-identity exercises): the reference
//     variant is run by the grader itself, in its own process, on a problem
//     made afresh from the same secret seed, and every output must be its
//     bits; the submission never sees that run or its results.
#include "commands/grade/grade.hpp"

#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "harness/check.hpp"
#include "harness/command.hpp"
#include "commands/grade/device_server.hpp"
#include "commands/grade/keyed_seed.hpp"
#include "commands/grade/sanitize.hpp"
#include "commands/grade/sandbox.hpp"
#include "commands/grade/timing_lock.hpp"
#include "harness/emu/remote_device.hpp"
#include "harness/replay.hpp"
#include "harness/gpu.hpp"
#include "harness/inputs.hpp"
#include "harness/memtrack.hpp"
#include "harness/registry.hpp"
#include "harness/run_queue.hpp"
#include "harness/results.hpp"
#include "harness/runner.hpp"
#include "harness/strings.hpp"

namespace mw::grade {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kCallsPerShape = 2;
constexpr double kCompileLimitS = 180;
constexpr double kSpeedBudgetS = 1.0;  // timed seconds (both sides) before stopping may start
constexpr double kSpeedMaxS = 8.0;     // timed seconds after which it stops, settled or not
constexpr double kTimedCallAlpha = 1e-9;  // a timed call's distribution check (both tails together)
constexpr int kMinRounds = 2;  // the most: the exercise's max_rounds (30 unless it says)
constexpr double kTimingLockWaitS = 300;  // the longest a grade waits for other grades (compile and run, in all)
constexpr int kBurst = 3;  // calls per side and round

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// --- what to grade ------------------------------------------------------------

struct Seed {
    std::uint64_t value = 0;  // public and random seeds: the number the report prints
    std::string kind;         // "public" (--seed), "secret", "random"
    std::string key;          // every call's seed is keyed_seed(key, domain + ...)
    // What one grade's calls are told apart by: the level and exercise, and
    // for a secret key a nonce of the grade's own. The same secret grades
    // every submission of a course: a call's seed, which a submission may
    // work back from its inputs, must tell it nothing about the calls of any
    // other grade (its resubmission's, or another level's).
    std::string domain;
};

// 16 bytes from the kernel's random source, as hex: a grade's nonce.
std::string fresh_nonce() {
    std::random_device rd;
    std::string out;
    for (int i = 0; i < 4; ++i) out += fmt("%08x", static_cast<unsigned>(rd()));
    return out;
}

// An instructor's secret: a number or any passphrase, whitespace ignored.
Seed secret_seed(const std::string& text) {
    std::string t = text;
    t.erase(std::remove_if(t.begin(), t.end(), [](unsigned char c) { return std::isspace(c); }), t.end());
    if (t.empty()) throw UsageError("the secret seed is empty");
    return {0, "secret", t};
}

Seed resolve_seed(const GradeOptions& o) {
    if (!o.seed_text.empty() && !o.secret_seed_file.empty())
        throw UsageError("give either --seed (practice) or --secret-seed-file (instructor), not both");
    if (!o.seed_text.empty()) {
        if (o.seed_text.find_first_not_of("0123456789") != std::string::npos || o.seed_text.size() >= 20)
            throw UsageError("--seed '" + o.seed_text + "' must be a non-negative integer");
        return {std::stoull(o.seed_text), "public", o.seed_text};
    }
    if (!o.secret_seed_file.empty()) {
        std::ifstream in(o.secret_seed_file);
        if (!in) throw UsageError("cannot read --secret-seed-file '" + o.secret_seed_file + "'");
        std::stringstream ss;
        ss << in.rdbuf();
        return secret_seed(ss.str());
    }
    if (const char* env = std::getenv("MEMWALL_GRADE_SECRET"); env && *env) return secret_seed(env);
    const std::uint64_t r = std::uint64_t(std::random_device{}()) << 32 ^ std::random_device{}();
    return {r, "random", std::to_string(r)};
}

const Exercise& pick_exercise(const std::vector<Exercise>& all, const GradeOptions& o) {
    std::vector<std::string> ids;
    for (auto& x : all) ids.push_back(x.id);
    if (!o.exercise.empty()) {
        for (auto& x : all)
            if (x.id == o.exercise) return x;
        throw UsageError("unknown exercise '" + o.exercise + "' in level " + all[0].level_id +
                         "; valid exercises: " + join(ids));
    }
    // Without --exercise: the backend says which, else the file's extension.
    std::string family = o.backend.empty() ? "" : (o.backend == "cpu" ? "cpu" : "cuda");
    if (family.empty()) family = fs::path(o.submission).extension() == ".cu" ? "cuda" : "cpu";
    for (auto& x : all)
        if (x.backend == family) return x;
    if (all.size() == 1) return all[0];
    throw UsageError("cannot tell which exercise '" + o.submission + "' is for; pass --exercise (" + join(ids) + ")");
}

Backend pick_backend(const Exercise& x, const GradeOptions& o) {
    const std::vector<std::string> valid = x.backend == "cpu" ? std::vector<std::string>{"cpu"}
                                                               : std::vector<std::string>{"cuda", "cuda-emu"};
    if (o.backend.empty()) {
        if (x.backend == "cpu") return Backend::cpu;
        return gpu_count() > 0 && cuda_backend_built() ? Backend::cuda : Backend::cuda_emu;
    }
    if (std::find(valid.begin(), valid.end(), o.backend) == valid.end())
        throw UsageError("unknown backend '" + o.backend + "' for exercise " + x.id +
                         "; valid backends: " + join(valid));
    const Backend b = *parse_backend(o.backend);
    if (b == Backend::cuda && !(gpu_count() > 0 && cuda_backend_built()))
        throw UsageError("--backend cuda needs a GPU and a CUDA build (" + gpu_absent_reason() +
                         "); use --backend cuda-emu to grade correctness on the CPU");
    return b;
}

const Variant& find_reference(const Exercise& x, Backend b) {
    for (auto* v : variants_of(x.op, b))
        if (v->name == x.reference_variant) return *v;
    throw std::runtime_error("level " + x.level_id + ": reference variant '" + x.reference_variant + "' of op " +
                             x.op + " is not registered for backend " + to_string(b));
}

// --- building the worker ------------------------------------------------------

struct Build {
    bool ok = false;
    std::string command, log;
    double seconds = 0;
    fs::path exe;
    json lock;  // the grading lock, held shared while compiling (lock_report)
    double lock_waited_s = 0;
};

// The report's account of the host's grading lock (timing_lock.hpp):
// {held, waited_s, mode, why_not}.
json lock_report(const TimingLock& l) {
    json r = {{"held", l.held()},
              {"waited_s", std::round(l.waited_s() * 10) / 10},
              {"mode", l.mode() == TimingLock::Mode::times ? "exclusive" : "shared"}};
    if (!l.held()) r["why_not"] = l.why_not();
    return r;
}

fs::path find_program(const std::string& name, const std::vector<fs::path>& extra = {}) {
    std::vector<fs::path> dirs = extra;
    if (const char* path = std::getenv("PATH")) {
        std::stringstream ss(path);
        for (std::string d; std::getline(ss, d, ':');) dirs.push_back(d);
    }
    for (auto& d : dirs)
        if (access((d / name).c_str(), X_OK) == 0) return d / name;
    throw std::runtime_error("'" + name + "' not found on PATH; the grader compiles submissions with it");
}

}  // namespace

// The emulator's static library, from the build tree memwall runs from.
fs::path emu_library() {
    if (const char* env = std::getenv("MEMWALL_EMU_LIB"); env && *env) return env;
#ifdef MEMWALL_EMU_LIB
    return MEMWALL_EMU_LIB;
#else
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    for (fs::path d = exe.parent_path(); !ec && !d.empty() && d != d.root_path(); d = d.parent_path())
        if (fs::exists(d / "harness/emu/libmemwall_emu.a")) return d / "harness/emu/libmemwall_emu.a";
    throw std::runtime_error("cannot find libmemwall_emu.a in memwall's build tree; set MEMWALL_EMU_LIB");
#endif
}

// The worker library a CPU worker links, from the build tree memwall runs
// from (CMakeLists.txt, "The grader's worker libraries"; or beside memwall
// itself, as in a student's handout): the level's own
// (what its adapter calls, never the graded op's rungs) when it has one;
// with --reference-solution, the one with every level's solution sources
// (the rungs the solutions build on). Empty: none.
fs::path worker_library(const Exercise& x, bool reference_solution) {
    const std::string name =
        reference_solution ? "libmemwall_worker_solutions.a" : "libmemwall_worker_" + x.level_id + ".a";
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    for (fs::path d = exe.parent_path(); !ec && !d.empty() && d != d.root_path(); d = d.parent_path()) {
        if (fs::exists(d / name)) return d / name;
        if (fs::exists(d / "CMakeCache.txt")) break;
    }
    if (reference_solution || fs::exists(source_dir() / "levels" / x.level_id / "exercise" / "worker_sources.txt"))
        throw std::runtime_error("cannot find " + name + " in memwall's build tree (build it: cmake --build)");
    return {};
}

namespace {

bool built_with_asan() {
#if defined(__SANITIZE_ADDRESS__)
    return true;
#else
    return false;
#endif
}

// The emulator's block workers under grading: all the cores, but few enough
// that a launch's process and its threads stay well inside the worker's task
// cap (max_tasks, 64) on a many-core machine.
constexpr int kEmulatorThreads = 16;

std::vector<std::string> child_env(int threads) {
    return {"PATH=/usr/local/cuda/bin:/usr/bin:/bin", "LANG=C", "HOME=/tmp", "TMPDIR=/tmp",
            "OMP_NUM_THREADS=" + std::to_string(threads), "MEMWALL_EMU_WORKERS=" + std::to_string(threads)};
}

std::vector<std::string> compile_command(const Exercise& x, Backend b, const fs::path& src, const fs::path& exe,
                                         const fs::path& library) {
    const std::string inc = source_dir().string();
    if (b == Backend::cpu) {
        // Default -O3 -march=native: students may use any ISA this machine
        // has; the reference variants pick theirs with target attributes at
        // run time. An exercise may name its own (grading.cxx_flags).
        std::vector<std::string> cmd = {find_program("g++").string(), "-std=c++20"};
        if (built_with_asan()) cmd.push_back("-fsanitize=address");  // the worker library is built so
        cmd.insert(cmd.end(), x.cxx_flags.begin(), x.cxx_flags.end());
        for (const char* a : {"-fopenmp", "-Wall", "-I"}) cmd.push_back(a);
        for (const std::string& a : {inc, x.adapter.string(), std::string("-x"), std::string("c++"), src.string()})
            cmd.push_back(a);
        // The worker library whole, not member by member: a submission that
        // defines one of its functions itself (the loops that call the
        // student's code, say) is then a second definition — a link error —
        // rather than linked in its place.
        if (!library.empty())
            for (const std::string& a : {std::string("-x"), std::string("none"), std::string("-Wl,--whole-archive"),
                                         library.string(), std::string("-Wl,--no-whole-archive"),
                                         std::string("-Wl,--gc-sections")})
                cmd.push_back(a);
        for (const std::string& a : {std::string("-o"), exe.string()}) cmd.push_back(a);
        return cmd;
    }
    if (b == Backend::cuda)
        // --gc-sections: nvcc emits unused internal functions too, and a
        // solution that #includes a rung's .cu would otherwise pull in
        // references to the harness it is not linked with.
        return {find_program("nvcc", {"/usr/local/cuda/bin"}).string(), "-std=c++20", "-O3", "-arch=native",
                "-Xcompiler", "-ffunction-sections", "-Xlinker", "--gc-sections", "-I", inc,
                x.adapter.string(), src.string(), "-o", exe.string()};
    std::vector<std::string> cmd = {find_program("g++").string(), "-std=c++20", "-O2", "-DMEMWALL_EMU=1",
                                    "-Wall", "-Wno-unknown-pragmas", "-I", inc, "-x", "c++",
                                    x.adapter.string(), src.string(), "-x", "none", emu_library().string(),
                                    "-lboost_context", "-pthread", "-ldl", "-o", exe.string()};
    if (built_with_asan()) cmd.insert(cmd.begin() + 1, "-fsanitize=address");
    return cmd;
}

// The compiler's first lines, with the temp dir's name for the submission
// replaced by the file the student gave.
std::string first_lines(std::string log, const std::string& tmp_name, const std::string& shown, int lines) {
    for (std::size_t at; (at = log.find(tmp_name)) != std::string::npos;) log.replace(at, tmp_name.size(), shown);
    std::string out;
    std::stringstream ss(log);
    int n = 0;
    for (std::string line; std::getline(ss, line) && n < lines; ++n) out += line + "\n";
    if (n == lines) out += "... (more errors cut)\n";
    return out;
}

}  // namespace

// What the compiler sees of the project: the files the exercise's adapter
// and stubs include, transitively (quoted includes, resolved against the
// source root, then beside the including file), and nothing else: not the
// lever's rungs, which a submission could otherwise #include whole and call
// (the instructor's --reference-solution adds the solution's own includes).
std::set<fs::path> include_closure(std::vector<fs::path> todo) {
    const fs::path root = fs::weakly_canonical(source_dir());
    std::set<fs::path> seen;
    auto under_root = [&](const fs::path& p) {
        const auto rel = p.lexically_relative(root);
        return !rel.empty() && *rel.begin() != "..";
    };
    while (!todo.empty()) {
        const fs::path f = fs::weakly_canonical(todo.back());
        todo.pop_back();
        if (!under_root(f) || !fs::is_regular_file(f) || !seen.insert(f).second) continue;
        std::ifstream in(f);
        for (std::string line; std::getline(in, line);) {
            std::size_t i = line.find_first_not_of(" \t");
            if (i == std::string::npos || line[i] != '#') continue;
            i = line.find_first_not_of(" \t", i + 1);
            if (i == std::string::npos || line.compare(i, 7, "include") != 0) continue;
            const std::size_t open = line.find('"', i + 7), close = open == std::string::npos ? open : line.find('"', open + 1);
            if (close == std::string::npos) continue;
            const std::string name = line.substr(open + 1, close - open - 1);
            for (const fs::path& c : {root / name, f.parent_path() / name})
                if (fs::is_regular_file(c)) {
                    todo.push_back(c);
                    break;
                }
        }
    }
    return seen;
}

std::set<fs::path> compiler_view(const Exercise& x, const fs::path& submission, bool reference_solution) {
    std::vector<fs::path> roots = {x.adapter};
    for (auto& e : fs::directory_iterator(x.level_dir / "exercise"))
        if (e.is_regular_file()) roots.push_back(e.path());  // the stubs (and the adapters)
    if (reference_solution) roots.push_back(submission);
    return include_closure(roots);
}

namespace {

Build build_submission(const Sandbox& sb, const Exercise& x, Backend b, const fs::path& submission,
                       const fs::path& tmp, bool reference_solution) {
    Build r;
    // A copy in the compiler's writable folder, with the extension its
    // language needs; the compiler sees the project's sources read-only and
    // nothing else of the grader's.
    const fs::path dir = tmp / "build";
    const fs::path src = dir / (b == Backend::cpu ? "submission.cpp" : "submission.cu");
    fs::copy_file(submission, src, fs::copy_options::overwrite_existing);
    fs::permissions(src, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                             fs::perms::others_read);
    r.exe = dir / "worker";
    ChildSpec spec;
    spec.seccomp = SeccompRole::base;
    const fs::path library = b == Backend::cpu ? worker_library(x, reference_solution) : fs::path();
    spec.argv = compile_command(x, b, src, r.exe, library);
    for (auto& a : spec.argv) r.command += (r.command.empty() ? "" : " ") + a;
    spec.env = child_env(1);
    for (const fs::path& f : compiler_view(x, submission, reference_solution))
        spec.ro_binds.push_back(f.string());
    if (b == Backend::cuda_emu) spec.ro_binds.push_back(emu_library());
    if (!library.empty()) spec.ro_binds.push_back(library.string());
    spec.rw_binds = {dir.string()};
    spec.chdir = dir.string();
    // Files up to 256 MiB: an honest constant table makes a large object
    // file (the worker's own output stays capped at its 4 MiB). The log's
    // memory file is bounded by the same limit, and only its tail is read.
    spec.limits = {.wall_s = kCompileLimitS, .memory_mb = built_with_asan() ? 0u : 8192u, .log_mb = 256,
                   .max_tasks = 64, .cpu_s = 2 * kCompileLimitS};
    const Log log;
    // Kept off another grade's timed calls (timing_lock.hpp): the compiler
    // would take the core they are timed on.
    TimingLock keep_off(timing_lock_wait_s(kTimingLockWaitS), TimingLock::Mode::keeps_off);
    r.lock = lock_report(keep_off);
    r.lock_waited_s = keep_off.waited_s();
    const double t0 = now_s();
    const Exit e = run_to_completion(sb, spec, log);
    r.seconds = now_s() - t0;
    r.ok = !e.timed_out && !e.cpu_exceeded && e.signal == 0 && e.exit_code == 0 &&
           fs::is_regular_file(fs::symlink_status(r.exe));
    r.log = first_lines(log.tail(1 << 20), src.string(), submission.filename().string(), r.ok ? 10 : 30);
    if (!r.ok && e.exit_code != 1) r.log += "compiler " + e.describe(kCompileLimitS, spec.limits) + "\n";
    return r;
}

// --- running calls in the worker ----------------------------------------------

struct Session {
    const Sandbox* sandbox = nullptr;
    ChildSpec spec;  // the worker program, its binds and limits
    SharedMemory shm;
    Worker worker;
    double budget_left = 0;  // seconds of call time left to the submission
    int starts = 0;
    bool left_behind = false;  // a stopped worker left a process behind
    // cuda-emu: the emulated device memory, held here (DeviceServer), and
    // where each buffer of the call was staged in it.
    std::unique_ptr<DeviceServer> device;
    std::uint64_t device_at[kMaxBuffers] = {};

    Session() = default;
    Session(Session&& o) noexcept
        : sandbox(o.sandbox), spec(std::move(o.spec)), shm(std::exchange(o.shm, {})),
          worker(std::exchange(o.worker, {})), budget_left(o.budget_left), starts(o.starts),
          left_behind(o.left_behind), device(std::move(o.device)) {
        std::copy(std::begin(o.device_at), std::end(o.device_at), device_at);
    }
    Session& operator=(Session&&) = delete;
    // A session a throwing grade leaves behind still stops its worker and
    // unmaps its memory (the guard would clean up only when the grader ends).
    ~Session() {
        if (worker.pid >= 0) stop_worker(worker);
        release(shm);
    }
};

struct Outcome {
    bool ok = false;
    std::string message;
    double wall_s = 0, device_s = -1;
    double waited_s = 0;  // the reference worker's run-queue wait in its timed run() ("timing": "call")
};

// One call's buffers: the op's problem, and the inputs the grader prepared
// for the exercise (staged after the outputs; checked unchanged like inputs).
struct CallData {
    Problem p;
    std::vector<Buffer> extras;
    // The submission's side of an op with a replay (harness/replay.hpp): its
    // last output is the worker's record, from which the grader rebuilds
    // the op's outputs after the call.
    const Replay* replay = nullptr;
    // The submission's side: empty stand-ins, staged in place of the op's
    // inputs the exercise withholds (grading "withheld_inputs": the
    // submission gets their prepared form instead); the grader keeps the
    // inputs themselves for the oracle and the reference.
    std::vector<Buffer> stand_ins;
    // The reference's side (its worker runs no submission code): its inputs
    // are not compared after the call. A write into them would change only
    // its own copy, in its own mapping, never the grader's.
    bool trusted = false;
};

std::size_t layout_bytes(const std::vector<const Buffer*>& all) {
    std::size_t n = kHeaderBytes + kPage;  // header, first guard page
    for (auto* b : all) n += area_bytes(b->size_bytes()) + kPage;
    return n;
}

std::vector<const Buffer*> buffers_of(const CallData& c) {
    std::vector<const Buffer*> all;
    for (auto& b : c.p.inputs) {
        const auto in = std::find_if(c.stand_ins.begin(), c.stand_ins.end(), [&](const Buffer& s) { return s.name == b.name; });
        all.push_back(in == c.stand_ins.end() ? &b : &*in);
    }
    for (auto* list : {&c.p.outputs, &c.extras})
        for (auto& b : *list) all.push_back(&b);
    return all;
}

// The op's inputs the exercise withholds from the submission ("withheld_inputs"),
// each checked to be one of the op's inputs.
std::vector<Buffer> stand_ins_for(const Exercise& x, const Problem& p) {
    std::vector<Buffer> out;
    for (const std::string& name : x.withheld_inputs) {
        const auto it = std::find_if(p.inputs.begin(), p.inputs.end(), [&](const Buffer& b) { return b.name == name; });
        if (it == p.inputs.end()) {
            std::string valid;
            for (auto& b : p.inputs) valid += (valid.empty() ? "" : ", ") + b.name;
            throw std::runtime_error("level " + x.level_id + ": exercise " + x.id + " withholds input '" + name +
                                     "', which op " + x.op + " does not have; valid: " + valid);
        }
        out.push_back(Buffer::make(it->name, it->dtype, 0));
    }
    return out;
}

// Inputs the grader prepares for an exercise ("prepared_inputs" in the level
// manifest), so that the worker does no work of its own outside the timed call.
std::vector<Buffer> prepare_extras(const Exercise& x, const Op& op, const Problem& p) {
    if (x.prepared_inputs.empty()) return {};
    const auto it = op.prepared_inputs.find(x.prepared_inputs);
    if (it != op.prepared_inputs.end()) return it->second(p);
    std::string valid;
    for (auto& [name, fn] : op.prepared_inputs) valid += (valid.empty() ? "" : ", ") + name;
    throw std::runtime_error("level " + x.level_id + ": exercise " + x.id + " asks for prepared inputs '" +
                             x.prepared_inputs + "' of op " + op.name + "; valid: " +
                             (valid.empty() ? "none (the op prepares no inputs)" : valid));
}

// grading.withheld_inputs checked before anything is compiled, against the
// inputs of the op's problem at the exercise's first correctness shape: a
// usage error naming the op's inputs.
void check_withheld(const Exercise& x) {
    const Op* op = x.withheld_inputs.empty() ? nullptr : find_op(x.op);
    if (!op || x.correctness_shapes.empty()) return;  // nothing withheld, or grade() says what is wrong
    const Shape shape = parse_shape(x.correctness_shapes.front(), op->default_shape, op->axes, op->flag_axes);
    try {
        stand_ins_for(x, op->make_problem(shape, op->dtypes.at(0), 0));
    } catch (const std::runtime_error& e) {
        throw UsageError(e.what());
    }
}

// `submission`: the call goes to the submission's worker (which records its
// answers where the op has a replay, and gets the prepared inputs in place
// of the withheld ones), not the reference's (see reference_twin).
CallData make_call(const Exercise& x, const Op& op, const Shape& shape, std::uint64_t seed, bool submission = true) {
    CallData c{op.make_problem(shape, op.dtypes.at(0), seed), {}};
    if (!submission) {
        c.trusted = true;
        return c;
    }
    c.extras = prepare_extras(x, op, c.p);
    c.stand_ins = stand_ins_for(x, c.p);
    if ((c.replay = find_replay(op.name)))
        c.p.outputs.push_back(Buffer::make("record", DType::i32, c.replay->record_values(shape)));
    return c;
}

// The burst of calls a speed round makes, made side by side on the grader's
// cores: a call's inputs at the speed shape can take a quarter of a second
// to make on one core (level 04: 256 MiB of fp32 weights and their INT4
// quantization), every call anew. Each maker is a thread of its own that
// runs its OpenMP regions on itself alone and then ends, so that no thread
// of the grader is left spinning into a timed call.
std::vector<CallData> make_calls(const Exercise& x, const Op& op, const Shape& shape,
                                 const std::vector<std::uint64_t>& seeds) {
    std::vector<CallData> made(seeds.size());
    std::vector<std::exception_ptr> failed(seeds.size());
    std::vector<std::thread> makers;
    for (std::size_t i = 0; i < seeds.size(); ++i)
        makers.emplace_back([&, i] {
            try {
                omp_set_num_threads(1);
                made[i] = make_call(x, op, shape, seeds[i]);
            } catch (...) {
                failed[i] = std::current_exception();
            }
        });
    for (auto& t : makers) t.join();
    for (auto& f : failed)
        if (f) std::rethrow_exception(f);
    return made;
}

// The reference's side of a timed call: the submission's call's inputs
// (shared, not copied: the grader only reads them), every one of them,
// outputs of its own, no record, no prepared inputs (the reference worker
// prepares its variant's own from the inputs, as `memwall run` does). The
// same as make_call(submission = false) with the same seed, for one
// problem's making instead of two.
CallData reference_twin(const CallData& c) {
    CallData r{c.p, {}, nullptr};
    r.trusted = true;
    r.p.outputs.clear();
    const std::size_t n_out = c.p.outputs.size() - (c.replay ? 1 : 0);
    for (std::size_t k = 0; k < n_out; ++k) {
        const Buffer& b = c.p.outputs[k];
        r.p.outputs.push_back(Buffer::make(b.name, b.dtype, b.count, b.dims));
    }
    return r;
}

// The op's outputs rebuilt from the worker's record by the grader's own loops
// (harness/replay.hpp); the record then leaves the outputs.
void replay_outputs(CallData& c) {
    if (!c.replay) return;
    Buffer record = std::move(c.p.outputs.back());
    c.p.outputs.pop_back();
    c.replay->rebuild(c.p, record.as<std::int32_t>(), record.count);
}

// Under cuda-emu: the call's buffers into the emulated device memory the
// grader holds (inputs and extras as they are, outputs poisoned with 0xFF
// bytes, NaN), each at an address the header passes to the adapter; fresh
// allocations every call (the last call's freed, if the submission has not
// freed them itself). "" or why the device cannot take them.
std::string stage_on_device(Session& s, const CallData& c, SharedHeader& h) {
    const auto all = buffers_of(c);
    const std::size_t n_in = c.p.inputs.size(), n_out = c.p.outputs.size();
    for (std::size_t i = 0; i < all.size(); ++i) {
        const std::size_t bytes = all[i]->size_bytes();
        if (s.device_at[i]) s.device->free(s.device_at[i]);
        s.device_at[i] = s.device->alloc(bytes);
        if (!s.device_at[i])
            return "the emulated device memory cannot hold the call's buffers: the submission's own allocations "
                   "fill it (at most " + std::to_string(s.spec.limits.memory_mb) + " MiB)";
        const bool is_output = i >= n_in && i < n_in + n_out;
        if (is_output) s.device->fill(s.device_at[i], 0xFF, bytes);
        else s.device->write(s.device_at[i], all[i]->data.get(), bytes);
        h.device[i] = s.device_at[i];
    }
    return {};
}

// Header, inputs, poisoned outputs, extras and canaries into the shared
// mapping (and under cuda-emu the emulated device memory). "" or why the
// call cannot be staged.
std::string stage(Session& s, CallData& c) {
    Problem& p = c.p;
    SharedHeader& h = s.shm.header();
    h = SharedHeader{};
    h.n_inputs = static_cast<std::uint32_t>(p.inputs.size());
    h.n_outputs = static_cast<std::uint32_t>(p.outputs.size());
    h.n_extras = static_cast<std::uint32_t>(c.extras.size());
    const auto all = buffers_of(c);
    if (all.size() > static_cast<std::size_t>(kMaxBuffers)) throw std::runtime_error("too many buffers for one call");
    h.mapped_bytes = layout_bytes(all);
    if (h.mapped_bytes > s.shm.size) throw std::runtime_error("the shared mapping is too small for this call");
    std::memset(s.shm.base + kHeaderBytes, kCanary, kPage);
    std::size_t area = kHeaderBytes + kPage;
    for (auto& b : p.outputs) poison(b);  // NaN: whatever the call leaves unwritten fails the check
    for (std::size_t i = 0; i < all.size(); ++i) {
        const std::size_t bytes = all[i]->size_bytes(), span = area_bytes(bytes);
        const std::size_t start = buffer_start(area, bytes), end = area + span + kPage;
        h.offset[i] = start, h.bytes[i] = bytes;
        // Under cuda-emu the buffers live in device memory alone: a copy
        // here would hand host code the inputs (the worker maps this file),
        // and the canary fills the whole area. Otherwise the canary goes
        // around the copy only (a second pass over a weight matrix of
        // hundreds of MiB, every call, for bytes the copy overwrites).
        if (s.device) {
            std::memset(s.shm.base + area, kCanary, end - area);
        } else {
            std::memset(s.shm.base + area, kCanary, start - area);
            std::memcpy(s.shm.base + start, all[i]->data.get(), bytes);
            std::memset(s.shm.base + start + bytes, kCanary, end - (start + bytes));
        }
        area += span + kPage;
    }
    for (auto& [name, v] : p.shape.axes) {
        std::snprintf(h.axis_names[h.n_axes], sizeof h.axis_names[0], "%s", name.c_str());
        h.axes[h.n_axes++] = v;
    }
    return s.device ? stage_on_device(s, c, h) : std::string();
}

// The first byte of [from, to) that is not the canary, or `to`.
std::size_t first_changed(const unsigned char* base, std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i)
        if (base[i] != kCanary) return i;
    return to;
}

// Outputs back into the problem; inputs and extras compared with the grader's
// copies; canaries around every buffer checked. `h` is the grader's own copy
// of the header it staged (the worker could have changed the shared one).
std::string collect(Session& s, CallData& c, const SharedHeader& h) {
    const auto all = buffers_of(c);
    const unsigned char* base = s.shm.base;
    // What the call left in buffer i: the shared mapping's copy, or under
    // cuda-emu the emulated device memory's (the submission's process holds
    // no copy the grader reads).
    std::vector<unsigned char> from_device;
    const auto left_in = [&](std::size_t i) -> const unsigned char* {
        if (!s.device) return base + h.offset[i];
        from_device.resize(all[i]->size_bytes() + 1);  // + 1: never a null data() for an empty buffer
        return s.device->read(h.device[i], from_device.data(), all[i]->size_bytes()) ? from_device.data() : nullptr;
    };
    const auto freed = [&](std::size_t i) {
        return "the submission freed " + all[i]->name + ", device memory the grader gave it (cudaFree)";
    };
    if (first_changed(base, kHeaderBytes, kHeaderBytes + kPage) != kHeaderBytes + kPage)
        return "the submission wrote before the start of its first buffer (" + all[0]->name + ")";
    const std::size_t n_in = c.p.inputs.size(), n_out = c.p.outputs.size();
    for (std::size_t i = 0; i < all.size(); ++i) {
        const Buffer& b = *all[i];
        const std::size_t start = h.offset[i], end = start + b.size_bytes();
        const std::size_t area = start + round_up(b.size_bytes(), kAlign) - area_bytes(b.size_bytes());
        const std::size_t guard_end = start + round_up(b.size_bytes(), kAlign) + kPage;
        if (const std::size_t at = first_changed(base, end, guard_end); at != guard_end)
            return "the submission wrote past the end of " + b.name + " (first changed byte: " +
                   std::to_string(at - end + 1) + " after its last element)";
        if (const std::size_t at = first_changed(base, area, start); at != start)
            return "the submission wrote before the start of " + b.name + " (" + std::to_string(start - at) +
                   " bytes before its first element)";
        const bool is_output = i >= n_in && i < n_in + n_out;
        if (is_output || c.trusted) continue;
        const unsigned char* left = left_in(i);
        if (!left) return freed(i);
        if (std::memcmp(left, b.data.get(), b.size_bytes()) != 0) {
            std::size_t e = 0;
            const std::size_t es = b.size_bytes() / std::max<std::size_t>(b.count, 1);
            while (e < b.count && std::memcmp(left + e * es, b.data.get() + e * es, es) == 0) ++e;
            return "the submission wrote into its input " + b.name + " (first change at " + element_name(b, e) +
                   "); inputs are const";
        }
    }
    for (std::size_t k = 0; k < n_out; ++k) {
        Buffer& b = c.p.outputs[k];
        const unsigned char* left = left_in(n_in + k);
        if (!left) return freed(n_in + k);
        std::memcpy(b.data.get(), left, b.size_bytes());
    }
    return {};
}

std::string crash_message(const Session& s, const CallResult& r) {
    std::string m = "the submission " + r.exit.describe(r.wall_s, s.spec.limits);
    if (r.exit.timed_out) m += " (time limit " + fmt("%.3g", s.spec.limits.wall_s) + " s for all its calls)";
    const std::string tail = s.worker.log ? s.worker.log->tail(1500) : "";
    if (!tail.empty()) m += "\nits last output:\n" + tail;
    const std::string kernels = s.worker.executor_log ? s.worker.executor_log->tail(1000) : "";
    if (!kernels.empty()) m += "\nits kernels' last output:\n" + kernels;
    return m;
}

void stop(Session& s) {
    if (!stop_worker(s.worker)) s.left_behind = true;
}

// Under cuda-emu: "" when the call's work could have been done by kernels,
// or why it was not (see DeviceServer::Traffic). The adapter copies nothing
// when the grader has staged the buffers, so every request is the student's.
std::string host_computed(const DeviceServer::Traffic& t) {
    if (t.launches == 0)
        return "the call launched no kernel: a CUDA exercise's work is done by kernels on the device, not by host "
               "code (no points for values computed on the host)";
    // Any read, of any size (a read of nothing still ran the call's kernels
    // while the host waited: red-team batch 9 timed them so).
    if (t.device_copies > DeviceServer::kMaxCopiesPerCall)
        return "the submission's host code made " + std::to_string(t.device_copies) +
               " device-to-device copies in the call (cudaMemcpy device to device; at most " +
               std::to_string(DeviceServer::kMaxCopiesPerCall) +
               "): a copy moves data and computes nothing, and a CUDA exercise's work is done by kernels on the device";
    if (t.host_reads > 0)
        return "the submission's host code read " + std::to_string(t.host_read_bytes) +
               " bytes of device memory during the call (cudaMemcpy device to host: " + std::to_string(t.host_reads) +
               (t.host_reads == 1 ? " read" : " reads") + "): a CUDA exercise's work is done by kernels on the device, and the grader reads the outputs "
               "itself";
    return {};
}

// A failure of the grader's (or of the machine it runs on), not of the
// submission: the test says so, scores nothing, and asks for another grade.
struct GraderError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

Outcome run_call(Session& s, CallData* c, Command cmd = kRun) {
    Outcome o;
    if (s.budget_left <= 0) {
        o.message = "not run: the time limit (" + fmt("%.3g", s.spec.limits.wall_s) + " s) is used up";
        return o;
    }
    if (s.worker.pid < 0) {
        if (s.starts >= 12) {
            o.message = "not run: the submission crashed too often";
            return o;
        }
        stop(s);  // whatever the last one left
        int device_fd = -1;
        if (s.device) {
            device_fd = s.device->reconnect();  // a fresh device: nothing of the last worker's
            std::fill(std::begin(s.device_at), std::end(s.device_at), 0);
        }
        s.worker = start_worker(*s.sandbox, s.spec, s.shm, device_fd);
        if (s.device) {
            try {
                start_executor(s.worker, *s.sandbox, s.spec, s.device->executor_end());
            } catch (const RefusedExecutable& e) {  // the submission's doing, not the grader's
                stop(s);
                ++s.starts;
                o.message = std::string("the call failed: the grader will not run its kernels: ") + e.what();
                return o;
            }
            s.device->close_client();  // the worker and the executor hold the only client ends
            s.device->set_launch_gate(launch_gate(s.worker));
        }
        ++s.starts;
    }
    SharedHeader staged;
    if (cmd == kRun) {
        o.message = stage(s, *c);
        if (!o.message.empty()) return o;
        staged = s.shm.header();
    }
    // Its processes' and its kernels' (the executor's, under cuda-emu).
    const auto oom_kills = [&] {
        long long n = 0;
        for (const Cgroup* cg : {s.worker.cgroup.get(), s.worker.executor_cgroup.get()}) n += cg ? cg->oom_kills() : 0;
        return n;
    };
    const long long oom_before = oom_kills();
    // Under cuda-emu, what the worker asked of the device since the last
    // call's end counts towards this call: a read or a launch answered
    // between calls (a thread's, or one a call left behind) is charged, not
    // dropped (red-team batch 10 read device memory uncharged so).
    const CallResult r = call_worker(s.worker, cmd, s.budget_left);
    s.budget_left -= r.wall_s;
    o.wall_s = r.wall_s;
    // Under cuda-emu the call's kernels run now, the host frozen, within
    // what is left of the time budget (the host was answered at once).
    bool kernels_in_time = true;
    if (s.device) {
        const auto start = std::chrono::steady_clock::now();
        kernels_in_time = s.device->finish(s.budget_left);
        const double kernels_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        s.budget_left -= kernels_s;
        o.wall_s += kernels_s;
    }
    // Why a kernel failed is the device's to say (the host only learns that it did).
    const DeviceServer::Traffic traffic = s.device ? s.device->take_traffic() : DeviceServer::Traffic{};
    const std::string device_said =
        traffic.launch_errors.empty() ? "" : "\na kernel failed on the device: " + printable(traffic.launch_errors);
    if (!r.ok && r.exit.unstoppable)
        throw GraderError("a worker answered its call but could not be stopped after it (" +
                          r.exit.describe(r.wall_s, s.spec.limits) + ")");
    if (!r.ok) {
        o.message = crash_message(s, r) + device_said;
        // All of its time is used (past it, by as late as the stop came).
        if (r.exit.timed_out || r.exit.cpu_exceeded) s.budget_left = std::min(s.budget_left, 0.0);
        return o;
    }
    // First: a process killed for memory (a kernel's, under cuda-emu) can
    // also make the call fail with another message.
    if (oom_kills() > oom_before) {
        o.message = "the submission went over its memory limit (" + std::to_string(s.spec.limits.memory_mb) +
                    " MiB over all of its processes): a process of it was killed during the call";
        return o;
    }
    if (r.reply.status != 0) {
        // The worker filled the message: read no further than its array.
        const std::string said = bounded(r.reply.message, sizeof r.reply.message);
        o.message = "the call failed: " + said;
        // Under the per-process limit (RLIMIT_AS) an allocation past the
        // memory limit is refused rather than killed: say which limit.
        if (said.find("bad_alloc") != std::string::npos || said.find("bad_array_new_length") != std::string::npos)
            o.message += " (an allocation was refused: the submission may hold at most " +
                         std::to_string(s.spec.limits.memory_mb) + " MiB, its memory limit)";
        o.message += device_said;
        return o;
    }
    if (!kernels_in_time) {
        o.message = "the call's kernels ran past the time limit (" + std::to_string(int(s.spec.limits.wall_s)) +
                    " s for all of the submission's calls)" + device_said;
        s.budget_left = std::min(s.budget_left, 0.0);
        return o;
    }
    o.device_s = r.reply.device_seconds;
    o.waited_s = r.reply.waited_seconds;
    if (cmd == kRun && !device_said.empty()) o.message = "the call returned, but" + device_said;
    if (cmd == kRun && s.device && o.message.empty()) o.message = host_computed(traffic);
    if (cmd == kRun && o.message.empty()) o.message = collect(s, *c, staged);
    if (cmd == kRun && o.message.empty()) replay_outputs(*c);
    o.ok = o.message.empty();
    return o;
}

std::uint64_t call_seed(const Seed& seed, const std::string& what, int i) {
    return keyed_seed(seed.key, seed.domain + "/" + what + "#" + std::to_string(i));
}

// What a submission is checked against: the op's fp64 oracle, or, for a
// lossy exercise (grading "oracle": "contract"), the reference variant's
// contract oracle (e.g. y = dequant(Q(W)) x in fp64 for quantized weights).
using OracleFn = std::function<std::vector<std::vector<double>>(const Problem&)>;

const OracleFn& oracle_of(const Exercise& x, const Op& op, const Variant& ref) {
    // "reference" judges by the reference variant's bits (same_bits_as_reference);
    // the op's oracle stays the fallback of code that asks for one.
    if (x.oracle == "exact" || x.oracle == "reference") return op.oracle;
    if (x.oracle == "contract") {
        if (!ref.contract_oracle)
            throw std::runtime_error("level " + x.level_id + ": exercise " + x.id + " asks for the contract oracle, but " +
                                     "reference variant '" + ref.name + "' declares none");
        return ref.contract_oracle;
    }
    throw std::runtime_error("level " + x.level_id + ": exercise " + x.id + " has oracle '" + x.oracle +
                             "'; valid: exact, contract, reference");
}

// Grading oracle "reference": the reference variant, run by the grader in its
// own process (with the submission's thread count) on a problem made afresh
// from the same seed, so on the same inputs; the submission's outputs must be
// its outputs bit for bit. "" when they are.
std::string same_bits_as_reference(const Op& op, const Variant& ref, const Problem& sub) {
    Problem want = op.make_problem(sub.shape, sub.dtype, sub.seed);
    Instance inst = ref.prepare(want);
    inst.run(), inst.sync(), inst.fetch();
    for (std::size_t k = 0; k < sub.outputs.size(); ++k) {
        const Buffer &b = sub.outputs[k], &r = want.outputs.at(k);
        if (std::memcmp(b.data.get(), r.data.get(), b.size_bytes()) == 0) continue;
        const std::size_t es = b.size_bytes() / std::max<std::size_t>(b.count, 1);
        std::size_t e = 0, differing = 0;
        while (e < b.count && std::memcmp(b.data.get() + e * es, r.data.get() + e * es, es) == 0) ++e;
        for (std::size_t i = e; i < b.count; ++i)
            differing += std::memcmp(b.data.get() + i * es, r.data.get() + i * es, es) != 0;
        return "output " + b.name + " is not bit for bit what the reference variant " + ref.name +
               " computes on the same inputs: " + std::to_string(differing) + " of " + std::to_string(b.count) +
               " elements differ, the first at " + element_name(b, e) + " (" + fmt("%.9g", load_as_double(b, e)) +
               " where the reference has " + fmt("%.9g", load_as_double(r, e)) + ")";
    }
    return {};
}

// The submission on fresh inputs, checked against the oracle (or, for grading
// oracle "reference", against the reference variant's bits).
Outcome checked_call(Session& s, const Exercise& x, const Op& op, const OracleFn& oracle, const Shape& shape,
                     std::uint64_t seed) {
    CallData c = make_call(x, op, shape, seed);
    Outcome o = run_call(s, &c);
    if (!o.ok) return o;
    if (x.oracle == "reference") {
        const Variant* ref = nullptr;
        for (auto* v : variants_of(op.name, Backend::cpu))
            if (v->name == x.reference_variant) ref = v;
        if (!ref) throw std::runtime_error("reference variant '" + x.reference_variant + "' is not registered");
        o.message = same_bits_as_reference(op, *ref, c.p);
        o.ok = o.message.empty();
        return o;
    }
    const CheckResult r = check_problem(op, c.p, oracle(c.p));  // computed only now, after the call
    if (!r.ok) o.ok = false, o.message = r.message;
    return o;
}

json test(const std::string& name, const std::string& kind, bool passed, double score, double max_score,
          const std::string& output) {
    return {{"name", name}, {"kind", kind}, {"passed", passed}, {"score", score}, {"max_score", max_score},
            {"output", output}};
}

json grade_correctness(Session& s, const Exercise& x, const Op& op, const OracleFn& oracle, const Seed& seed) {
    json tests = json::array();
    const double each = x.correctness_points / std::max<std::size_t>(x.correctness_shapes.size(), 1);
    for (auto& text : x.correctness_shapes) {
        const Shape shape = parse_shape(text, op.default_shape, op.axes, op.flag_axes);
        std::string out;
        bool ok = true;
        for (int call = 0; call < kCallsPerShape && ok; ++call) {
            const Outcome o = checked_call(s, x, op, oracle, shape, call_seed(seed, "correct/" + text, call));
            if (!o.ok) ok = false, out = "call " + std::to_string(call + 1) + " of " +
                                          std::to_string(kCallsPerShape) + " (fresh inputs each call): " + o.message;
        }
        if (ok) out = "correct on " + std::to_string(kCallsPerShape) + " calls with different inputs";
        tests.push_back(test("correctness " + text, "correctness", ok, ok ? each : 0, each, out));
    }
    return tests;
}

// --- speed --------------------------------------------------------------------

// A worker running the reference variant: this very binary, in its hidden
// `grade-worker` mode, with the submission's thread count and memory layout,
// outside the sandbox (it runs no submission code, and nothing in the sandbox
// can see it). Its failures are the grader's, never the submission's.
Session reference_session(const Session& sub, const Op& op, const Variant& ref, Backend b, bool time_call) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) throw std::runtime_error("cannot find the memwall executable: " + ec.message());
    Session r;
    r.sandbox = sub.sandbox;
    r.spec.argv = {self.string(), "grade-worker", "--op", op.name, "--variant", ref.name, "--backend", to_string(b)};
    if (time_call) r.spec.argv.push_back("--time-call");
    r.spec.env = sub.spec.env;
    r.spec.sandboxed = false;
    r.spec.limits.wall_s = 600;
    r.spec.limits.cpus = sub.spec.limits.cpus;  // the same cores as the submission
    r.budget_left = r.spec.limits.wall_s;
    r.shm = make_shared_memory(sub.shm.size);
    return r;
}

// Submission output vs the reference variant's on the same inputs: both are
// fp32 GEMMs, so each is allowed its own rounding error (scale 2); outputs
// checked exactly, and every output when `bitwise` (grading oracle
// "reference"), must be the same bits.
std::string compare_with_reference(const Op& op, const Problem& sub, const Problem& ref, bool bitwise) {
    const double L = op.check.reduction_length ? op.check.reduction_length(sub.shape) : 1.0;
    std::vector<std::vector<double>> law;  // the oracle's, for samples (computed once, when needed)
    for (std::size_t k = 0; k < sub.outputs.size(); ++k) {
        const CheckMode mode = bitwise ? CheckMode::exact : op.check.mode_for(sub.outputs[k].name);
        // Samples: the reference's draws are no target, the law is. Every
        // timed call's counts are checked against it (their number exactly,
        // both tails), so a timed call cannot skip its sampling or write
        // the expected counts; at alpha 1e-9, as a grading makes dozens.
        if (mode == CheckMode::distribution) {
            if (law.empty()) law = op.oracle(sub);
            const double n = op.check.distribution_samples ? op.check.distribution_samples(sub.shape) : 0;
            const CheckResult c = check_distribution(sub.outputs[k], law.at(k), kTimedCallAlpha, n);
            if (!c.ok) return c.message;
            continue;
        }
        if (mode == CheckMode::exact) {
            if (std::memcmp(sub.outputs[k].data.get(), ref.outputs[k].data.get(), sub.outputs[k].size_bytes()) != 0)
                return "output " + sub.outputs[k].name +
                       " differs from the reference's (this exercise is checked exactly)";
            continue;
        }
        // Token sequences were judged against the oracle by their own rule;
        // the reference's near-ties are no target.
        if (mode != CheckMode::tolerance) continue;
        std::vector<double> want(ref.outputs[k].count);
        for (std::size_t i = 0; i < want.size(); ++i) want[i] = load_as_double(ref.outputs[k], i);
        const CheckResult c = check_close(sub.outputs[k], want, sub.outputs[k].dtype, L,
                                          2.0 * op.check.tolerance_scale);
        if (!c.ok) return c.message;
    }
    return {};
}

// OpenMP threads spin for a while after a parallel region before they sleep
// (libgomp: GOMP_SPINCOUNT, 300000 pauses: ~10 ms on an idle core, far longer
// on a loaded one). Timing one side while the other side's threads still spin
// would take cores from it, so each burst waits until every thread of the
// other process (or this one's, but the caller) is asleep, 0.5 s at most.
bool threads_idle(pid_t pid) {
    // A process that ends while it is listed ends the listing (the throwing
    // increment of a range-for would end the grade).
    std::error_code ec;
    fs::directory_iterator it("/proc/" + std::to_string(pid) + "/task", ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        const auto& t = *it;
        std::ifstream in(t.path() / "stat");
        std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const auto paren = stat.rfind(')');
        if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'R') return false;
    }
    return true;
}

// `root` and every process below it (the sandbox's processes, seen from
// outside its PID namespace).
std::vector<pid_t> process_tree(pid_t root) {
    std::map<pid_t, std::vector<pid_t>> children;
    std::error_code ec;
    fs::directory_iterator it("/proc", ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        const auto& e = *it;
        const std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream in(e.path() / "stat");
        std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const auto paren = stat.rfind(')');
        if (paren == std::string::npos) continue;
        std::istringstream rest(stat.substr(paren + 2));
        char state = 0;
        long ppid = 0;
        if (rest >> state >> ppid) children[static_cast<pid_t>(ppid)].push_back(static_cast<pid_t>(std::stol(name)));
    }
    std::vector<pid_t> tree = {root};
    for (std::size_t i = 0; i < tree.size(); ++i)
        for (pid_t c : children[tree[i]]) tree.push_back(c);
    return tree;
}

// OpenMP threads spin for a while after a parallel region before they sleep
// (libgomp: GOMP_SPINCOUNT, 300000 pauses: ~10 ms on an idle core, far longer
// on a loaded one). Timing one side while the other side's threads still spin
// would take cores from it, so each burst waits until every thread of the
// other side is asleep, 0.5 s at most. A sandbox with a freezer is frozen
// between its calls, which stops all of its threads and processes at once.
void wait_idle(const Session& other) {
    if (other.worker.pid < 0 || other.worker.cgroup) return;
    for (int i = 0; i < 500; ++i) {
        bool idle = true;
        for (pid_t p : process_tree(other.worker.pid)) idle = idle && threads_idle(p);
        if (idle) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

// The threads whose run-queue waits tell whether a call of `w` shared its
// core: its processes' (its executor's too, under cuda-emu).
RunQueueWait run_queue_of(const Worker& w) {
    std::vector<pid_t> pids;
    for (pid_t root : {w.pid, w.executor})
        if (root > 0)
            for (pid_t p : process_tree(root)) pids.push_back(p);
    return RunQueueWait(pids);
}

bool confirmed(std::vector<double> t) {
    if (t.size() < 2) return false;
    std::sort(t.begin(), t.end());
    return t[1] <= 1.1 * t[0];
}

// The round trip of an empty call, measured on the reference worker: it runs
// no submission code, so nothing can make it look slower than it is (a
// submission that delayed its own answers to empty calls would otherwise
// have that delay subtracted from its timed calls).
double ping_overhead(Session& trusted) {
    double best = 1e9;
    for (int i = 0; i < 20; ++i) {
        const Outcome o = run_call(trusted, nullptr, kPing);
        if (!o.ok) throw GraderError("the reference worker did not answer: " + o.message);
        best = std::min(best, o.wall_s);
    }
    return best;
}

// The speed test's two sides: the submission's session and the reference's
// worker. Every submission time is the grader's clock around the call minus
// the empty round trip (`overhead`); the reference's too, unless time_call,
// when its worker's own time of its variant's run() is taken.
struct SpeedRace {
    Session& s;
    Session& r;
    const Exercise& x;
    const Op& op;
    const Shape& shape;
    const Seed& seed;
    bool time_call;
    double overhead;

    double sub_seconds(const Outcome& o) const { return std::max(o.wall_s - overhead, 1e-9); }
    double ref_seconds(const Outcome& o) const {
        if (time_call) {
            if (!(o.device_s > 0 && o.device_s <= o.wall_s))
                throw GraderError("the reference worker reported no time for its call");
            return o.device_s;
        }
        return std::max(o.wall_s - overhead, 1e-9);
    }
    Outcome ref_call(CallData& c) {
        Outcome o = run_call(r, &c);
        if (!o.ok && r.worker.pid < 0) o = run_call(r, &c);  // one restart
        if (!o.ok) throw GraderError("the reference worker failed: " + o.message);
        return o;
    }
};

// What the rounds measured: each side's best and per-round times, the timed
// seconds spent, and the rounds and submission calls made.
struct SpeedTimes {
    double best_ref = 1e30, best_sub = 1e30, spent = 0;
    // Each round's best undisturbed call, of the rounds that had one: what
    // confirms a side's best (a call that waited for its core is slower than
    // the code, and two such calls can agree by chance).
    std::vector<double> refs, subs;
    int rounds = 0, calls = 0, ref_calls = 0;
    int disturbed_ref = 0, disturbed_sub = 0;  // calls that waited for their core
    bool settled = false;  // both bests confirmed by undisturbed rounds
};

// A round: a burst of calls from each side on the same fresh inputs, the
// side that goes first alternating. Within a burst a side's threads stay
// warm; a burst starts when the other side's are asleep. Returns why the
// submission failed, or "".
std::string speed_round(SpeedRace& race, SpeedTimes& t) {
    const int round = t.rounds;
    const bool debug = std::getenv("MEMWALL_GRADE_DEBUG");
    const double made_from = now_s();
    std::vector<std::uint64_t> seeds;
    for (int i = 0; i < kBurst; ++i) seeds.push_back(call_seed(race.seed, "speed/round", round * kBurst + i));
    std::vector<CallData> cs = make_calls(race.x, race.op, race.shape, seeds), cr;
    for (auto& c : cs) cr.push_back(reference_twin(c));
    if (debug) std::fprintf(stderr, "round %d: its calls made in %.0f ms\n", round, (now_s() - made_from) * 1e3);
    double t_ref = 1e30, t_sub = 1e30;  // each side's best call this round
    double c_ref = 1e30, c_sub = 1e30;  // and its best undisturbed one
    // One timed call's time and wait, into its side's bests and count.
    auto record = [&](const char* side, double sec, double waited, double& best, double& clean, int& disturbed) {
        best = std::min(best, sec);
        if (waited_for_core(waited, sec)) ++disturbed;
        else clean = std::min(clean, sec);
        if (debug) std::fprintf(stderr, "  %s call %.3f ms, waited %.3f ms\n", side, sec * 1e3, waited * 1e3);
    };
    auto ref_burst = [&] {
        wait_idle(race.s);
        const RunQueueWait wait = run_queue_of(race.r.worker);
        for (auto& c : cr) {
            const auto before = wait.take();
            const Outcome o = race.ref_call(c);
            const double sec = race.ref_seconds(o);
            // Timing "call": the worker's own wait during the run() it timed.
            const double waited =
                race.time_call ? o.waited_s : RunQueueWait::working_wait(before, wait.take());
            ++t.ref_calls;
            record("reference", sec, waited, t_ref, c_ref, t.disturbed_ref);
        }
    };
    if (round % 2 == 0) ref_burst();
    wait_idle(race.r);
    const RunQueueWait wait = run_queue_of(race.s.worker);
    for (auto& c : cs) {
        const auto before = wait.take();
        const Outcome o = run_call(race.s, &c);
        ++t.calls;
        if (!o.ok) return "timed call " + std::to_string(t.calls) + ": " + o.message;
        record("submission", race.sub_seconds(o), RunQueueWait::working_wait(before, wait.take()), t_sub,
               c_sub, t.disturbed_sub);
    }
    if (round % 2 == 1) ref_burst();
    for (int i = 0; i < kBurst; ++i)
        if (const std::string m = compare_with_reference(race.op, cs[i].p, cr[i].p, race.x.oracle == "reference");
            !m.empty())
            return "timed call " + std::to_string(t.calls - kBurst + i + 1) +
                   " disagrees with the reference variant on the same inputs: " + m;
    if (debug) std::fprintf(stderr, "round %d: ref %.3f ms, sub %.3f ms\n", round, t_ref * 1e3, t_sub * 1e3);
    t.best_ref = std::min(t.best_ref, t_ref), t.best_sub = std::min(t.best_sub, t_sub);
    if (c_ref < 1e30) t.refs.push_back(c_ref);
    if (c_sub < 1e30) t.subs.push_back(c_sub);
    t.spent += kBurst * (t_sub + t_ref);
    return "";
}

// Rounds until both bests are confirmed (a second round within 10%: one
// lucky or unlucky sample doesn't decide the score) and the time budget is
// spent, or the round limit. Returns why the submission failed, or "".
std::string speed_rounds(SpeedRace& race, SpeedTimes& t) {
    auto settled = [&] {
        return (confirmed(t.refs) && confirmed(t.subs) && t.spent >= kSpeedBudgetS) || t.spent >= kSpeedMaxS;
    };
    for (; t.rounds < race.x.max_rounds && (t.rounds < kMinRounds || !settled()); ++t.rounds) {
        if (const std::string m = speed_round(race, t); !m.empty()) return m;
        // Far below the floor, more rounds change nothing, once the
        // reference's best is confirmed (one slow round of the reference,
        // say while a neighbour held a core, must not lift the ratio).
        if (t.rounds + 1 >= kMinRounds && confirmed(t.refs) && t.best_ref / t.best_sub < race.x.floor_ratio / 2) {
            ++t.rounds;
            break;
        }
    }
    t.settled = confirmed(t.refs) && confirmed(t.subs);
    return "";
}

// The speed points of a ratio (the submission's speed over the reference's):
// linear from none at zero_credit_ratio to all at full_credit_ratio, none
// below floor_ratio.
double speed_points_for(const Exercise& x, double ratio) {
    if (!(ratio >= x.floor_ratio)) return 0;
    const double t = (ratio - x.zero_credit_ratio) / (x.full_credit_ratio - x.zero_credit_ratio);
    return x.speed_points * std::clamp(t, 0.0, 1.0);
}

// The score from the ratio of the two bests, and the words that explain it.
std::pair<double, std::string> speed_score(const Exercise& x, const Op& op, const Variant& ref, const Shape& shape,
                                           const SpeedTimes& t, json& info, double overhead) {
    const double best_ref = t.best_ref, best_sub = t.best_sub;
    const double ratio = best_ref / best_sub, flops = op.flops ? op.flops(shape) : 0;
    const double score = speed_points_for(x, ratio);
    info.update({{"reference_best_s", best_ref}, {"submission_best_s", best_sub}, {"ratio", ratio},
                 {"rounds", t.rounds}, {"calls_per_round", kBurst}, {"call_overhead_s", overhead},
                 {"disturbed_calls", {{"reference", t.disturbed_ref}, {"submission", t.disturbed_sub}}},
                 {"confirmed_undisturbed", t.settled},
                 {"reference_gflops", flops / best_ref * 1e-9}, {"submission_gflops", flops / best_sub * 1e-9}});
    std::string out = "best of " + std::to_string(t.rounds) + " interleaved rounds of " + std::to_string(kBurst) +
                      " calls a side, fresh inputs each call, every time taken by the grader: reference '" +
                      ref.name + "' " + fmt("%.4g", best_ref * 1e3) + " ms (" +
                      fmt("%.1f", flops / best_ref * 1e-9) + " GFLOP/s), submission " +
                      fmt("%.4g", best_sub * 1e3) + " ms (" + fmt("%.1f", flops / best_sub * 1e-9) +
                      " GFLOP/s); ratio " + fmt("%.3f", ratio) + " (full credit at >= " +
                      fmt("%.2f", x.full_credit_ratio) +
                      (x.zero_credit_ratio > 0 ? ", rising from none at " + fmt("%.2f", x.zero_credit_ratio) + ")"
                                               : ", none below " + fmt("%.2f", x.floor_ratio) + ")");
    if (t.disturbed_ref + t.disturbed_sub > 0) {
        out += "; " + std::to_string(t.disturbed_ref) + " of the reference's " + std::to_string(t.ref_calls) +
               " calls and " + std::to_string(t.disturbed_sub) + " of the submission's " + std::to_string(t.calls) +
               " waited for a core (another task, or more of the side's own threads than its cores, ran on it): "
               "they confirm no best";
        if (!t.settled)
            out += std::string(" (the bests were not confirmed by undisturbed calls in the rounds allowed") +
                   (t.disturbed_ref > 0 ? ": grade on a quieter machine if it matters)" : ")");
    }
    return {score, out};
}

json grade_speed(Session& s, const Exercise& x, const Op& op, const OracleFn& oracle, const Variant& ref, Backend b,
                 const Seed& seed, bool all_correct) {
    const Shape shape = parse_shape(x.speed_shape, op.default_shape, op.axes, op.flag_axes);
    const std::string name = "speed " + x.speed_shape;
    json info = {{"shape", shape.str()}, {"reference_variant", ref.name}, {"full_credit_ratio", x.full_credit_ratio},
                 {"floor_ratio", x.floor_ratio}, {"zero_credit_ratio", x.zero_credit_ratio}};
    auto result = [&](bool passed, double score, const std::string& out) {
        json t = test(name, "speed", passed, score, x.speed_points, out);
        t["speed"] = info;
        return t;
    };
    if (!all_correct) return result(false, 0, "no speed credit without full correctness");
    if (const Outcome o = checked_call(s, x, op, oracle, shape, call_seed(seed, "speed/before", 0)); !o.ok)
        return result(false, 0, "wrong at the speed shape before timing: " + o.message);

    // The reference runs in a worker process of its own (memwall grade-worker),
    // so that both sides pay the same round trip: a process woken through a
    // pipe on a busy machine waits for a core, and timing one side in-process
    // would hand it that wait as a head start. Every submission time is the
    // grader's clock around the call minus the empty round trip measured on
    // the reference worker. timing "call" (CPU exercises whose reference
    // variant prepares its inputs, e.g. quantizes weights, in every call that
    // the submission gets prepared by the grader): the reference worker times
    // its variant's run() alone, and that is trusted because it runs no
    // submission code.
    const bool time_call = b == Backend::cpu && x.timing == "call";
    Session r = reference_session(s, op, ref, b, time_call);
    auto finish = [&] {
        stop(r);
        release(r.shm);
    };
    try {
        SpeedRace race{s, r, x, op, shape, seed, time_call, ping_overhead(r)};
        {  // warm the reference's threads and pages, as the check call warmed the submission's
            CallData w = make_call(x, op, shape, call_seed(seed, "speed/warm", 0), false);
            race.ref_call(w);
        }
        SpeedTimes t;
        const std::string failed = speed_rounds(race, t);
        finish();
        if (!failed.empty()) return result(false, 0, failed);
        if (const Outcome o = checked_call(s, x, op, oracle, shape, call_seed(seed, "speed/after", 0)); !o.ok)
            return result(false, 0, "wrong at the speed shape after timing: " + o.message);
        const auto [score, out] = speed_score(x, op, ref, shape, t, info, race.overhead);
        return result(t.best_ref / t.best_sub >= x.full_credit_ratio, score, out);
    } catch (const GraderError& e) {
        finish();
        json t = result(false, 0, std::string("not graded: ") + e.what() +
                                      ". This is the grader's error, not the submission's: grade it again.");
        t["grader_error"] = true;
        return t;
    }
}

// --- the whole grading --------------------------------------------------------

int grade_threads(const GradeOptions& o, const Exercise& x) {
    const int hw = std::max(1u, std::thread::hardware_concurrency());
    return o.threads > 0 ? o.threads : (x.threads > 0 ? x.threads : hw);
}

// What every report says before its tests: level, exercise, backend, seed,
// threads, sandbox, the most it can score (grade() adds the CPUs once it
// has chosen them).
json report_head(const GradeOptions& o, const Exercise& x, Backend b, const Seed& seed, const Sandbox& sb) {
    const int threads = grade_threads(o, x);
    const bool emulated = b == Backend::cuda_emu;
    json doc = {{"schema", "memwall.grade/1"}, {"level", x.level_id}, {"exercise", x.id},
                {"backend", to_string(b)}, {"submission", o.submission}, {"op", x.op},
                {"seed", {{"kind", seed.kind}}}, {"threads", threads},
                {"max_score", x.correctness_points + (emulated ? 0 : x.speed_points)},
                {"sandbox", {{"enabled", sb.enabled}, {"cgroups", sb.cgroups}, {"description", sb.describe()}}}};
    if (seed.kind != "secret") doc["seed"]["value"] = seed.value;
    return doc;
}

// The report of a grade the grader itself could not finish (an exception
// out of grade()): no points, the grader's error said, so that a course
// platform still reads a report and knows to grade again.
json grader_failure(const GradeOptions& o, const Exercise& x, Backend b, const Seed& seed, const Sandbox& sb,
                    const std::string& what) {
    json doc = report_head(o, x, b, seed, sb);
    json t = test("grader", "grader", false, 0, doc["max_score"].get<double>(),
                  "not graded: the grader failed (" + what +
                      "). This is the grader's error, not the submission's: the instructor should see to it and grade again.");
    t["grader_error"] = true;
    doc["tests"] = json::array({t});
    doc["score"] = 0;
    doc["grader_error"] = true;
    return doc;
}

json grade(const GradeOptions& o, const Exercise& x, Backend b, const Seed& seed, const fs::path& tmp,
           const Sandbox& sb) {
    const Op* op = find_op(x.op);
    if (!op) throw std::runtime_error("level " + x.level_id + " names op '" + x.op + "', which is not registered");
    const Variant& ref = find_reference(x, b);
    const OracleFn& oracle = oracle_of(x, *op, ref);
    const int hw = std::max(1u, std::thread::hardware_concurrency());
    const int threads = grade_threads(o, x);
    const bool emulated = b == Backend::cuda_emu;

    json doc = report_head(o, x, b, seed, sb);
    json tests = json::array();

    const Build build = build_submission(sb, x, b, o.submission, tmp, o.reference_solution);
    doc["build"] = {{"ok", build.ok}, {"command", build.command}, {"seconds", build.seconds}, {"log", build.log},
                    {"lock", build.lock}};
    tests.push_back(test("build", "build", build.ok, 0, 0,
                         build.ok ? "compiled in " + fmt("%.1f", build.seconds) + " s" + (build.log.empty() ? "" : ":\n" + build.log)
                                  : "compile error, no points:\n" + build.log));
    bool left_behind = false;
    std::string busy_note;  // the chosen cores were busy with other work
    if (build.ok) {
        // One grade times at a time on this host (timing_lock.hpp). Declared
        // before the session, so that an exception stops the worker before
        // the lock is let go.
        std::optional<TimingLock> timing;
        Session s;
        s.sandbox = &sb;
        s.spec.argv = {build.exe.string()};
        s.spec.ro_binds = {build.exe.string()};
        const int worker_threads = emulated ? std::min(hw, kEmulatorThreads) : threads;
        s.spec.env = child_env(worker_threads);
        // Taken before the cores are picked, so that another grade's timed
        // calls neither share them nor steer the choice, and kept until the
        // worker stops; shared by a grade that times nothing (under
        // cuda-emu, or without a speed shape), whose calls still take a core.
        const bool timed = !emulated && !x.speed_shape.empty();
        // One wait for both: what the compile's wait left of it.
        timing.emplace(std::max(0.0, timing_lock_wait_s(kTimingLockWaitS) - build.lock_waited_s),
                       timed ? TimingLock::Mode::times : TimingLock::Mode::keeps_off);
        doc["timing_lock"] = lock_report(*timing);
        // The cores both sides run on: the least busy now that the compiler is done.
        const CpuChoice cores = quietest_cpus(worker_threads);
        doc["cpus"] = cpu_list(cores.cpus);
        doc["cpu_confinement"] = sb.enabled ? "sched_setaffinity before it starts; its seccomp filter refuses "
                                              "sched_setaffinity, so it cannot leave them"
                                            : "sched_setaffinity before it starts (not sandboxed: it could leave them)";
        if (cores.measured) {
            json busy = json::object();
            for (auto& [cpu, load] : cores.busy) busy[std::to_string(cpu)] = std::round(load * 100) / 100;
            doc["cpu_busy"] = busy;
            for (auto& [cpu, load] : cores.busy)
                if (load > 0.25 && std::find(cores.cpus.begin(), cores.cpus.end(), cpu) != cores.cpus.end())
                    busy_note += (busy_note.empty() ? "" : ", ") + std::to_string(cpu) + " (" +
                                 fmt("%.0f", load * 100) + "% busy)";
        }
        if (emulated) {
            // The emulated device memory in this process, reached over kDeviceFd.
            // Device memory is held by the grader itself, outside every
            // sandbox's cgroup: at most 1 GiB of it (the emulated shapes need
            // a few MiB), so that no submission can make the grader the one
            // the machine's memory runs out on (red-team batch 9).
            s.device = std::make_unique<DeviceServer>(std::size_t(std::min(x.memory_limit_mb, 1024.0)) << 20);
            s.spec.env.push_back(std::string(emu::remote::kFdVariable) + "=" + std::to_string(kDeviceFd));
        }
        const double wall = o.time_limit_s > 0 ? o.time_limit_s : x.time_limit_s;
        s.spec.limits = {.wall_s = wall,
                         .memory_mb = std::size_t(x.memory_limit_mb),
                         .max_tasks = 64,
                         .cpu_s = wall * worker_threads + 5,
                         .per_process_memory = !(b == Backend::cuda || built_with_asan()),
                         .cpus = cores.cpus};
        if (b == Backend::cuda && !sb.cgroups) s.spec.limits.memory_mb = 0;
        s.budget_left = wall;
        std::size_t shm = kHeaderBytes;
        std::vector<std::string> shapes = x.correctness_shapes;
        if (!emulated && !x.speed_shape.empty()) shapes.push_back(x.speed_shape);
        for (auto& text : shapes) {  // the submission's calls, and the reference's (every input, no extras)
            const CallData c = make_call(x, *op, parse_shape(text, op->default_shape, op->axes, op->flag_axes), 0);
            shm = std::max({shm, layout_bytes(buffers_of(c)), layout_bytes(buffers_of(reference_twin(c)))});
        }
        s.shm = make_shared_memory(shm);
        omp_set_num_threads(threads);  // the reference runs with the submission's thread count

        json correctness = grade_correctness(s, x, *op, oracle, seed);
        bool all_correct = true;
        for (auto& t : correctness) all_correct = all_correct && t["passed"].get<bool>(), tests.push_back(t);
        if (emulated) {
            tests.push_back(test("speed " + x.speed_shape, "speed", false, 0, 0,
                                 "not graded under cuda-emu: emulated timings mean nothing. " + x.emulated_note));
        } else if (!x.speed_shape.empty()) {
            tests.push_back(grade_speed(s, x, *op, oracle, ref, b, seed, all_correct));
        }
        stop(s);
        timing.reset();
        left_behind = s.left_behind;
        release(s.shm);
        // Not capped: a call killed at the limit is charged until it was
        // stopped, so a late kill shows as time used past the limit.
        doc["time_used_s"] = wall - s.budget_left;
        doc["time_limit_s"] = wall;
        doc["memory_limit_mb"] = x.memory_limit_mb;
    } else {
        for (auto& text : x.correctness_shapes)
            tests.push_back(test("correctness " + text, "correctness", false, 0,
                                 x.correctness_points / x.correctness_shapes.size(), "not run: compile error"));
        if (!emulated) tests.push_back(test("speed " + x.speed_shape, "speed", false, 0, x.speed_points,
                                            "not run: compile error"));
    }
    double score = 0;
    bool grader_error = false;
    for (auto& t : tests) {
        score += t["score"].get<double>();
        grader_error = grader_error || t.value("grader_error", false);
    }
    doc["tests"] = tests;
    doc["score"] = score;
    doc["grader_error"] = grader_error;
    doc["sandbox"]["left_behind"] = left_behind;
    json notes = json::array();
    if (!sb.enabled)
        notes.push_back("NOT SANDBOXED (--unsafe-no-sandbox): for local practice only, not a grade to trust");
    if (emulated) {
        notes.push_back("speed is not graded under cuda-emu; " + x.emulated_note);
        // What emulation can and cannot certify (docs/grading.md).
        notes.push_back("cuda-emu certifies the values each call left in device memory, that kernels computed them "
                        "(they run in a process of their own that shares nothing with the host code but device "
                        "memory) and that the host code read no device memory back; not their speed: only a GPU "
                        "run certifies that");
    }
    if (left_behind)
        notes.push_back("a process of the submission was still alive 10 s after it was killed (the grade's guard "
                        "removes it when the grader exits; `memwall grade --cleanup` removes what a dead grader left)");
    if (doc.contains("timing_lock") && doc["timing_lock"]["mode"] == "exclusive" &&
        !doc["timing_lock"]["held"].get<bool>())
        notes.push_back("timed without the host's grading lock (" + doc["timing_lock"]["why_not"].get<std::string>() +
                        "): another grade may have timed beside this one, and the speed ratio is noisier");
    if (!busy_note.empty())
        notes.push_back("other work was running on the CPUs graded on, the least busy there were: " + busy_note +
                        "; the submission and the reference shared them alike, but the speed ratio is noisier: "
                        "grade on a quieter machine if it matters");
    if (!notes.empty()) doc["notes"] = notes;
    return doc;
}

}  // namespace

int run_grade(const GradeOptions& o) {
    if (o.cleanup) {
        const auto removed = cleanup_leftovers();
        for (auto& r : removed) std::cout << "removed " << r << "\n";
        std::cout << "memwall grade --cleanup: " << removed.size() << " left-overs of earlier grades removed\n";
        return 0;
    }
    if (o.level.empty()) throw UsageError("give a level (01-vectorization, 01 or vectorization), or --cleanup");
    if (o.submission.empty()) throw UsageError("give the student's source file: --submission FILE");
    if (o.format != "text" && o.format != "json" && o.format != "gradescope")
        throw UsageError("unknown format '" + o.format + "'; valid formats: text, json, gradescope");
    if (!o.backend.empty() && !parse_backend(o.backend))
        throw UsageError("unknown backend '" + o.backend + "'; valid backends: " + join(all_backend_names()));
    const auto level = load_level(o.level);
    const Exercise& x = pick_exercise(level, o);
    const Backend b = pick_backend(x, o);
    check_withheld(x);
    if (o.submission.empty() || !fs::is_regular_file(o.submission))
        throw UsageError("submission '" + o.submission + "' is not a readable file");
    if (o.time_limit_s < 0) throw UsageError("--time-limit must be positive");
    try {
        timing_lock_wait_s(kTimingLockWaitS);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    if (!o.out.empty() && fs::is_directory(o.out)) throw UsageError("--out '" + o.out + "' is a directory");
    Seed seed = resolve_seed(o);
    seed.domain = x.level_id + "/" + x.id + (seed.kind == "secret" ? "/" + fresh_nonce() : "");

    harden_grader();
    start_guard();
    // Fresh inputs for every call, the same sizes each time: their pages
    // are reused instead of faulted in anew (memtrack.hpp). No timed code
    // runs in the grader's own process (both sides are called in workers).
    memtrack::keep_released_pages(std::size_t(2) << 30);
    const Sandbox sb = make_sandbox(o.unsafe_no_sandbox, x.allow_blas, b == Backend::cuda);
    const fs::path tmp = make_temp_dir();
    json doc;
    try {
        doc = grade(o, x, b, seed, tmp, sb);
    } catch (const std::exception& e) {
        doc = grader_failure(o, x, b, seed, sb, e.what());
    } catch (...) {
        doc = grader_failure(o, x, b, seed, sb, "an exception that is not a std::exception");
    }
    fs::remove_all(tmp);

    // The submission's bytes (compiler messages, its output, its exception
    // messages) are in the doc: every report gets invalid UTF-8 replaced and
    // every control character but newline and tab (C1 and bidirectional
    // controls too, which JSON would pass as they are) made visible.
    std::string text = o.format == "json"         ? printable_strings(doc).dump(2) + "\n"
                       : o.format == "gradescope" ? printable_strings(report_gradescope(doc)).dump(2) + "\n"
                                                  : printable(report_text(doc));
    if (o.out.empty()) {
        std::cout << text;
    } else {
        write_file_atomic(o.out, text);
        std::cerr << "memwall grade: score " << doc["score"].get<double>() << " / " << doc["max_score"].get<double>()
                  << "; report: " << o.out << "\n";
    }
    return doc.value("grader_error", false) ? 3 : 0;
}

}  // namespace mw::grade

MW_REGISTER_COMMAND(grade, [](CLI::App& app) -> mw::CommandAction {
    auto* sub = app.add_subcommand("grade", "Grade a student's exercise submission (correctness, then speed)");
    auto o = std::make_shared<mw::grade::GradeOptions>();
    sub->add_option("level", o->level, "Level: 01-vectorization, 01 or vectorization");
    sub->add_option("--submission", o->submission, "The student's source file");
    sub->add_option("--exercise", o->exercise, "Exercise id (default: from --backend or the file's extension)");
    sub->add_option("--seed", o->seed_text, "Public practice seed (default: a fresh random seed, printed)");
    sub->add_option("--secret-seed-file", o->secret_seed_file,
                    "Instructor's secret seed (a number or a passphrase); or set MEMWALL_GRADE_SECRET");
    sub->add_option("--format", o->format, "text, json or gradescope")->default_val("text");
    sub->add_option("--out", o->out, "Write the report here (atomically) instead of standard output");
    sub->add_option("--backend", o->backend, "cpu, cuda or cuda-emu (default: the exercise's; cuda-emu without a GPU)");
    sub->add_option("--time-limit", o->time_limit_s, "Seconds for all of the submission's calls (default: the level's)");
    sub->add_option("--threads", o->threads, "CPU threads for submission and reference (default: the level's)");
    sub->add_flag("--reference-solution", o->reference_solution,
                  "The instructor's reference solution: link every rung of the project (never for students)");
    sub->add_flag("--cleanup", o->cleanup,
                  "Remove what graders that were killed left behind (cgroups, temp folders), then exit");
    sub->add_flag("--unsafe-no-sandbox", o->unsafe_no_sandbox,
                  "Run the submission without bubblewrap (local practice only; the report says so)");
    return [o] { return mw::grade::run_grade(*o); };
});
