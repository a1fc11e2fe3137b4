#include "harness/timing.hpp"

#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <numeric>
#include <optional>
#include <sstream>
#include <vector>

#include "harness/memtrack.hpp"

namespace mw {

namespace {

using Clock = std::chrono::steady_clock;

void init_benchmark_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        static char arg0[] = "memwall";
        static char* argv[] = {arg0, nullptr};
        int argc = 1;
        benchmark::Initialize(&argc, argv);
    });
}

// Collects per-repetition times and forwards everything to Google Benchmark's
// JSON reporter, so its output stays usable by its own compare tool.
class CollectingReporter : public benchmark::BenchmarkReporter {
public:
    explicit CollectingReporter(std::ostream* json_out) {
        if (json_out) {
            json_.SetOutputStream(json_out);
            json_.SetErrorStream(&errors_);
        }
        forward_ = json_out != nullptr;
    }
    bool ReportContext(const Context& c) override { return forward_ ? json_.ReportContext(c) : true; }
    void ReportRuns(const std::vector<Run>& runs) override {
        for (auto& r : runs) {
            if (r.run_type != Run::RT_Iteration || r.error_occurred || r.iterations == 0) continue;
            per_call.push_back(r.real_accumulated_time / static_cast<double>(r.iterations));
            iterations = static_cast<int>(r.iterations);
        }
        if (forward_) json_.ReportRuns(runs);
    }
    void Finalize() override {
        if (forward_) json_.Finalize();
    }
    std::vector<double> per_call;
    int iterations = 0;

private:
    benchmark::JSONReporter json_;
    std::ostringstream errors_;
    bool forward_ = false;
};

std::size_t llc_bytes() {
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    long c = std::max(l3, l2);
    return c > 0 ? static_cast<std::size_t>(c) : (64u << 20);
}

// s with its sample statistics computed from `v` (seconds per call).
TimingStats with_samples(TimingStats s, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    s.per_call = v;
    s.samples = static_cast<int>(v.size());
    if (v.empty()) return s;
    s.min = v.front();
    s.max = v.back();
    s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    s.mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
    return s;
}

}  // namespace

TimingStats merge_timing(const TimingStats& a, const TimingStats& b) {
    std::vector<double> v = a.per_call;
    v.insert(v.end(), b.per_call.begin(), b.per_call.end());
    TimingStats s = a;
    s.iterations = std::max(a.iterations, b.iterations);
    s.disturbance = worse(a.disturbance, b.disturbance);
    s.quiet_wait = merge(a.quiet_wait, b.quiet_wait);
    s.round_best.insert(s.round_best.end(), b.round_best.begin(), b.round_best.end());
    s.batches = a.batches + b.batches;
    s.until_stable = a.until_stable || b.until_stable;
    s.stable = a.stable && b.stable;
    return with_samples(s, v);
}

namespace {

// Writes back and drops every line of [p, p + bytes) from every cache level
// (clflushopt where the CPU has it: it does not serialize like clflush).
__attribute__((target("clflushopt"))) void flush_lines_opt(const char* p, std::size_t bytes) {
    for (std::size_t i = 0; i < bytes; i += 64) _mm_clflushopt(const_cast<char*>(p + i));
}
void flush_lines(const char* p, std::size_t bytes) {
    static const bool opt = __builtin_cpu_supports("clflushopt");
    if (opt) return flush_lines_opt(p, bytes);
    for (std::size_t i = 0; i < bytes; i += 64) _mm_clflush(p + i);
}

}  // namespace

void evict_cpu_caches() {
    // Twice the LLC, capped: a VM may report a huge shared L3 of which only a
    // slice behaves as cache for us.
    static std::vector<char> junk(std::min<std::size_t>(2 * llc_bytes(), std::size_t(1) << 30), 1);
    volatile char sink = 0;
    const std::size_t lines = junk.size() / 64;
#pragma omp parallel
    {
        // Each thread its own contiguous share of the lines.
        const std::size_t t = std::size_t(omp_get_thread_num()), nt = std::size_t(omp_get_num_threads());
        const std::size_t lo = lines * t / nt, hi = lines * (t + 1) / nt;
        char s = 0;
        for (std::size_t i = lo * 64; i < hi * 64; i += 64) {
            junk[i] = static_cast<char>(junk[i] + 1);
            s = static_cast<char>(s + junk[i]);
        }
        sink = sink + s;
    }
    // Then every large buffer (Buffer::make's page mappings: a GEMV's
    // weights, a KV cache), line by line. Streaming junk alone does not
    // empty a large L3 that protects reused lines from a scan: on a Xeon
    // guest with a 260 MiB L3 an int4 GEMV's 35 MB of weights, read every
    // call, "streamed" after it faster than that guest's DRAM reads.
    const auto maps = memtrack::page_mappings();
#pragma omp parallel
    {
        const std::size_t t = std::size_t(omp_get_thread_num()), nt = std::size_t(omp_get_num_threads());
        for (const auto& [at, bytes] : maps) {
            const std::size_t lines = bytes / 64, lo = lines * t / nt, hi = lines * (t + 1) / nt;
            flush_lines(static_cast<const char*>(at) + lo * 64, (hi - lo) * 64);
        }
        _mm_sfence();
    }
}

double time_once(Instance& inst) {
    if (inst.device_time) return inst.device_time(false);
    auto t0 = Clock::now();
    inst.run();
    inst.sync();
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

TimingStats time_instance(const std::string& name, Instance& inst, const TimingOptions& opts,
                          std::string* gbench_json) {
    init_benchmark_once();
    // Warm-up: one call (page-faults, instruction cache, GPU clocks), and an
    // estimate to size batches and sample counts. A short call is timed up
    // to four times more and the quickest kept: beside a busy process one
    // preemption (a scheduler slice, milliseconds) in a 50 us call would
    // size the samples for a call 80 times longer, and the timed window
    // would be too short to judge the load (disturbance.hpp). Only where
    // the CPU's time is judged: not for a GPU's events nor cuda-emu's one
    // emulated call, and not on an MPI rank (its calls are collective, and
    // every rank must make as many).
    double est = time_once(inst);
    const bool retime = !inst.device_time && opts.judge_load && !inst.agree_estimate;
    for (int i = 0; i < 4 && retime && est < 0.01; ++i) est = std::min(est, time_once(inst));
    if (opts.estimate_s > 0) est = std::min(est, opts.estimate_s);
    est = std::max(est, 1e-9);
    if (inst.agree_estimate) est = inst.agree_estimate(est);  // MPI: every rank sizes its batches alike
    const int iters = opts.cold ? 1 : std::max(1, static_cast<int>(std::ceil(opts.min_sample_s / est)));
    const int samples = std::clamp(static_cast<int>(opts.budget_s / (est * iters)), opts.min_samples, opts.max_samples);

    auto body = [&inst, cold = opts.cold, &before = opts.before_call](benchmark::State& st) {
        for (auto _ : st) {
            double secs;
            if (inst.device_time) {
                secs = inst.device_time(cold);  // CUDA events; L2 flushed outside the events
            } else {
                if (before) before();
                if (cold) evict_cpu_caches();
                auto t0 = Clock::now();
                inst.run();
                inst.sync();
                secs = std::chrono::duration<double>(Clock::now() - t0).count();
            }
            st.SetIterationTime(secs);
        }
    };
    // One batch of `reps` samples through Google Benchmark; its own JSON
    // record (one per batch, the later ones named NAME/batch:K) joins
    // gbench_json's "benchmarks".
    std::vector<double> per_call;
    std::vector<std::string> gbench_docs;
    auto batch = [&](int reps, const std::string& bench_name) {
        benchmark::ClearRegisteredBenchmarks();
        benchmark::RegisterBenchmark(bench_name.c_str(), body)
            ->UseManualTime()
            ->Iterations(iters)
            ->Repetitions(reps)
            ->Unit(benchmark::kMillisecond);
        std::ostringstream json;
        CollectingReporter rep(gbench_json ? &json : nullptr);
        benchmark::RunSpecifiedBenchmarks(&rep);
        benchmark::ClearRegisteredBenchmarks();
        per_call.insert(per_call.end(), rep.per_call.begin(), rep.per_call.end());
        if (gbench_json) gbench_docs.push_back(json.str());
    };

    // The wait for a quiet machine (--wait-quiet), after the warm-up so
    // that the samples start right after it; only where load is judged, and
    // never on an MPI rank (each would wait on its own, and the first timed
    // call, collective, would hold the others' waits).
    QuietWait quiet;
    if (!inst.device_time && opts.judge_load && !inst.agree_estimate && opts.wait_quiet_s > 0)
        quiet = wait_for_quiet(opts.wait_quiet_s);

    // A GPU's time (CUDA events) is not the CPU's load to judge, nor is an
    // emulated call's (judge_load); an MPI rank's peers are other processes
    // by design, so its window measures steal and its own threads only.
    std::optional<DisturbanceWindow> window;
    if (!inst.device_time && opts.judge_load) window.emplace(!inst.agree_estimate);
    const auto first_start = Clock::now();
    batch(samples, name);
    const double batch_s = std::chrono::duration<double>(Clock::now() - first_start).count();
    TimingStats s;
    s.cold = opts.cold;
    s.iterations = iters;
    // Until stable (--until-stable S): batches of as many samples while one
    // still lowers the best by more than kStableShare, within S seconds
    // more. An MPI rank never does (its ranks must run the same batches).
    if (opts.until_stable_s > 0 && !inst.agree_estimate && !per_call.empty()) {
        const auto t0 = Clock::now();
        s.until_stable = true;
        s.stable = false;
        for (;;) {
            const double spent = std::chrono::duration<double>(Clock::now() - t0).count();
            if (spent + batch_s > opts.until_stable_s) break;
            const double before = *std::min_element(per_call.begin(), per_call.end());
            batch(samples, name + "/batch:" + std::to_string(s.batches + 1));
            ++s.batches;
            const double after = *std::min_element(per_call.begin(), per_call.end());
            if (after >= before * (1 - kStableShare)) {
                s.stable = true;
                break;
            }
        }
    }
    if (gbench_json && !gbench_docs.empty()) {
        *gbench_json = gbench_docs.front();
        if (gbench_docs.size() > 1) {
            nlohmann::json all = nlohmann::json::parse(gbench_docs.front(), nullptr, false);
            for (std::size_t i = 1; i < gbench_docs.size() && !all.is_discarded(); ++i) {
                const nlohmann::json more = nlohmann::json::parse(gbench_docs[i], nullptr, false);
                if (!more.is_discarded() && more.contains("benchmarks"))
                    for (const auto& b : more["benchmarks"]) all["benchmarks"].push_back(b);
            }
            if (!all.is_discarded()) *gbench_json = all.dump(2);
        }
    }
    if (window) s.disturbance = window->close();
    s.quiet_wait = quiet;
    s = with_samples(s, per_call);
    if (s.samples > 0) s.round_best = {s.min};
    return s;
}

double percentile(std::vector<double> v, double q, double empty) {
    if (v.empty()) return empty;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, std::size_t(q * double(v.size() - 1) + 0.5))];
}

}  // namespace mw
