// cuda-emu: the block scheduler -- one fiber per CUDA thread, real barriers,
// warp-synchronous primitives, and the checks that turn a CUDA rule broken
// into a LaunchError naming the kernel, the block and the thread.
//
// A block runs on one OS thread. Fibers start in thread order and each runs
// until it reaches __syncthreads, a warp primitive, or its end; the
// scheduler then moves to the next ready fiber. This order is deterministic:
// a kernel that forgets a barrier lets thread 0 read shared memory its
// neighbours have not written yet, and the poison (0xFF bytes, NaN as float)
// makes the result visibly wrong on every run.
//
// Context switches use Boost.Context's fcontext (about 30 ns a switch); the
// Boost.Fiber scheduler measured ~9x slower. Under AddressSanitizer every
// switch is announced with __sanitizer_{start,finish}_switch_fiber, because
// the Debian Boost.Context is not built with its own ASan annotations.
#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/detail/fcontext.hpp>
#include <algorithm>
#include <cstring>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "harness/emu/cuda_emu.hpp"
#include "harness/emu/emu_internal.hpp"
#include "harness/strings.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define MW_EMU_ASAN 1
#else
#define MW_EMU_ASAN 0
#endif

namespace mw::emu::detail {

__thread const ThreadCoords* tl_coords = nullptr;

namespace {

namespace fc = boost::context::detail;

enum class State : unsigned char { ready, at_barrier, at_warp, done };

// Thrown into a suspended fiber to unwind its stack when the launch aborts.
// Not derived from std::exception so kernel code cannot swallow it.
struct Unwind {};

struct Fiber {
    fc::fcontext_t ctx = nullptr;
    char* stack_lo = nullptr;
    ThreadCoords coords{};
    int tid = 0;  // linear thread index in the block
    State state = State::ready;
    bool abort = false;
    bool started = false;  // has frames on its stack that an abort must unwind
    // ASan: frames below the top of its stack may have been abandoned
    // (new pages, or its last block did not end normally): the next block
    // unpoisons the whole stack, not only the top.
    bool deep_dirty = true;
    std::source_location site;  // where it waits
    WarpOp op = WarpOp::sync;
    unsigned mask = 0;
    std::uint64_t value = 0, result = 0;
    int arg = 0, width = 32;
    void* asan_fake = nullptr;
    // cp.async copies issued and not yet complete: their bytes (read at
    // issue), where they go, and their group (the count of commits before).
    struct AsyncCopy {
        unsigned char* dst;
        unsigned char bytes[16];
        int size;
        int group;
    };
    std::vector<AsyncCopy> async;
    int commits = 0;
};

// Fiber stacks of one worker: allocated once, reused by every block, each
// with a PROT_NONE guard page below it so an overflow faults instead of
// silently corrupting the neighbouring fiber.
struct StackArena {
    char* base = nullptr;
    std::size_t count = 0, stride = 0, bytes = 0;

    ~StackArena() { release(); }
    void release() {
#if MW_EMU_ASAN
        // The fibers' frames left redzones in ASan's shadow of these pages; a
        // later mapping at the same addresses (the ELF file symbols.cpp reads)
        // would inherit them and report its reads as stack-buffer-underflows.
        if (base) __asan_unpoison_memory_region(base, count * stride);
#endif
        if (base) ::munmap(base, count * stride);
        base = nullptr;
        count = 0;
    }
    // True when it mapped new stacks.
    bool reserve(std::size_t n, std::size_t stack_bytes) {
        if (n <= count && stack_bytes == bytes) return false;
        release();
        const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
        bytes = stack_bytes;
        stride = stack_bytes + page;
        void* p = ::mmap(nullptr, n * stride, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        base = static_cast<char*>(p);
        count = n;
        for (std::size_t i = 0; i < n; ++i)
            if (::mprotect(base + i * stride, page, PROT_NONE) != 0) break;  // out of mappings: run unguarded
        return true;
    }
    char* lo(std::size_t i) const { return base + i * stride + (stride - bytes); }
};

std::size_t stack_bytes() {
    static const std::size_t bytes = [] {
        std::size_t kb = MW_EMU_ASAN ? 256 : 64;  // printf alone needs ~8 KB; ASan frames are fatter
        if (const char* e = std::getenv("MEMWALL_EMU_STACK_KB")) kb = std::max<std::size_t>(16, std::strtoul(e, nullptr, 10));
        return kb * 1024;
    }();
    return bytes;
}

struct AlignedDelete {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{128}); }
};

// Everything one worker thread needs to run blocks; lives as long as the thread.
struct Worker {
    StackArena stacks;
    std::vector<Fiber> fibers;
    std::vector<unsigned> warp_arrived;
    std::vector<int> ready;
    std::size_t ready_head = 0;
    // One exact-size allocation per launch, so ASan flags any access past
    // smem_bytes.
    std::unique_ptr<std::byte[], AlignedDelete> dyn_smem;
    std::size_t dyn_bytes = 0;

    const LaunchSpec* spec = nullptr;
    const KernelInfo* info = nullptr;
    int n = 0;
    int done = 0;
    int barrier_arrived = 0, barrier_acc = 0, barrier_mode = 0, barrier_result = 0;
    std::source_location barrier_site;
    Fiber* current = nullptr;
    bool aborting = false;
    std::string error;  // first fault seen in this block

    fc::fcontext_t sched_ctx = nullptr;
    const void* sched_stack_lo = nullptr;
    std::size_t sched_stack_size = 0;
};

thread_local Worker* tl_worker = nullptr;

Worker& worker_state() {
    thread_local Worker w;
    return w;
}

// --- messages ------------------------------------------------------------------------
std::string coords(const uint3& v) { return fmt("(%u,%u,%u)", v.x, v.y, v.z); }
std::string where(const std::source_location& l) {
    std::string file = l.file_name();
    return file + ":" + std::to_string(l.line());
}
std::string thread_name(const Fiber& f) {
    return "thread " + coords(f.coords.thread_idx) + " (warp " + std::to_string(f.tid / 32) + ", lane " +
           std::to_string(f.tid % 32) + ")";
}
const char* op_name(WarpOp op) {
    switch (op) {
        case WarpOp::shfl_idx: return "__shfl_sync";
        case WarpOp::shfl_up: return "__shfl_up_sync";
        case WarpOp::shfl_down: return "__shfl_down_sync";
        case WarpOp::shfl_xor: return "__shfl_xor_sync";
        case WarpOp::ballot: return "__ballot_sync";
        case WarpOp::any: return "__any_sync";
        case WarpOp::all: return "__all_sync";
        case WarpOp::sync: return "__syncwarp";
        case WarpOp::reduce_add: return "__reduce_add_sync";
        case WarpOp::reduce_min: return "__reduce_min_sync";
        case WarpOp::reduce_max: return "__reduce_max_sync";
        case WarpOp::reduce_and: return "__reduce_and_sync";
        case WarpOp::reduce_or: return "__reduce_or_sync";
        case WarpOp::reduce_xor: return "__reduce_xor_sync";
    }
    return "warp primitive";
}
std::string hex(unsigned m) { return fmt("0x%08x", m); }
std::string state_name(const Fiber& f) {
    switch (f.state) {
        case State::done: return "has exited";
        case State::at_barrier: return "waits at __syncthreads at " + where(f.site);
        case State::at_warp: return std::string("waits at ") + op_name(f.op) + " with mask " + hex(f.mask) + " at " + where(f.site);
        case State::ready: return "is running";
    }
    return "?";
}

// Records the block's first fault; the scheduler aborts the block after the
// current fiber yields.
void fail(Worker& w, const Fiber& f, const std::string& what) {
    if (!w.error.empty() || w.aborting) return;
    w.error = "cuda-emu: kernel " + w.info->name + ", block " + coords(f.coords.block_idx) + ", " + thread_name(f) +
              ": " + what;
}

// --- context switches ------------------------------------------------------------------
void fiber_entry(fc::transfer_t t);

void resume(Worker& w, Fiber& f) {
    f.started = true;
    w.current = &f;
    tl_coords = &f.coords;
#if MW_EMU_ASAN
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, f.stack_lo, w.stacks.bytes);
#endif
    fc::transfer_t t = fc::jump_fcontext(f.ctx, &f);
#if MW_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    f.ctx = t.fctx;
    w.current = nullptr;
    tl_coords = nullptr;
}

// Suspends the calling fiber; throws Unwind when the launch is aborting.
void yield(Worker& w, Fiber& f) {
#if MW_EMU_ASAN
    __sanitizer_start_switch_fiber(&f.asan_fake, w.sched_stack_lo, w.sched_stack_size);
#endif
    fc::transfer_t t = fc::jump_fcontext(w.sched_ctx, nullptr);
    w.sched_ctx = t.fctx;
#if MW_EMU_ASAN
    __sanitizer_finish_switch_fiber(f.asan_fake, &w.sched_stack_lo, &w.sched_stack_size);
#endif
    if (f.abort) throw Unwind{};
}

void on_exit(Worker& w, Fiber& f) {
    f.state = State::done;
    ++w.done;
    if (w.barrier_arrived > 0)
        fail(w, f, "divergent __syncthreads: this thread exited while other threads of the block wait at __syncthreads at " +
                       where(w.barrier_site) + " (every thread of a block must reach every barrier)");
}

void fiber_entry(fc::transfer_t t) {
    Fiber& f = *static_cast<Fiber*>(t.data);
    Worker& w = *tl_worker;
    w.sched_ctx = t.fctx;
#if MW_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &w.sched_stack_lo, &w.sched_stack_size);
#endif
    try {
        w.spec->thunk(w.spec->kernel, w.spec->data);
    } catch (const Unwind&) {
    } catch (const std::exception& e) {
        fail(w, f, std::string("exception thrown in the kernel: ") + e.what());
    } catch (...) {
        fail(w, f, "unknown exception thrown in the kernel");
    }
    on_exit(w, f);
#if MW_EMU_ASAN
    __sanitizer_start_switch_fiber(nullptr, w.sched_stack_lo, w.sched_stack_size);  // this stack is finished
#endif
    fc::jump_fcontext(w.sched_ctx, nullptr);
    __builtin_unreachable();
}

Worker& current_worker(const char* what) {
    Worker* w = tl_worker;
    if (!w || !w->current)
        throw LaunchError(std::string("cuda-emu: ") + what + " called outside a kernel launched with mw::launch");
    return *w;
}

void make_ready(Worker& w, Fiber& f) {
    f.state = State::ready;
    w.ready.push_back(f.tid);
}

// --- warp primitives ---------------------------------------------------------------
// Source lane of a shuffle, as PTX's shfl.sync computes it: lanes are split
// into segments of `width`; a source outside the caller's segment (or, for
// idx, wrapped into it) returns the caller's own value.
int shfl_source(WarpOp op, int lane, int arg, int width) {
    const int segmask = (32 - width) & 31;
    const int clamp = op == WarpOp::shfl_up ? 0 : 31;
    const int max_lane = (lane & segmask) | (clamp & ~segmask);
    const int min_lane = lane & segmask;
    int j = lane;
    bool ok = false;
    switch (op) {
        case WarpOp::shfl_idx: j = min_lane | (arg & 31 & ~segmask); ok = j <= max_lane; break;
        case WarpOp::shfl_up: j = lane - arg; ok = j >= max_lane; break;
        case WarpOp::shfl_down: j = lane + arg; ok = j <= max_lane; break;
        case WarpOp::shfl_xor: j = lane ^ arg; ok = j <= max_lane; break;
        default: break;
    }
    return ok ? j : lane;
}

template <class T> std::uint64_t reduce_lanes(Fiber* lanes, unsigned mask, WarpOp op) {
    bool first = true;
    T acc{};
    for (int l = 0; l < 32; ++l) {
        if (!(mask >> l & 1)) continue;
        T v = from_bits<T>(lanes[l].value);
        if (first) { acc = v; first = false; continue; }
        switch (op) {
            case WarpOp::reduce_add: acc = static_cast<T>(acc + v); break;
            case WarpOp::reduce_min: acc = std::min(acc, v); break;
            case WarpOp::reduce_max: acc = std::max(acc, v); break;
            case WarpOp::reduce_and: acc = acc & v; break;
            case WarpOp::reduce_or: acc = acc | v; break;
            case WarpOp::reduce_xor: acc = acc ^ v; break;
            default: break;
        }
    }
    return to_bits(acc);
}

// Every lane named in `mask` has arrived with the same mask and operation.
void resolve_warp(Worker& w, int warp, unsigned mask) {
    Fiber* lanes = &w.fibers[static_cast<std::size_t>(warp) * 32];
    const WarpOp op = lanes[__builtin_ctz(mask)].op;
    unsigned votes = 0;
    for (int l = 0; l < 32; ++l)
        if (mask >> l & 1 && lanes[l].value) votes |= 1u << l;
    std::uint64_t reduced = 0;
    if (op >= WarpOp::reduce_add) {
        bool is_signed = lanes[__builtin_ctz(mask)].arg != 0;
        reduced = is_signed ? reduce_lanes<int>(lanes, mask, op) : reduce_lanes<unsigned>(lanes, mask, op);
    }
    for (int l = 0; l < 32; ++l) {
        if (!(mask >> l & 1)) continue;
        Fiber& f = lanes[l];
        switch (op) {
            case WarpOp::shfl_idx:
            case WarpOp::shfl_up:
            case WarpOp::shfl_down:
            case WarpOp::shfl_xor: {
                int src = shfl_source(op, l, f.arg, f.width);
                if (!(mask >> src & 1))
                    fail(w, f, std::string(op_name(op)) + " at " + where(f.site) + " reads lane " + std::to_string(src) +
                                   ", which is not in its mask " + hex(mask) + " (undefined on a GPU)");
                f.result = lanes[src].value;
                break;
            }
            case WarpOp::ballot: f.result = votes; break;
            case WarpOp::any: f.result = votes != 0; break;
            case WarpOp::all: f.result = votes == mask; break;
            case WarpOp::sync: f.result = 0; break;
            default: f.result = reduced; break;
        }
    }
    w.warp_arrived[static_cast<std::size_t>(warp)] &= ~mask;
    for (int l = 0; l < 32; ++l)
        if (mask >> l & 1) make_ready(w, lanes[l]);
}

unsigned lanes_in_warp(const Worker& w, int warp) {
    int n = std::min(32, w.n - warp * 32);
    return n == 32 ? ~0u : (1u << n) - 1;
}

// Checks the arriving lane's mask against its warp; returns false on a fault.
// Every lane of every warp primitive arrives here (millions of times a
// decode step): the message is made only for a fault.
bool check_warp_arrival(Worker& w, Fiber& f, int warp, int lane) {
    const unsigned mask = f.mask;
    const auto call = [&] { return std::string(op_name(f.op)) + " at " + where(f.site) + " with mask " + hex(mask); };
    if (!(mask >> lane & 1)) {
        fail(w, f, call() + " does not include the calling lane " + std::to_string(lane));
        return false;
    }
    if (mask & ~lanes_in_warp(w, warp)) {
        fail(w, f, call() + " names lanes that do not exist: this warp has only " +
                       std::to_string(__builtin_popcount(lanes_in_warp(w, warp))) + " threads");
        return false;
    }
    if (f.width < 1 || f.width > 32 || (f.width & (f.width - 1))) {
        fail(w, f, call() + ": width " + std::to_string(f.width) + " is not a power of two in [1, 32]");
        return false;
    }
    Fiber* lanes = &w.fibers[static_cast<std::size_t>(warp) * 32];
    for (int l = 0; l < 32; ++l) {
        if (!(mask >> l & 1) || l == lane) continue;
        const Fiber& g = lanes[l];
        if (g.state == State::done) {
            fail(w, f, call() + ": lane " + std::to_string(l) + " named in the mask has already exited");
            return false;
        }
        if (g.state == State::at_warp && (g.mask != mask || g.op != f.op)) {
            fail(w, f, call() + " does not match lane " + std::to_string(l) + ", which " + state_name(g));
            return false;
        }
    }
    return true;
}

// --- a block -------------------------------------------------------------------------
void poison_shared(Worker& w) {
    for (const SharedArray& a : w.info->shared)
        if (char* tls = tls_block(a.tls_module)) std::memset(tls + a.offset, 0xff, a.size);
    if (w.dyn_smem) std::memset(w.dyn_smem.get(), 0xff, w.spec->smem_bytes);
}

void abort_block(Worker& w) {
    w.aborting = true;
    for (Fiber& f : w.fibers) {
        if (static_cast<int>(&f - w.fibers.data()) >= w.n) break;
        if (f.started && f.state != State::done) {
            f.abort = true;
            resume(w, f);  // it throws Unwind from yield() and runs to its end
        }
    }
    w.aborting = false;
}

// Nothing can run but the block has not finished: name a thread that waits
// and the one it waits for.
std::string diagnose(Worker& w) {
    for (int i = 0; i < w.n; ++i) {
        Fiber& f = w.fibers[static_cast<std::size_t>(i)];
        if (f.state != State::at_warp) continue;
        Fiber* lanes = &w.fibers[static_cast<std::size_t>(i / 32) * 32];
        for (int l = 0; l < 32; ++l) {
            if (!(f.mask >> l & 1)) continue;
            Fiber& g = lanes[l];
            if (g.state == State::at_warp && g.mask == f.mask && g.op == f.op) continue;
            fail(w, f, std::string("deadlock: ") + op_name(f.op) + " at " + where(f.site) + " with mask " + hex(f.mask) +
                           " never completes because lane " + std::to_string(l) + " " + state_name(g));
            return w.error;
        }
    }
    for (int i = 0; i < w.n; ++i) {
        Fiber& f = w.fibers[static_cast<std::size_t>(i)];
        if (f.state == State::at_barrier) {
            for (int j = 0; j < w.n; ++j) {
                Fiber& g = w.fibers[static_cast<std::size_t>(j)];
                if (g.state != State::at_barrier) {
                    fail(w, f, "deadlock: waits at __syncthreads at " + where(f.site) + " while " + thread_name(g) + " " +
                                   state_name(g));
                    return w.error;
                }
            }
        }
    }
    fail(w, w.fibers[0], "deadlock: no thread can make progress");
    return w.error;
}

void run_block(Worker& w, unsigned long long linear) {
    const LaunchSpec& s = *w.spec;
    const uint3 bidx{static_cast<unsigned>(linear % s.grid.x), static_cast<unsigned>(linear / s.grid.x % s.grid.y),
                     static_cast<unsigned>(linear / s.grid.x / s.grid.y)};
    poison_shared(w);
    w.ready.clear();
    w.ready_head = 0;
    std::fill(w.warp_arrived.begin(), w.warp_arrived.end(), 0u);
    w.done = w.barrier_arrived = 0;
    w.error.clear();
    for (int i = 0; i < w.n; ++i) {
        Fiber& f = w.fibers[static_cast<std::size_t>(i)];
        const unsigned u = static_cast<unsigned>(i);
        f.coords = {uint3{u % s.block.x, u / s.block.x % s.block.y, u / s.block.x / s.block.y}, bidx, s.block, s.grid};
        f.tid = i;
        f.abort = false;
        f.started = false;
        f.async.clear();  // shared memory is the block's: copies still in flight die with it
        f.commits = 0;
        f.stack_lo = w.stacks.lo(static_cast<std::size_t>(i));
#if MW_EMU_ASAN
        // Frames abandoned by the previous block's fibers leave poisoned
        // redzones. A fiber that ran to its end abandoned only fiber_entry's
        // frame, at the top of its stack (every deeper frame returned and
        // cleared its own); after a block that did not end normally, or on
        // new pages, any depth is suspect (Fiber::deep_dirty).
        // (The whole 256 KiB of every fiber of every block was ~1 s of
        // shadow writes per emulated decode step.)
        const std::size_t dirty = f.deep_dirty ? w.stacks.bytes : std::min<std::size_t>(w.stacks.bytes, 32 * 1024);
        __asan_unpoison_memory_region(f.stack_lo + (w.stacks.bytes - dirty), dirty);
#endif
        f.deep_dirty = true;  // until this block ends normally
        f.ctx = fc::make_fcontext(f.stack_lo + w.stacks.bytes, w.stacks.bytes, fiber_entry);
        make_ready(w, f);
    }
    while (true) {
        while (w.ready_head < w.ready.size() && w.error.empty())
            resume(w, w.fibers[static_cast<std::size_t>(w.ready[w.ready_head++])]);
        if (w.error.empty() && w.done == w.n) {
            for (int i = 0; i < w.n; ++i) w.fibers[static_cast<std::size_t>(i)].deep_dirty = false;
            return;
        }
        if (w.error.empty()) diagnose(w);
        std::string msg = w.error;
        abort_block(w);
        throw LaunchError(msg);
    }
}

// --- worker pool ----------------------------------------------------------------------
// Persistent threads, so each keeps its fiber stacks (and its thread_local
// copies of the __shared__ arrays) from one launch to the next.
struct Pool {
    std::mutex m;
    std::condition_variable start, finished;
    std::vector<std::thread> threads;
    const std::function<void()>* job = nullptr;
    unsigned long long generation = 0;
    int wanted = 0, taken = 0, running = 0;

    void loop() {
        unsigned long long seen = 0;
        std::unique_lock lk(m);
        while (true) {
            start.wait(lk, [&] { return generation != seen; });
            seen = generation;
            if (taken >= wanted) continue;
            ++taken;
            const auto* fn = job;
            lk.unlock();
            (*fn)();
            lk.lock();
            if (--running == 0) finished.notify_all();
        }
    }

    // Runs fn on the calling thread and on `extra` pool threads; waits for all.
    void run(const std::function<void()>& fn, int extra) {
        {
            std::lock_guard lk(m);
            while (static_cast<int>(threads.size()) < extra) {
                threads.emplace_back([this] { loop(); });
                threads.back().detach();
            }
            job = &fn;
            ++generation;
            wanted = running = extra;
            taken = 0;
        }
        start.notify_all();
        fn();
        std::unique_lock lk(m);
        finished.wait(lk, [&] { return running == 0; });
        job = nullptr;
    }
};

Pool& pool() {
    static Pool* p = new Pool;  // never destroyed: detached threads may outlive static destructors
    return *p;
}

std::atomic<int> g_workers{0};

void validate(const LaunchSpec& s, const KernelInfo& info) {
    auto bad = [&](const std::string& why) {
        throw LaunchError("cuda-emu: kernel " + info.name + ": invalid launch configuration: " + why);
    };
    const unsigned long long threads = 1ull * s.block.x * s.block.y * s.block.z;
    if (s.grid.x == 0 || s.grid.y == 0 || s.grid.z == 0 || threads == 0) bad("a grid or block dimension is 0");
    if (threads > 1024) bad(std::to_string(threads) + " threads per block (at most 1024)");
    if (s.block.z > 64) bad("blockDim.z " + std::to_string(s.block.z) + " (at most 64)");
    if (s.grid.y > 65535 || s.grid.z > 65535) bad("gridDim.y and gridDim.z are at most 65535");
    if (!info.ambiguous.empty())
        bad("its static __shared__ array '" +
            (info.ambiguous.rfind("::") == std::string::npos ? info.ambiguous
                                                            : info.ambiguous.substr(info.ambiguous.rfind("::") + 2)) +
            "'" +
            " has several copies in the symbol table and no file symbol says which is this object's (a binary "
            "stripped with --strip-debug: add --keep-file-symbols)");
    std::size_t static_bytes = 0;
    for (const SharedArray& a : info.shared) static_bytes += a.size;
    if (static_bytes > 48 * 1024)
        bad(std::to_string(static_bytes) + " bytes of static __shared__ memory (CUDA allows 48 KiB; use dynamic shared memory)");
    if (static_bytes + s.smem_bytes > 227 * 1024)
        bad(std::to_string(static_bytes + s.smem_bytes) + " bytes of shared memory per block (227 KiB on sm_90, 163 KiB on sm_80)");
}

void prepare_worker(Worker& w, const LaunchSpec& s, const KernelInfo& info) {
    w.spec = &s;
    w.info = &info;
    w.n = static_cast<int>(s.block.x * s.block.y * s.block.z);
    if (w.stacks.reserve(static_cast<std::size_t>(w.n), stack_bytes()))
        for (Fiber& f : w.fibers) f.deep_dirty = true;  // new pages: whatever shadow they inherit
    if (w.fibers.size() < static_cast<std::size_t>(w.n)) w.fibers.resize(static_cast<std::size_t>(w.n));
    w.warp_arrived.assign(static_cast<std::size_t>((w.n + 31) / 32), 0u);
    w.dyn_smem.reset(static_cast<std::byte*>(::operator new[](s.smem_bytes, std::align_val_t{128})));
    tl_worker = &w;
}

}  // namespace

int block_barrier(int mode, int pred, const std::source_location& loc) {
    Worker& w = current_worker("__syncthreads");
    Fiber& f = *w.current;
    f.site = loc;
    if (w.barrier_arrived == 0) {
        w.barrier_site = loc;
        w.barrier_mode = mode;
        w.barrier_acc = mode == 2 ? 1 : 0;
    } else if (loc.line() != w.barrier_site.line() || std::strcmp(loc.file_name(), w.barrier_site.file_name()) != 0) {
        fail(w, f, "divergent __syncthreads: this thread waits at " + where(loc) + " while others wait at " +
                       where(w.barrier_site));
    }
    if (w.done > 0)
        fail(w, f, "divergent __syncthreads at " + where(loc) + ": " + std::to_string(w.done) +
                       " thread(s) of this block have already exited and will never arrive");
    if (mode == 1) w.barrier_acc += pred;
    if (mode == 2) w.barrier_acc &= pred;
    if (mode == 3) w.barrier_acc |= pred;
    f.state = State::at_barrier;
    if (++w.barrier_arrived == w.n) {
        w.barrier_result = w.barrier_acc;
        w.barrier_arrived = 0;
        for (int i = 0; i < w.n; ++i) make_ready(w, w.fibers[static_cast<std::size_t>(i)]);
    }
    yield(w, f);
    return w.barrier_result;
}

std::uint64_t warp_op(WarpOp op, unsigned mask, std::uint64_t bits, int arg, int width, const std::source_location& loc) {
    Worker& w = current_worker(op_name(op));
    Fiber& f = *w.current;
    const int warp = f.tid / 32, lane = f.tid % 32;
    f.op = op;
    f.mask = mask;
    f.value = bits;
    f.arg = arg;
    f.width = width;
    f.site = loc;
    f.state = State::at_warp;
    unsigned& arrived = w.warp_arrived[static_cast<std::size_t>(warp)];
    arrived |= 1u << lane;
    if (check_warp_arrival(w, f, warp, lane) && (arrived & mask) == mask) resolve_warp(w, warp, mask);
    yield(w, f);
    return f.result;
}

// cp.async: the source is read at issue and the destination filled with
// 0xff bytes (a NaN in every float format) until the copy completes at a
// wait, so a kernel that reads it before waiting reads poison rather than
// the data a fast GPU might happen to have delivered.
void async_copy(void* dst, const void* src, int size, int src_size) {
    Worker& w = current_worker("cp.async");
    Fiber& f = *w.current;
    if (size != 4 && size != 8 && size != 16) trap(std::source_location::current());
    Fiber::AsyncCopy c{static_cast<unsigned char*>(dst), {}, size, f.commits};
    std::memcpy(c.bytes, src, std::size_t(std::clamp(src_size, 0, size)));  // the rest: zero fill
    std::memset(dst, 0xff, std::size_t(size));
    f.async.push_back(c);
}

void async_commit() { ++current_worker("cp.async.commit_group").current->commits; }

void async_wait(int pending_groups) {
    Fiber& f = *current_worker("cp.async.wait_group").current;
    // Complete every copy of a committed group but the newest `pending_groups`.
    std::erase_if(f.async, [&](const Fiber::AsyncCopy& c) {
        if (c.group >= f.commits - pending_groups) return false;
        std::memcpy(c.dst, c.bytes, std::size_t(c.size));
        return true;
    });
}

unsigned active_mask() {
    Worker& w = current_worker("__activemask");
    const int warp = w.current->tid / 32;
    unsigned m = 0;
    for (int l = 0; l < 32 && warp * 32 + l < w.n; ++l)
        if (w.fibers[static_cast<std::size_t>(warp * 32 + l)].state != State::done) m |= 1u << l;
    return m;
}

// nullptr when the launch asked for no dynamic shared memory: any use faults at once.
void* dynamic_shared() {
    Worker& w = current_worker("MW_DYNAMIC_SHARED");
    return w.spec->smem_bytes ? w.dyn_smem.get() : nullptr;
}

void trap(const std::source_location& loc) {
    Worker& w = current_worker("__trap");
    fail(w, *w.current, "__trap() at " + where(loc));
    // Park this thread; the scheduler aborts the block and unwinds it.
    w.current->state = State::at_barrier;
    yield(w, *w.current);
    throw Unwind{};
}

void run_launch_here(const LaunchSpec& spec) {
    const KernelInfo& info = kernel_info(spec.kernel);
    validate(spec, info);
    const unsigned long long blocks = 1ull * spec.grid.x * spec.grid.y * spec.grid.z;
    const int nworkers = static_cast<int>(std::min<unsigned long long>(static_cast<unsigned long long>(workers()), blocks));

    std::atomic<unsigned long long> next{0};
    std::atomic<bool> stop{false};
    std::mutex err_m;
    std::exception_ptr first_error;
    const std::function<void()> work = [&] {
        Worker& w = worker_state();
        try {
            prepare_worker(w, spec, info);
            while (!stop.load(std::memory_order_relaxed)) {
                unsigned long long b = next.fetch_add(1);
                if (b >= blocks) break;
                run_block(w, b);
            }
        } catch (...) {
            std::lock_guard lk(err_m);
            if (!first_error) first_error = std::current_exception();
            stop = true;
        }
        w.dyn_smem.reset();
        tl_worker = nullptr;
    };
    // One launch at a time: the pool and the workers' state are shared.
    static std::mutex launch_m;
    std::lock_guard lk(launch_m);
    const auto run_blocks = [&] {
        if (nworkers <= 1) work();
        else pool().run(work, nworkers - 1);
        if (first_error) std::rethrow_exception(first_error);
    };
    run_blocks();
}

void run_launch(const LaunchSpec& spec) {
    if (tl_worker && tl_worker->current)
        throw LaunchError("cuda-emu: a kernel launched another kernel (dynamic parallelism is not emulated)");
    if (remote_device()) return remote_launch(spec);  // device memory and the kernel in other processes
    run_launch_here(spec);
}

}  // namespace mw::emu::detail

namespace mw::emu {

void set_workers(int n) { detail::g_workers = std::max(0, n); }

int workers() {
    int n = detail::g_workers.load();
    if (n > 0) return n;
    if (const char* e = std::getenv("MEMWALL_EMU_WORKERS")) n = std::atoi(e);
    if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
    return std::max(1, n);
}

}  // namespace mw::emu
