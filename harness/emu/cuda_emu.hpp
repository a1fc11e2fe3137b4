// cuda-emu: compile a CUDA kernel source with the host compiler and run it on
// the CPU with CUDA semantics. Included by harness/cuda/launch.hpp when
// MEMWALL_EMU is defined; a .cu file never includes it directly.
//
// Model (see harness/emu/README.md for what is checked and what is not):
//   - one fiber (Boost.Context fcontext, own stack) per CUDA thread; all the
//     fibers of a block run on one OS thread, one block after another; blocks
//     are spread over a pool of worker threads;
//   - a fiber runs until it reaches __syncthreads or a warp primitive, then
//     yields; a barrier releases when every thread of the block has arrived,
//     a warp primitive when every lane named in its mask has;
//   - `__shared__` arrays are per-worker `thread_local` statics (a worker runs
//     one block at a time), poisoned with 0xFF bytes (NaN as float) before
//     every block; dynamic shared memory is a separate heap allocation of
//     exactly the launch's smem_bytes, reached through MW_DYNAMIC_SHARED;
//   - a barrier not reached by every thread, a warp mask that doesn't match
//     the lanes calling, or a deadlock throws mw::emu::LaunchError naming the
//     kernel, block and thread.
#pragma once

#include <math.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <source_location>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "harness/emu/cuda_emu_types.hpp"

// --- CUDA keywords ----------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __constant__
#define __managed__
#define __align__(n) __attribute__((aligned(n)))
// __restrict__ is a GCC keyword already.
//
// A block-scope `__shared__ float tile[32][32];` becomes a static thread_local:
// one copy per worker thread, and a worker runs one block at a time. The
// emulator finds these arrays through the symbol table (function-local
// statics of the launched kernel) and poisons them before every block.
// `extern __shared__ T buf[];` cannot be mapped by a macro (it would need a
// definition per name); write MW_DYNAMIC_SHARED(T, buf) instead, which both
// backends understand.
#define __shared__ static thread_local
#define MW_DYNAMIC_SHARED(T, name) T* const name = static_cast<T*>(::mw::emu::detail::dynamic_shared())

namespace mw::emu {

// Thrown out of launch() when a kernel breaks a CUDA rule the emulator checks.
struct LaunchError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Worker threads that run blocks (0 = hardware threads; the environment
// variable MEMWALL_EMU_WORKERS sets the default).
void set_workers(int n);
int workers();

namespace detail {

// The current CUDA thread's coordinates, read by threadIdx and friends.
struct ThreadCoords {
    uint3 thread_idx;
    uint3 block_idx;
    dim3 block_dim;
    dim3 grid_dim;
};
// __thread (not thread_local) so reads compile to one TLS load, no wrapper call.
extern __thread const ThreadCoords* tl_coords;

enum class WarpOp : int { shfl_idx, shfl_up, shfl_down, shfl_xor, ballot, any, all, sync, reduce_add, reduce_min, reduce_max, reduce_and, reduce_or, reduce_xor };

// Block barrier: mode 0 plain, 1 count, 2 and, 3 or. Returns the reduction.
int block_barrier(int mode, int pred, const std::source_location& loc);
// Warp primitive on up to 8 bytes of payload. Returns the lane's result bits.
std::uint64_t warp_op(WarpOp op, unsigned mask, std::uint64_t bits, int arg, int width, const std::source_location& loc);
unsigned active_mask();
// cp.async (kernels/cuda/tensor_core.cuh): `size` bytes (4, 8, 16) of
// `src` to shared `dst`, of which `src_size` are read and the rest zeroed;
// commit closes the current group; wait completes every committed group
// but the newest `pending_groups`. The current fiber's, per thread as on a GPU.
void async_copy(void* dst, const void* src, int size, int src_size);
void async_commit();
void async_wait(int pending_groups);
void* dynamic_shared();
[[noreturn]] void trap(const std::source_location& loc);

// Type-erased launch: the thunk runs the kernel with the launch's arguments
// (`data`, a tuple of them). A launch that goes to another process (remote:
// the kernel executor of remote_device.hpp) sends the thunk and the kernel as
// offsets into the executable and the arguments as bytes: only arguments
// that are all trivially copyable can go, as on a GPU.
struct LaunchSpec {
    const void* kernel;  // the kernel's address, for its name and its shared arrays
    void (*thunk)(const void* kernel, const void* data);
    const void* data;
    std::size_t data_bytes;
    bool data_copyable;
    dim3 grid, block;
    std::size_t smem_bytes;
};
void run_launch(const LaunchSpec& spec);
// Stream capture (CUDA graphs): while `stream` captures, launches, copies and
// sets on it are recorded as nodes of a graph instead of running; a graph
// launch replays them in order. A launch node owns a copy of its arguments,
// taken at capture: a replay passes the same values (so what changes from one
// replay to the next must live in device memory, as on a GPU).
bool capturing(const void* stream);
void capture_node(const void* stream, std::function<void()> node);
// Work on the legacy default stream (nullptr) while any capture is open
// would join the capture on a GPU and invalidate it: every open capture is
// invalidated and LaunchError thrown.
void refuse_legacy_during_capture(const void* stream, const char* what);
// Remote: the host's cudaMemcpyToSymbol into a __constant__ or __device__
// variable (a host global here), so that every launch takes its bytes along.
void note_symbol_write(const void* at, std::size_t bytes);

// Device memory is plain heap memory, sized exactly, so AddressSanitizer
// sees a kernel's out-of-bounds access -- unless MEMWALL_EMU_DEVICE_FD names
// a socket to another process that holds it (remote_device.hpp), as
// `memwall grade` runs a submission: then host code cannot reach it at all.

template <class T> std::uint64_t to_bits(const T& v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "warp primitives move up to 8 bytes");
    std::uint64_t u = 0;
    std::memcpy(&u, &v, sizeof(T));
    return u;
}
template <class T> T from_bits(std::uint64_t u) {
    T v;
    std::memcpy(&v, &u, sizeof(T));
    return v;
}

}  // namespace detail

// Runs kernel<<<grid, block, smem_bytes, stream>>>(args...) on the CPU and
// returns when it has finished (or records it, while `stream` captures a
// graph). Throws LaunchError on a detected fault.
template <class... KArgs, class... Args>
void launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, std::size_t smem_bytes, const void* stream,
            Args&&... args) {
    using Params = std::tuple<std::decay_t<KArgs>...>;
    // Converted to the parameter types once; every CUDA thread then gets its
    // own by-value copy, as on the GPU (a kernel may modify its parameters).
    void (*thunk)(const void*, const void*) = [](const void* k, const void* data) {
        std::apply(reinterpret_cast<void (*)(KArgs...)>(const_cast<void*>(k)), *static_cast<const Params*>(data));
    };
    constexpr bool copyable = (std::is_trivially_copyable_v<std::decay_t<KArgs>> && ...);
    detail::refuse_legacy_during_capture(stream, "a kernel launch");
    if (detail::capturing(stream)) {
        auto owned = std::make_shared<const Params>(std::forward<Args>(args)...);
        detail::capture_node(stream, [kernel, thunk, owned, grid, block, smem_bytes] {
            detail::run_launch({reinterpret_cast<const void*>(kernel), thunk, owned.get(), sizeof(Params), copyable,
                                grid, block, smem_bytes});
        });
        return;
    }
    const Params params(std::forward<Args>(args)...);
    detail::run_launch({reinterpret_cast<const void*>(kernel), thunk, &params, sizeof(Params), copyable, grid, block,
                        smem_bytes});
}

}  // namespace mw::emu

// --- built-in variables ---------------------------------------------------------------
#define threadIdx (::mw::emu::detail::tl_coords->thread_idx)
#define blockIdx (::mw::emu::detail::tl_coords->block_idx)
#define blockDim (::mw::emu::detail::tl_coords->block_dim)
#define gridDim (::mw::emu::detail::tl_coords->grid_dim)
inline constexpr int warpSize = 32;

// --- synchronisation ------------------------------------------------------------------
inline void __syncthreads(std::source_location loc = std::source_location::current()) {
    ::mw::emu::detail::block_barrier(0, 0, loc);
}
inline int __syncthreads_count(int pred, std::source_location loc = std::source_location::current()) {
    return ::mw::emu::detail::block_barrier(1, pred != 0, loc);
}
inline int __syncthreads_and(int pred, std::source_location loc = std::source_location::current()) {
    return ::mw::emu::detail::block_barrier(2, pred != 0, loc);
}
inline int __syncthreads_or(int pred, std::source_location loc = std::source_location::current()) {
    return ::mw::emu::detail::block_barrier(3, pred != 0, loc);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, std::source_location loc = std::source_location::current()) {
    ::mw::emu::detail::warp_op(::mw::emu::detail::WarpOp::sync, mask, 0, 0, 32, loc);
}
// Blocks of one launch share nothing but global memory, and workers are OS
// threads: a full fence gives at least the ordering CUDA promises.
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned __activemask() { return ::mw::emu::detail::active_mask(); }
inline void __trap(std::source_location loc = std::source_location::current()) { ::mw::emu::detail::trap(loc); }
inline void __nanosleep(unsigned) {}

// --- warp primitives -------------------------------------------------------------------
#define MW_EMU_SHFL(NAME, OP, ARGT)                                                                        \
    template <class T>                                                                                     \
    T NAME(unsigned mask, T var, ARGT arg, int width = warpSize,                                           \
           std::source_location loc = std::source_location::current()) {                                   \
        using namespace ::mw::emu::detail;                                                                 \
        return from_bits<T>(warp_op(WarpOp::OP, mask, to_bits(var), static_cast<int>(arg), width, loc));  \
    }
MW_EMU_SHFL(__shfl_sync, shfl_idx, int)
MW_EMU_SHFL(__shfl_up_sync, shfl_up, unsigned)
MW_EMU_SHFL(__shfl_down_sync, shfl_down, unsigned)
MW_EMU_SHFL(__shfl_xor_sync, shfl_xor, int)
#undef MW_EMU_SHFL

inline unsigned __ballot_sync(unsigned mask, int pred, std::source_location loc = std::source_location::current()) {
    using namespace ::mw::emu::detail;
    return static_cast<unsigned>(warp_op(WarpOp::ballot, mask, pred != 0, 0, 32, loc));
}
inline int __any_sync(unsigned mask, int pred, std::source_location loc = std::source_location::current()) {
    using namespace ::mw::emu::detail;
    return static_cast<int>(warp_op(WarpOp::any, mask, pred != 0, 0, 32, loc));
}
inline int __all_sync(unsigned mask, int pred, std::source_location loc = std::source_location::current()) {
    using namespace ::mw::emu::detail;
    return static_cast<int>(warp_op(WarpOp::all, mask, pred != 0, 0, 32, loc));
}
// sm_80 warp reductions (unsigned/int flavours share the unsigned path for
// add/and/or/xor; min/max need the sign).
#define MW_EMU_WREDUCE(NAME, OP, T)                                                                         \
    inline T NAME(unsigned mask, T v, std::source_location loc = std::source_location::current()) {         \
        using namespace ::mw::emu::detail;                                                                  \
        return from_bits<T>(warp_op(WarpOp::OP, mask, to_bits(v), std::is_signed_v<T>, 32, loc));           \
    }
MW_EMU_WREDUCE(__reduce_add_sync, reduce_add, unsigned)
MW_EMU_WREDUCE(__reduce_add_sync, reduce_add, int)
MW_EMU_WREDUCE(__reduce_min_sync, reduce_min, unsigned)
MW_EMU_WREDUCE(__reduce_min_sync, reduce_min, int)
MW_EMU_WREDUCE(__reduce_max_sync, reduce_max, unsigned)
MW_EMU_WREDUCE(__reduce_max_sync, reduce_max, int)
MW_EMU_WREDUCE(__reduce_and_sync, reduce_and, unsigned)
MW_EMU_WREDUCE(__reduce_or_sync, reduce_or, unsigned)
MW_EMU_WREDUCE(__reduce_xor_sync, reduce_xor, unsigned)
#undef MW_EMU_WREDUCE

// --- atomics (relaxed, like CUDA's; correct across worker threads) -----------------------
#define MW_EMU_ATOMIC_INT(T)                                                                                   \
    inline T atomicAdd(T* a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_RELAXED); }                      \
    inline T atomicSub(T* a, T v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }                      \
    inline T atomicAnd(T* a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_RELAXED); }                      \
    inline T atomicOr(T* a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_RELAXED); }                        \
    inline T atomicXor(T* a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_RELAXED); }                      \
    inline T atomicExch(T* a, T v) { return __atomic_exchange_n(a, v, __ATOMIC_RELAXED); }                    \
    inline T atomicCAS(T* a, T cmp, T v) {                                                                    \
        __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);                   \
        return cmp;                                                                                           \
    }                                                                                                         \
    inline T atomicMax(T* a, T v) {                                                                           \
        T old = __atomic_load_n(a, __ATOMIC_RELAXED);                                                         \
        while (old < v && !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
        {}                                                                                                    \
        return old;                                                                                           \
    }                                                                                                         \
    inline T atomicMin(T* a, T v) {                                                                           \
        T old = __atomic_load_n(a, __ATOMIC_RELAXED);                                                         \
        while (old > v && !__atomic_compare_exchange_n(a, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
        {}                                                                                                    \
        return old;                                                                                           \
    }
MW_EMU_ATOMIC_INT(int)
MW_EMU_ATOMIC_INT(unsigned int)
MW_EMU_ATOMIC_INT(long long)
MW_EMU_ATOMIC_INT(unsigned long long)
#undef MW_EMU_ATOMIC_INT
inline unsigned short atomicCAS(unsigned short* a, unsigned short cmp, unsigned short v) {
    __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}

namespace mw::emu::detail {
// Floating-point read-modify-write as a compare-and-swap loop on the value.
template <class T, class F> T atomic_update(T* a, F f) {
    std::atomic_ref<T> r(*a);
    T old = r.load(std::memory_order_relaxed);
    while (!r.compare_exchange_weak(old, f(old), std::memory_order_relaxed)) {}
    return old;
}
}  // namespace mw::emu::detail
inline float atomicAdd(float* a, float v) { return ::mw::emu::detail::atomic_update(a, [v](float o) { return o + v; }); }
inline double atomicAdd(double* a, double v) { return ::mw::emu::detail::atomic_update(a, [v](double o) { return o + v; }); }
inline float atomicExch(float* a, float v) { return std::atomic_ref<float>(*a).exchange(v, std::memory_order_relaxed); }
// CUDA's atomicInc/atomicDec wrap at `limit`.
inline unsigned atomicInc(unsigned* a, unsigned limit) {
    return ::mw::emu::detail::atomic_update(a, [limit](unsigned o) { return o >= limit ? 0u : o + 1; });
}
inline unsigned atomicDec(unsigned* a, unsigned limit) {
    return ::mw::emu::detail::atomic_update(a, [limit](unsigned o) { return (o == 0 || o > limit) ? limit : o - 1; });
}
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd

// --- loads/stores with cache hints: plain accesses on the CPU ----------------------------
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }

// --- integer and bit intrinsics ---------------------------------------------------------------
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
inline int __mul24(int a, int b) { return (a << 8 >> 8) * (b << 8 >> 8); }
inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffffu) * (b & 0xffffffu); }
inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<long long>(a) * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32); }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
inline long long __double_as_longlong(double d) { long long i; std::memcpy(&i, &d, 8); return i; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
// CUDA's global min/max overloads for integers and floats.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline long long clock64() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// --- float intrinsics: the fast-math versions are the accurate libm calls here ------------------
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline void __sincosf(float x, float* s, float* c) { *s = sinf(x); *c = cosf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline float __saturatef(float x) { return x != x ? 0.0f : fminf(fmaxf(x, 0.0f), 1.0f); }
inline int __float2int_rn(float x) { return static_cast<int>(nearbyintf(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(floorf(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(ceilf(x)); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(nearbyintf(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }
inline float __ll2float_rn(long long x) { return static_cast<float>(x); }

// --- host runtime subset -----------------------------------------------------------------------
// Error codes keep CUDA's numeric values, so messages read the same.
enum cudaError_t : int {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidSymbol = 13,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalState = 401,
    cudaErrorNotReady = 600,
    cudaErrorLaunchFailure = 719,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureUnmatched = 903,
    cudaErrorStreamCaptureImplicit = 906,
};
using cudaError = cudaError_t;
enum cudaMemcpyKind : int {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};
enum cudaFuncAttribute : int {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
using cudaStream_t = CUstream_st*;
using cudaEvent_t = CUevent_st*;
using cudaGraph_t = CUgraph_st*;
using cudaGraphExec_t = CUgraphExec_st*;
enum cudaStreamCaptureMode : int {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus : int {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00

const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaMalloc(void** ptr, std::size_t bytes);
template <class T> cudaError_t cudaMalloc(T** ptr, std::size_t bytes) {
    return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes);
template <class T> cudaError_t cudaMallocHost(T** ptr, std::size_t bytes) {
    return cudaMallocHost(reinterpret_cast<void**>(ptr), bytes);
}
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* dst, int value, std::size_t bytes);
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t stream = nullptr);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaSetDevice(int device);
cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
// Events read the host clock: emulated timings mean nothing, but code that
// times with events still runs.
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
// Stream capture into a graph, and its replay: work enqueued on a capturing
// stream (launches, cudaMemcpyAsync, cudaMemsetAsync) is recorded, not run;
// cudaGraphLaunch runs the recorded nodes in order. As on a GPU, the legacy
// default stream (nullptr) cannot capture; work on it while a capture is
// open (a launch: LaunchError; cudaMemcpyAsync, cudaMemsetAsync,
// cudaStreamSynchronize: cudaErrorStreamCaptureImplicit) and a
// synchronizing call (cudaMemcpy, cudaMemset, cudaDeviceSynchronize,
// cudaStreamSynchronize on the capturing stream) invalidate it:
// cudaStreamEndCapture then fails. Stricter than a GPU: cudaEventRecord on
// a capturing stream (an event node) is not modelled and refused, and a
// refusal invalidates every open capture, whatever its mode or thread.
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
// __constant__ and __device__ variables are plain host globals.
template <class T>
cudaError_t cudaMemcpyToSymbol(T& symbol, const void* src, std::size_t bytes, std::size_t offset = 0,
                               cudaMemcpyKind = cudaMemcpyHostToDevice) {
    if (offset + bytes > sizeof(T)) return cudaErrorInvalidValue;
    std::memcpy(reinterpret_cast<char*>(&symbol) + offset, src, bytes);
    ::mw::emu::detail::note_symbol_write(reinterpret_cast<char*>(&symbol) + offset, bytes);
    return cudaSuccess;
}
template <class T>
cudaError_t cudaMemcpyFromSymbol(void* dst, const T& symbol, std::size_t bytes, std::size_t offset = 0,
                                 cudaMemcpyKind = cudaMemcpyDeviceToHost) {
    if (offset + bytes > sizeof(T)) return cudaErrorInvalidValue;
    std::memcpy(dst, reinterpret_cast<const char*>(&symbol) + offset, bytes);
    return cudaSuccess;
}
// Shared-memory limits are not modelled beyond a sanity check at launch.
template <class F> cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute, int) { return cudaSuccess; }
