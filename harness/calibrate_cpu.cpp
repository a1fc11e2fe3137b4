// `memwall calibrate` on the CPU: the roofs every variant is judged against.
//
//   DRAM      STREAM triad a[i] = b[i] + s*c[i] over arrays far larger than
//             any cache, 1..max_threads threads.
//   DRAM read a streaming sum over one array far larger than any cache (only
//             loads: the roof of ops that read much and write little, such
//             as a GEMV's weights), 1..max_threads threads.
//   caches    an in-place update a[i] += c swept over working sets from
//             16 KiB to 256 MiB, one thread and all threads; L1/L2/L3 plateaus
//             read at points chosen from the cache sizes the OS reports.
//   compute   chains of independent FMAs (fp32, fp64), bf16 dot products
//             (vdpbf16ps, where AVX512_BF16 is present) and VNNI dot products
//             (int8) with the widest SIMD present, 1 thread and all threads.
//
// Every figure is the best of N repetitions: on a shared VM the median
// wanders, the best stays put. The project is compiled without -march, so
// each kernel is compiled per ISA with one of harness/isa.hpp's MW_TARGET_*
// feature sets and picked at run time by that set's check (isa::has_*).
#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <new>
#include <string>

#include "harness/ceilings.hpp"
#include "harness/isa.hpp"
#include "harness/memtrack.hpp"
#include "harness/strings.hpp"

namespace mw {
namespace {

// ---------------------------------------------------------------- utilities

// Arrays on 2 MiB-aligned mappings advised as huge pages, as Buffer::make's
// large buffers are (harness/memtrack.hpp): the roofs are measured through
// the same pages the ops' buffers use.
struct PagesDeleter {
    std::size_t bytes = 0;
    void operator()(void* p) const { memtrack::release_pages(p, bytes); }
};
template <class T>
using AlignedArray = std::unique_ptr<T[], PagesDeleter>;

template <class T>
AlignedArray<T> alloc_aligned(size_t n) {
    const size_t bytes = n * sizeof(T);
    return AlignedArray<T>(static_cast<T*>(memtrack::allocate_pages(bytes)), PagesDeleter{bytes});
}

// Bytes of this process's memory the kernel has backed with huge pages
// (AnonHugePages of /proc/self/smaps_rollup); -1 where it cannot be read.
double anon_huge_bytes() {
    std::ifstream f("/proc/self/smaps_rollup");
    std::string key;
    double kib = 0;
    while (f >> key) {
        if (key == "AnonHugePages:") {
            f >> kib;
            return kib * 1024;
        }
        f.ignore(1 << 12, '\n');
    }
    return -1;
}

// [lo, hi) of thread t out of nt over n elements: the same split OpenMP's
// schedule(static) uses, so first touch and the timed loops agree on which
// thread owns (and, on NUMA machines, which node holds) each page.
void static_range(size_t n, int t, int nt, size_t& lo, size_t& hi) {
    size_t chunk = n / nt, rem = n % nt;
    lo = t * chunk + std::min<size_t>(t, rem);
    hi = lo + chunk + (size_t(t) < rem ? 1 : 0);
}

// Runs `body(thread, nthreads)` on nt threads `reps` times between barriers.
// span: best time from the first thread's start to the last one's end, what
// a shared resource (L3, DRAM) delivers to all threads at once.
// per_thread: each thread's own best time. For resources every core has to
// itself (FMA units, L1, L2) the sum of per-thread rates is what the cores
// deliver together, and it survives a shared machine where another process
// keeps taking one core away, which would ruin every concurrent span.
struct ParallelTimes {
    double span = 1e300;
    std::vector<double> per_thread;
    // Aggregate rate for `work` units per thread.
    double shared_rate(double work) const { return work * double(per_thread.size()) / span; }
    double private_rate(double work) const {
        double r = 0;
        for (double t : per_thread) r += work / t;
        return r;
    }
};

template <class Body>
ParallelTimes best_parallel_times(int nt, int reps, Body body) {
    ParallelTimes r;
    r.per_thread.assign(nt, 1e300);
    std::vector<double> start(nt), end(nt);
#pragma omp parallel num_threads(nt)
    {
        const int t = omp_get_thread_num();
        for (int rep = 0; rep < reps; ++rep) {
#pragma omp barrier
            start[t] = omp_get_wtime();
            body(t, nt);
            end[t] = omp_get_wtime();
            r.per_thread[t] = std::min(r.per_thread[t], end[t] - start[t]);
#pragma omp barrier
#pragma omp master
            r.span = std::min(r.span, *std::max_element(end.begin(), end.end()) -
                                          *std::min_element(start.begin(), start.end()));
        }
    }
    return r;
}

// AVX-512 kernels where the CPU has the project's AVX-512 set
// (isa::has_avx512), unless MEMWALL_ISA=avx2 asks for the AVX2 path (as every
// rung's dispatch does): then the peaks, the datapath line and the bandwidth
// kernels are the AVX2 ones.
bool has_avx512() { return !isa::avx2_forced() && isa::has_avx512(); }

// ---------------------------------------------------------------- DRAM triad
// STREAM convention: 24 bytes per element (read b, read c, write a). The
// write-allocate read of a that a cache actually does is NOT counted, so the
// bus moves ~32 bytes per element and the figure is comparable with STREAM's.

MW_TARGET_AVX512 void triad_avx512(double* __restrict a, const double* __restrict b,
                                                     const double* __restrict c, double s, size_t lo,
                                                     size_t hi) {
    for (size_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
}
void triad_generic(double* __restrict a, const double* __restrict b, const double* __restrict c, double s,
                   size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
}

// Bytes of DRAM array that leave the L3 far behind: at least `floor_mib`
// MiB, and at least 4x the L3 this machine reports (a 260 MiB L3 holds
// most of a 256 MiB array between passes, and the "DRAM" figure of such a
// read came out well above what a 1 GiB array reads on the same guest).
size_t beyond_l3(size_t floor_mib) {
    return std::max(floor_mib << 20, size_t(4 * std::max(0.0, cache_bytes(3))));
}

std::vector<double> measure_triad(int max_threads, bool quick) {
    // Full: 3 x 512 MiB; quick: 3 x 128 MiB; 3 arrays of 4x the L3 in all
    // where that is more.
    const size_t n = std::max((quick ? 128 : 512) * (size_t(1) << 20), beyond_l3(0) / 3) / sizeof(double);
    const int reps = quick ? 5 : 10;
    auto a = alloc_aligned<double>(n), b = alloc_aligned<double>(n), c = alloc_aligned<double>(n);
    auto triad = has_avx512() ? triad_avx512 : triad_generic;
#pragma omp parallel num_threads(max_threads)
    {
        size_t lo, hi;
        static_range(n, omp_get_thread_num(), omp_get_num_threads(), lo, hi);
        for (size_t i = lo; i < hi; ++i) a[i] = 0.0, b[i] = 1.0, c[i] = 2.0;
    }
    std::vector<double> gbps;
    for (int nt = 1; nt <= max_threads; ++nt) {
        auto t = best_parallel_times(nt, reps, [&](int tid, int tn) {
            size_t lo, hi;
            static_range(n, tid, tn, lo, hi);
            triad(a.get(), b.get(), c.get(), 3.0, lo, hi);
        });
        gbps.push_back(24.0 * double(n) / t.span / 1e9);  // DRAM is shared: concurrent span
    }
    return gbps;
}

// ---------------------------------------------------------------- DRAM read
// A sum over 4 bytes per float; eight independent accumulators so the adds
// never wait on each other, and no stores at all. Three access patterns, and
// the roof is the fastest (it is what read-dominated ops are judged by, so it
// must not be low; which one won is recorded):
//   streams   each thread reads its range as four concurrent streams (its
//             four quarters): more streams than one core's prefetcher
//             tracks alone, for machines where one stream leaves DRAM idle;
//   prefetch  one stream per thread with a software prefetch 16 KiB ahead
//             into L2 (prefetcht1), as the GEMV rungs at batch 8 do: it keeps
//             more lines in flight than L1's miss buffers hold (on the 2-core
//             Zen 4 guest it won on 2 MiB pages, four streams on 4 KiB ones);
//   one stream  one stream per thread, the hardware prefetchers alone, as
//             the GEMV rungs at batch 1 read: there, once their loops were
//             fast enough, it beat the software prefetch (8192^2 bf16 at
//             67 GB/s where the two patterns above read 39-58 in the same
//             run: a roof below what a rung reads).
constexpr size_t kReadPrefetchBytes = 16 << 10;

// The bandwidth kernels are written once for both ISAs, over V: 16 floats
// (one AVX-512 register) or 8 (one AVX2 register), compiled for each by
// isa::on_avx512 / isa::on_avx2 (harness/isa.hpp).
typedef float f32x16 __attribute__((vector_size(64), may_alias));
typedef float f32x8 __attribute__((vector_size(32), may_alias));
template <class V> constexpr size_t kLanes = sizeof(V) / sizeof(float);
// Aligned loads and stores: every thread's range starts on a 64-byte boundary.
template <class V> MW_SIMD_INLINE V load(const float* p) { return *reinterpret_cast<const V*>(p); }
template <class V> MW_SIMD_INLINE void store(float* p, V v) { *reinterpret_cast<V*>(p) = v; }
// The sum of 8 accumulators, lane by lane, through memory.
template <class V> MW_SIMD_INLINE float reduce(const V* s) {
    float lanes[kLanes<V>], t = 0;
    for (int k = 0; k < 8; ++k) {
        std::memcpy(lanes, &s[k], sizeof lanes);
        for (float f : lanes) t += f;
    }
    return t;
}

template <class V> MW_SIMD_INLINE float read_sum(const float* a, size_t lo, size_t hi) {
    constexpr size_t W = kLanes<V>;
    V s[8];
    for (auto& v : s) v = V{};
    const size_t q = (hi - lo) / 4 / (2 * W) * (2 * W);  // floats per stream, whole steps
    const float* p[4] = {a + lo, a + lo + q, a + lo + 2 * q, a + lo + 3 * q};
    for (size_t i = 0; i < q; i += 2 * W)
        for (int k = 0; k < 4; ++k) {
            s[2 * k] += load<V>(p[k] + i);
            s[2 * k + 1] += load<V>(p[k] + i + W);
        }
    float t = 0;
    for (size_t i = lo + 4 * q; i < hi; ++i) t += a[i];
    return t + reduce(s);
}
// One prefetcht1 per 64-byte line (every AVX-512 vector, every other AVX2
// one) where PF, else none.
template <class V, bool PF> MW_SIMD_INLINE float read_sum_one(const float* a, size_t lo, size_t hi) {
    constexpr size_t W = kLanes<V>;
    V s[8];
    for (auto& v : s) v = V{};
    const size_t n = (hi - lo) / (8 * W) * (8 * W);
    const float* p = a + lo;
    constexpr size_t ahead = kReadPrefetchBytes / sizeof(float);
    for (size_t i = 0; i < n; i += 8 * W)
        for (int k = 0; k < 8; ++k) {
            if (PF && k * sizeof(V) % 64 == 0) __builtin_prefetch(p + i + ahead + W * k, 0, 2);
            s[k] += load<V>(p + i + W * k);
        }
    float t = 0;
    for (size_t i = lo + n; i < hi; ++i) t += a[i];
    return t + reduce(s);
}

struct ReadPattern {
    const char* name;
    float (*sum)(const float*, size_t, size_t);
};
const std::array<ReadPattern, 3>& read_patterns() {
    static const std::array<ReadPattern, 3> patterns = [] {
        const bool w = has_avx512();
        return std::array<ReadPattern, 3>{
            {{"4 streams per thread", w ? isa::on_avx512<read_sum<f32x16>> : isa::on_avx2<read_sum<f32x8>>},
             {"1 stream per thread, software prefetch 16 KiB ahead into L2",
              w ? isa::on_avx512<read_sum_one<f32x16, true>> : isa::on_avx2<read_sum_one<f32x8, true>>},
             {"1 stream per thread, hardware prefetch only",
              w ? isa::on_avx512<read_sum_one<f32x16, false>> : isa::on_avx2<read_sum_one<f32x8, false>>}}};
    }();
    return patterns;
}

// The best of `reps` reads of a[0, n) by `nt` threads in pattern `pat`, in
// GB/s. 128-float aligned ranges per thread: every thread's loop is all
// vector loads.
double read_pass_gbps(const ReadPattern& pat, const float* a, size_t n, int nt, int reps) {
    static volatile float sink = 0;
    const size_t units = n / 128;
    auto t = best_parallel_times(nt, reps, [&](int tid, int tn) {
        size_t lo, hi;
        static_range(units, tid, tn, lo, hi);
        sink = sink + pat.sum(a, lo * 128, hi * 128);
    });
    return 4.0 * double(n) / t.span / 1e9;
}

// The read array, first touched in the all-threads pattern.
void fill_ones(float* a, size_t n, int threads) {
#pragma omp parallel num_threads(threads)
    {
        size_t lo, hi;
        static_range(n, omp_get_thread_num(), omp_get_num_threads(), lo, hi);
        for (size_t i = lo; i < hi; ++i) a[i] = 1.0f;
    }
}
AlignedArray<float> read_array(size_t n, int threads) {
    auto a = alloc_aligned<float>(n);
    fill_ones(a.get(), n, threads);
    return a;
}

struct ReadResult {
    std::vector<double> gbps;  // per thread count, the faster pattern's
    std::string method;        // the pattern behind the all-threads figure
    std::string pages;         // the pages the array sat on
};

ReadResult measure_read(int max_threads, bool quick) {
    // 1 GiB (quick: 256 MiB), or 4x the L3 where that is more: the same
    // "far beyond the L3" rule as the triad.
    const size_t n = beyond_l3(quick ? 256 : 1024) / sizeof(float);
    const int reps = quick ? 5 : 10;
    const double huge_before = anon_huge_bytes();
    const auto a = read_array(n, max_threads);
    ReadResult r;
    const double huge = anon_huge_bytes() - huge_before;
    char pages[160];
    if (huge_before < 0)
        std::snprintf(pages, sizeof pages, "huge pages advised (transparent huge pages: %s); grant unknown",
                      memtrack::transparent_hugepages());
    else
        std::snprintf(pages, sizeof pages, "%.0f of %.0f MiB on 2 MiB pages (transparent huge pages: %s%s)",
                      std::max(0.0, huge) / (1 << 20), 4.0 * double(n) / (1 << 20), memtrack::transparent_hugepages(),
                      memtrack::huge_pages_advised() ? "" : "; not advised: MEMWALL_HUGEPAGES=0");
    r.pages = pages;
    for (int nt = 1; nt <= max_threads; ++nt) {
        double best = 0;
        for (const auto& pat : read_patterns()) {
            const double g = read_pass_gbps(pat, a.get(), n, nt, reps);
            if (g > best) {
                best = g;
                if (nt == max_threads) r.method = pat.name;
            }
        }
        r.gbps.push_back(best);
    }
    return r;
}

// ---------------------------------------------------------------- cache sweep
// In-place update a[i] += c: one load and one store per element, counted as
// 8 bytes per float (read + write). Explicit vectors (V, as for the DRAM
// read) so the bandwidth is that of full-width loads and stores whatever the
// compiler flags.
template <class V> MW_SIMD_INLINE void update(float* a, size_t n, int passes) {
    constexpr size_t W = kLanes<V>;
    const V c = V{} + 1e-7f;
    for (int p = 0; p < passes; ++p) {
        size_t i = 0;
        for (; i + 4 * W <= n; i += 4 * W)
            for (size_t k = 0; k < 4; ++k) store(a + i + W * k, load<V>(a + i + W * k) + c);
        for (; i < n; ++i) a[i] += 1e-7f;
        asm volatile("" ::: "memory");  // keep the passes separate
    }
}
void update_generic(float* a, size_t n, int passes) {
    for (int p = 0; p < passes; ++p) {
        for (size_t i = 0; i < n; ++i) a[i] += 1e-7f;
        asm volatile("" ::: "memory");
    }
}

using UpdateFn = void (*)(float*, size_t, int);
UpdateFn pick_update() {
    if (has_avx512()) return isa::on_avx512<update<f32x16>>;
    return isa::has_avx2() ? isa::on_avx2<update<f32x8>> : update_generic;
}

// One point: nt threads each update their own slice of `ws` bytes in total.
// Slices start on 64-byte boundaries so the aligned loads are legal.
double sweep_point(float* buf, size_t ws, int nt, double l2_bytes, bool quick) {
    const size_t n = ws / sizeof(float);
    const size_t slice = (n / nt) / 16 * 16;
    // Enough passes that one sample moves ~16 MiB (well over 50 us even in
    // L1). Short samples, many of them: on a shared machine the best sample
    // is the one in which no other process took a core from us.
    const double target = 16.0 * (1 << 20);
    const int passes = std::max(1, int(target / double(ws)));
    // Beyond 32 MiB a sample is one long pass through DRAM-like memory:
    // fewer of them suffice and keep the sweep within budget.
    const bool big = ws > (size_t(32) << 20);
    const int reps = quick ? (big ? 3 : 5) : (big ? 5 : 9);
    auto update = pick_update();
    auto body = [&](int tid, int) { update(buf + tid * slice, slice, passes); };
    best_parallel_times(nt, 1, body);  // warm: pull the slice into the cache
    auto t = best_parallel_times(nt, reps, body);
    // A slice that fits the core's own L2 touches only private caches.
    const double bytes = 8.0 * double(slice) * passes;
    const bool private_level = l2_bytes > 0 && double(slice) * sizeof(float) <= l2_bytes;
    return (private_level ? t.private_rate(bytes) : t.shared_rate(bytes)) / 1e9;
}

// Grid points from 16 KiB to `grid_max` (four per octave, two when quick),
// then one point at `dram_ws`, beyond every cache, as the sweep's DRAM regime.
std::vector<BandwidthPoint> measure_sweep(float* buf, size_t grid_max, size_t dram_ws, int nt, double l2_bytes,
                                          bool quick) {
    std::vector<BandwidthPoint> pts;
    const double step = quick ? std::sqrt(2.0) : std::pow(2.0, 0.25);
    for (double ws = 16 * 1024; ws <= double(grid_max) * 1.0001; ws *= step) {
        size_t bytes = size_t(ws) / 1024 * 1024;
        pts.push_back({double(bytes), sweep_point(buf, bytes, nt, l2_bytes, quick)});
    }
    if (dram_ws > grid_max) pts.push_back({double(dram_ws), sweep_point(buf, dram_ws, nt, l2_bytes, quick)});
    return pts;
}

// ---------------------------------------------------------------- compute peaks
// acc = acc*x + y on 12 independent registers: an FMA has a latency of 4
// cycles and two ports issue one each per cycle, so >= 8 chains in flight
// keep both busy. x < 1 keeps the values bounded (no overflow, no
// denormals). The result is summed and returned so nothing can be elided.
// One template for fp32 and fp64 (T), AVX-512 and AVX2 (64- or 32-byte
// registers), compiled for its ISA by isa::on_avx512 / isa::on_avx2. AVX2 has
// 16 ymm registers: 12 chains plus x and y still fit.
// The FMA is the intrinsics' builtin, not a * x + y: GCC folds the latter
// where it can (a chain that starts at 1.0 stays at 1.0 and left the loop).
template <class V> MW_SIMD_INLINE V fmadd(V a, V x, V y) {
    constexpr bool f32 = sizeof(a[0]) == 4;
    if constexpr (sizeof(V) == 64 && f32) return __builtin_ia32_vfmaddps512_mask(a, x, y, -1, _MM_FROUND_CUR_DIRECTION);
    else if constexpr (sizeof(V) == 64) return __builtin_ia32_vfmaddpd512_mask(a, x, y, -1, _MM_FROUND_CUR_DIRECTION);
    else if constexpr (f32) return __builtin_ia32_vfmaddps256(a, x, y);
    else return __builtin_ia32_vfmaddpd256(a, x, y);
}
template <class T, int Bytes> MW_SIMD_INLINE double fma_chains(long iters) {
    typedef T V __attribute__((vector_size(Bytes)));
    const V x = V{} + T(0.999999), y = V{} + T(1e-6);
    V a[12];
    for (int j = 0; j < 12; ++j) a[j] = V{} + T(0.1) * T(j + 1);
    for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) a[j] = fmadd(a[j], x, y);
    }
    T lanes[Bytes / sizeof(T)], sum = 0;
    for (const V v : a) {
        std::memcpy(lanes, &v, sizeof lanes);
        for (T l : lanes) sum += l;
    }
    return sum;
}
constexpr auto fma_f32_avx512 = isa::on_avx512<fma_chains<float, 64>>;
constexpr auto fma_f64_avx512 = isa::on_avx512<fma_chains<double, 64>>;
constexpr auto fma_f32_avx2 = isa::on_avx2<fma_chains<float, 32>>;
constexpr auto fma_f64_avx2 = isa::on_avx2<fma_chains<double, 32>>;

// int8: vpdpbusd multiplies 64 u8 x s8 pairs and adds them in groups of four
// into 16 int32 lanes: 64 MACs = 128 ops per instruction (32 MACs for the
// 256-bit AVX-VNNI form). Wrap-around of the int32 sums is harmless here.
// One template for both widths, as fma_chains: the 512-bit form under
// AVX512-VNNI, the 256-bit one under AVX-VNNI (GCC names both builtins by
// their vector type). The lane type is a parameter because GCC drops a
// vector_size that depends on a template parameter from a non-dependent type.
template <class I, int Bytes> MW_SIMD_INLINE double dpbusd_chains(long iters) {
    typedef I V __attribute__((vector_size(Bytes)));
    constexpr int lanes_per_reg = Bytes / 4;
    const V u = V{} + I(0x03030303), s = V{} + I(0xfefefefe);  // every byte: 3 (u8) and -2 (s8)
    V a[12];
    for (int j = 0; j < 12; ++j) a[j] = V{} + I(j);
    for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) {
            if constexpr (Bytes == 64) a[j] = __builtin_ia32_vpdpbusd_v16si(a[j], u, s);
            else a[j] = __builtin_ia32_vpdpbusd_v8si(a[j], u, s);
        }
    }
    I lanes[lanes_per_reg];
    long sum = 0;
    for (const V v : a) {
        std::memcpy(lanes, &v, sizeof lanes);
        for (I l : lanes) sum += l;
    }
    return double(sum);
}
MW_TARGET_AVX512_VNNI double vnni_avx512(long iters) { return dpbusd_chains<int, 64>(iters); }
MW_TARGET_AVX2_VNNI double vnni_avx256(long iters) { return dpbusd_chains<int, 32>(iters); }

// bf16: vdpbf16ps multiplies 32 bf16 pairs and adds them in pairs into 16
// fp32 lanes: 32 multiply-adds = 64 FLOP per instruction, twice the fp32
// FMA's, if it issued as often; how often it issues differs by core (the
// Xeon of results/xeon-260m-kvm-2c: a quarter of the FMA's rate), so the
// peak is measured, never assumed.
// The inputs are small bf16 numbers so the chains neither overflow nor
// become denormal within a sample.
MW_TARGET_AVX512_BF16 double bf16_dot_avx512(long iters) {
    const __m512bh u = (__m512bh)_mm512_set1_epi16(0x3c00), v = (__m512bh)_mm512_set1_epi16(short(0xbc00));  // 2^-7, -2^-7
    __m512 a[12];
    for (int j = 0; j < 12; ++j) a[j] = _mm512_set1_ps(0.1f * float(j + 1));
    for (long i = 0; i < iters; ++i) {
#pragma GCC unroll 12
        for (int j = 0; j < 12; ++j) a[j] = _mm512_dpbf16_ps(a[j], u, v);
    }
    float lanes[16], sum = 0;
    for (int j = 0; j < 12; ++j) {
        _mm512_storeu_ps(lanes, a[j]);
        for (float x : lanes) sum += x;
    }
    return sum;
}

struct PeakKernel {
    std::string dtype, isa;
    double (*fn)(long);
    double ops_per_iter;  // per thread: 12 chains x lanes x 2 (multiply + add)
};

// The two that bf16_dot_over_fma() compares as well.
const PeakKernel kFmaF32Avx512{"fp32", "avx512f", fma_f32_avx512, 12 * 16 * 2};
const PeakKernel kBf16DotAvx512{"bf16", "avx512_bf16", bf16_dot_avx512, 12 * 32 * 2};

std::vector<PeakKernel> peak_kernels() {
    std::vector<PeakKernel> k;
    if (has_avx512()) {
        k.push_back(kFmaF32Avx512);
        k.push_back({"fp64", "avx512f", fma_f64_avx512, 12 * 8 * 2});
    } else if (isa::has_avx2()) {
        k.push_back({"fp32", "avx2+fma", fma_f32_avx2, 12 * 8 * 2});
        k.push_back({"fp64", "avx2+fma", fma_f64_avx2, 12 * 4 * 2});
    }
    if (has_avx512() && isa::has_avx512_bf16())
        k.push_back(kBf16DotAvx512);
    if (has_avx512() && isa::has_avx512_vnni())
        k.push_back({"int8", "avx512_vnni", vnni_avx512, 12 * 64 * 2});
    else if (isa::has_avx2_vnni())
        k.push_back({"int8", "avx_vnni", vnni_avx256, 12 * 32 * 2});
    return k;
}

volatile double g_sink;  // where the kernels' results go, so they are kept

double measure_peak(const PeakKernel& k, int nt, bool quick) {
    // Size the loop so that one sample takes ~1 ms: long beside the timer's
    // resolution, short beside a scheduler time slice, so that among many
    // samples some ran undisturbed even when other processes share the cores.
    const double target_s = 0.001;
    long iters = 1 << 16;
    for (;;) {
        double t = best_parallel_times(1, 1, [&](int, int) { g_sink = k.fn(iters); }).span;
        if (t > target_s / 4 || iters > (1L << 40)) {
            iters = long(double(iters) * target_s / std::max(t, 1e-9));
            break;
        }
        iters *= 4;
    }
    best_parallel_times(nt, 1, [&](int, int) { g_sink = k.fn(iters); });  // let the clock settle
    auto t = best_parallel_times(nt, quick ? 40 : 150, [&](int, int) { g_sink = k.fn(iters); });
    return t.private_rate(k.ops_per_iter * double(iters)) / 1e9;  // FMA units are per core
}

// ---------------------------------------------------------------- cache sizes

double parse_size(const std::string& s) {
    double v = std::atof(s.c_str());
    if (s.find('K') != std::string::npos) v *= 1024;
    if (s.find('M') != std::string::npos) v *= 1024 * 1024;
    return v;
}

// Bandwidth of the sweep point nearest (in log size) to `ws`.
const BandwidthPoint& nearest(const std::vector<BandwidthPoint>& pts, double ws) {
    return *std::min_element(pts.begin(), pts.end(), [&](auto& a, auto& b) {
        return std::abs(std::log(a.working_set_bytes / ws)) < std::abs(std::log(b.working_set_bytes / ws));
    });
}

// Plateaus from the all-threads sweep. L1 and L2: half the (aggregate) size,
// well inside the level. L3: four times the aggregate L2, capped at half the
// L3 the OS reports. A VM's L3 often behaves as cache for only a fraction of
// its nominal size, so the L3 counts as a level only if, in the one-thread
// sweep (the one other processes disturb least), its point beats the last
// (DRAM) point by 15%; else l3_gbps = 0 and `note` says why. Its value is the
// better of the all-threads point and the one-thread point at that size: all
// threads can do at least what one does, and on a busy machine the
// concurrent figure can come out lower.
void pick_plateaus(Ceilings& c) {
    const auto& all = c.cache_sweep_all;
    const auto& one = c.cache_sweep_1t;
    if (all.empty() || one.empty()) return;
    const double nt = c.threads;
    c.l1_ws_bytes = nearest(all, 0.5 * c.l1d_bytes * nt).working_set_bytes;
    c.l1_gbps = nearest(all, 0.5 * c.l1d_bytes * nt).gbps;
    c.l2_ws_bytes = nearest(all, 0.5 * c.l2_bytes * nt).working_set_bytes;
    c.l2_gbps = nearest(all, 0.5 * c.l2_bytes * nt).gbps;
    double l3_ws = 4.0 * c.l2_bytes * nt;
    if (c.l3_bytes > 0) l3_ws = std::min(l3_ws, 0.5 * c.l3_bytes);
    const auto& p3 = nearest(all, l3_ws);
    const double one_l3 = nearest(one, l3_ws).gbps, one_dram = one.back().gbps;
    c.l3_ws_bytes = p3.working_set_bytes;
    if (c.l3_bytes <= 0 || p3.working_set_bytes <= c.l2_ws_bytes || one_l3 < 1.15 * one_dram) {
        c.l3_gbps = 0;
        c.note = "L3 point (" + std::to_string(int(p3.working_set_bytes / (1 << 20))) +
                 " MiB) is within 15% of the DRAM point: L3 indistinguishable from DRAM";
    } else {
        c.l3_gbps = std::max(p3.gbps, one_l3);
    }
}

// A chain of dependent 64-bit adds, 8 per iteration: one cycle each, so
// adds / seconds is the clock (turbo included, as the kernels see it). Many
// short windows (about a millisecond each), the fastest kept: on a shared
// machine a window the scheduler interrupted reads as a slower clock, and
// with windows shorter than a time slice most of them run uninterrupted.
double measure_clock_ghz(bool quick) {
    const std::int64_t iters = 400'000;  // 3.2 M adds: ~1 ms at 3 GHz
    double best = 1e30;
    for (int rep = 0; rep < (quick ? 40 : 400); ++rep) {
        std::uint64_t x = std::uint64_t(rep);
        const double t0 = omp_get_wtime();
        for (std::int64_t i = 0; i < iters; ++i)
            asm volatile("add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
                         "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0"
                         : "+r"(x));
        best = std::min(best, omp_get_wtime() - t0);
    }
    return 8.0 * double(iters) / best / 1e9;
}

}  // namespace

// Size of the data (or unified) cache at `level` of cpu0, from sysfs; falls
// back to sysconf; 0 when neither knows.
double cache_bytes(int level) {
    for (int idx = 0; idx < 8; ++idx) {
        std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/";
        std::ifstream lv(dir + "level"), ty(dir + "type"), sz(dir + "size");
        int l = 0;
        std::string type, size;
        if (!(lv >> l) || !(ty >> type) || !(sz >> size)) continue;
        if (l == level && type != "Instruction") return parse_size(size);
    }
    long v = level == 1 ? sysconf(_SC_LEVEL1_DCACHE_SIZE)
             : level == 2 ? sysconf(_SC_LEVEL2_CACHE_SIZE)
                          : sysconf(_SC_LEVEL3_CACHE_SIZE);
    return v > 0 ? double(v) : 0.0;
}

double bf16_dot_over_fma() {
    static const double ratio = [] {
        // The CPU's features, not MEMWALL_ISA's choice: the answer is cached
        // for the process, and callers check the ISA they run themselves.
        if (!isa::has_avx512_bf16()) return 0.0;
        return measure_peak(kBf16DotAvx512, 1, true) / measure_peak(kFmaF32Avx512, 1, true);
    }();
    return ratio;
}

double measure_dram_read_gbps(int threads) {
    const ReadResult r = measure_read(threads, true);
    return r.gbps.empty() ? 0.0 : r.gbps.back();
}

// At most 1 GiB, as the eviction's array: a VM may report a huge shared L3.
ReadProber::ReadProber(int threads)
    : threads_(threads), n_(std::min(beyond_l3(256), std::size_t(1) << 30) / sizeof(float)) {
    const std::size_t huge = std::size_t(2) << 20, bytes = (n_ * sizeof(float) + huge - 1) / huge * huge;
    void* p = std::aligned_alloc(huge, bytes);
    if (!p) throw std::runtime_error("no memory for its " + std::to_string(bytes >> 20) + " MiB array");
    if (memtrack::huge_pages_advised()) madvise(p, bytes, MADV_HUGEPAGE);
    array_.reset(static_cast<float*>(p), [](float* q) { std::free(q); });
    fill_ones(array_.get(), n_, threads);
}

void ReadProber::pass() {
    const auto& patterns = read_patterns();
    // Each pattern in turn for the first passes, then the fastest so far:
    // all of them get a chance, the winner most of them.
    const std::size_t k = passes_ < 3 * int(patterns.size())
                              ? std::size_t(passes_) % patterns.size()
                              : std::size_t(std::max_element(best_.begin(), best_.end()) - best_.begin());
    best_[k] = std::max(best_[k], read_pass_gbps(patterns[k], array_.get(), n_, threads_, 1));
    ++passes_;
}

void ReadProber::reset() {
    best_ = {};
    passes_ = 0;
}

ReadProbe ReadProber::result() const { return {*std::max_element(best_.begin(), best_.end()), passes_}; }

Ceilings calibrate_cpu(int max_threads, bool quick) {
    const double t0 = omp_get_wtime();
    Ceilings c;
    c.source = quick ? "quick" : "measured";
    c.threads = std::max(1, max_threads);
    c.l1d_bytes = cache_bytes(1);
    c.l2_bytes = cache_bytes(2);
    c.l3_bytes = cache_bytes(3);

    c.dram_triad_gbps = measure_triad(c.threads, quick);
    {
        ReadResult r = measure_read(c.threads, quick);
        c.dram_read_by_threads_gbps = r.gbps;
        c.dram_read_method = r.method;
        c.dram_pages = r.pages;
    }

    // The sweep's last point must be DRAM: at least 256 MiB and twice the L3
    // the OS reports (a power of two), at most 1 GiB (512 MiB quick, to keep
    // test runs light). The grid stops at 256 MiB (64 MiB quick) and jumps
    // straight to that point.
    size_t max_ws = size_t(256) << 20;
    while (max_ws < 2 * c.l3_bytes && max_ws < (size_t(quick ? 512 : 1024) << 20)) max_ws *= 2;
    const size_t grid_max = std::min(max_ws, size_t(quick ? 64 : 256) << 20);
    auto buf = alloc_aligned<float>(max_ws / sizeof(float));
#pragma omp parallel num_threads(c.threads)
    {
        // First touch in the all-threads pattern: each thread's slice of the
        // largest working set is its own.
        size_t lo, hi;
        static_range(max_ws / sizeof(float), omp_get_thread_num(), omp_get_num_threads(), lo, hi);
        std::memset(buf.get() + lo, 0, (hi - lo) * sizeof(float));
    }
    c.cache_sweep_1t = measure_sweep(buf.get(), grid_max, max_ws, 1, c.l2_bytes, quick);
    c.cache_sweep_all =
        c.threads == 1 ? c.cache_sweep_1t : measure_sweep(buf.get(), grid_max, max_ws, c.threads, c.l2_bytes, quick);
    pick_plateaus(c);

    for (const auto& k : peak_kernels()) {
        for (int nt : {1, c.threads}) {
            c.peaks.push_back({k.dtype, k.isa, nt, measure_peak(k, nt, quick)});
            if (c.threads == 1) break;
        }
    }
    c.clock_ghz = measure_clock_ghz(quick);
    c.seconds = omp_get_wtime() - t0;
    return c;
}

// "f32" (the results' dtype names) and "fp32" (the ceilings') are the same roof.
static std::string canonical_dtype(const std::string& d) {
    if (d == "f32" || d == "float") return "fp32";
    if (d == "f64" || d == "double") return "fp64";
    if (d == "f16" || d == "half") return "fp16";
    if (d == "i8" || d == "s8" || d == "u8") return "int8";
    return d;
}

double peak_gflops(const Ceilings& c, const std::string& dtype) {
    const std::string want = canonical_dtype(dtype);
    double best = 0;
    for (const auto& p : c.peaks)
        if (canonical_dtype(p.dtype) == want) best = std::max(best, p.gflops);
    return best;
}

// The best triad figure over thread counts (normally the all-threads one).
double dram_gbps(const Ceilings& c) {
    double best = 0;
    for (double g : c.dram_triad_gbps) best = std::max(best, g);
    return best;
}

std::string fma_datapath(const Ceilings& c, double flops_per_cycle) {
    std::string isa;
    for (auto& p : c.peaks)
        if (p.dtype == "fp32" && p.threads == 1) isa = p.isa;
    const int bits = isa.find("avx512") != std::string::npos ? 512
                     : (isa.find("avx2") != std::string::npos || isa.find("fma") != std::string::npos) ? 256
                                                                                                         : 128;
    const double per_fma = 2.0 * bits / 32;                        // fp32 lanes x (multiply + add)
    const double r = std::round(flops_per_cycle / per_fma * 2) / 2;  // full-width FMAs a cycle, to a half
    std::string s = (r == 0.5 ? "half a" : fmt("%g", r)) + " " + std::to_string(bits) + "-bit FMA" +
                    (r > 1 ? "s" : "") + " per cycle per core";
    if (bits == 512 && r >= 1.75) s += " (two 512-bit FMA pipes, as on recent Xeons)";
    else if (bits == 512 && r >= 0.75) s += " (512-bit instructions on a 256-bit-wide datapath, as on AMD Zen 4)";
    else if (bits == 256 && r >= 1.75) s += " (two 256-bit FMA pipes)";
    return s;
}

double dram_read_gbps(const Ceilings& c) {
    double best = 0;
    for (double g : c.dram_read_by_threads_gbps) best = std::max(best, g);
    return best > 0 ? best : dram_gbps(c);
}

// ---------------------------------------------------------------- JSON

static nlohmann::json points_json(const std::vector<BandwidthPoint>& pts) {
    auto a = nlohmann::json::array();
    for (const auto& p : pts) a.push_back({{"working_set_bytes", p.working_set_bytes}, {"gbps", p.gbps}});
    return a;
}
static std::vector<BandwidthPoint> points_from(const nlohmann::json& j) {
    std::vector<BandwidthPoint> pts;
    for (const auto& p : j) pts.push_back({p.value("working_set_bytes", 0.0), p.value("gbps", 0.0)});
    return pts;
}
static nlohmann::json peaks_json(const std::vector<ComputePeak>& peaks) {
    auto a = nlohmann::json::array();
    for (const auto& p : peaks)
        a.push_back({{"dtype", p.dtype}, {"isa", p.isa}, {"threads", p.threads}, {"gflops", p.gflops}});
    return a;
}
static std::vector<ComputePeak> peaks_from(const nlohmann::json& j) {
    std::vector<ComputePeak> peaks;
    for (const auto& p : j)
        peaks.push_back({p.value("dtype", ""), p.value("isa", ""), p.value("threads", 1), p.value("gflops", 0.0)});
    return peaks;
}

nlohmann::json to_json(const Ceilings& c) {
    nlohmann::json j;
    j["source"] = c.source;
    j["threads"] = c.threads;
    j["seconds"] = c.seconds;
    j["dram_triad_gbps"] = c.dram_triad_gbps;
    j["dram_gbps"] = dram_gbps(c);
    j["dram_read_by_threads_gbps"] = c.dram_read_by_threads_gbps;
    j["dram_read_gbps"] = dram_read_gbps(c);
    if (!c.dram_read_method.empty()) j["dram_read_method"] = c.dram_read_method;
    if (!c.dram_pages.empty()) j["dram_pages"] = c.dram_pages;
    j["caches_bytes"] = {{"l1d", c.l1d_bytes}, {"l2", c.l2_bytes}, {"l3", c.l3_bytes}};
    j["l1_gbps"] = c.l1_gbps;
    j["l2_gbps"] = c.l2_gbps;
    j["l3_gbps"] = c.l3_gbps;
    j["plateau_ws_bytes"] = {{"l1", c.l1_ws_bytes}, {"l2", c.l2_ws_bytes}, {"l3", c.l3_ws_bytes}};
    j["note"] = c.note;
    j["cache_sweep_1t"] = points_json(c.cache_sweep_1t);
    j["cache_sweep_all"] = points_json(c.cache_sweep_all);
    j["peaks"] = peaks_json(c.peaks);
    if (c.clock_ghz > 0) j["clock_ghz"] = c.clock_ghz;
    if (!c.gpu_name.empty()) {
        j["gpu"] = {{"name", c.gpu_name},
                    {"dram_gbps", c.gpu_dram_gbps},
                    {"l2_gbps", c.gpu_l2_gbps},
                    {"peaks", peaks_json(c.gpu_peaks)}};
    }
    return j;
}

Ceilings ceilings_from_json(const nlohmann::json& j) {
    Ceilings c;
    if (!j.is_object()) return c;
    c.source = j.value("source", "");
    c.threads = j.value("threads", 0);
    c.seconds = j.value("seconds", 0.0);
    c.dram_triad_gbps = j.value("dram_triad_gbps", std::vector<double>{});
    c.dram_read_by_threads_gbps = j.value("dram_read_by_threads_gbps", std::vector<double>{});
    c.dram_read_method = j.value("dram_read_method", "");
    c.dram_pages = j.value("dram_pages", "");
    if (j.contains("caches_bytes")) {
        const auto& s = j["caches_bytes"];
        c.l1d_bytes = s.value("l1d", 0.0), c.l2_bytes = s.value("l2", 0.0), c.l3_bytes = s.value("l3", 0.0);
    }
    c.l1_gbps = j.value("l1_gbps", 0.0);
    c.l2_gbps = j.value("l2_gbps", 0.0);
    c.l3_gbps = j.value("l3_gbps", 0.0);
    if (j.contains("plateau_ws_bytes")) {
        const auto& s = j["plateau_ws_bytes"];
        c.l1_ws_bytes = s.value("l1", 0.0), c.l2_ws_bytes = s.value("l2", 0.0), c.l3_ws_bytes = s.value("l3", 0.0);
    }
    c.note = j.value("note", "");
    if (j.contains("cache_sweep_1t")) c.cache_sweep_1t = points_from(j["cache_sweep_1t"]);
    if (j.contains("cache_sweep_all")) c.cache_sweep_all = points_from(j["cache_sweep_all"]);
    if (j.contains("peaks")) c.peaks = peaks_from(j["peaks"]);
    c.clock_ghz = j.value("clock_ghz", 0.0);
    if (j.contains("gpu")) {
        const auto& g = j["gpu"];
        c.gpu_name = g.value("name", "");
        c.gpu_dram_gbps = g.value("dram_gbps", 0.0);
        c.gpu_l2_gbps = g.value("l2_gbps", 0.0);
        if (g.contains("peaks")) c.gpu_peaks = peaks_from(g["peaks"]);
    }
    return c;
}

}  // namespace mw
