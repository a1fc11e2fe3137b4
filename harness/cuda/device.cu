// What the harness knows about the GPU, for the CUDA build (harness/gpu.hpp;
// harness/gpu_none.cpp stands in when CUDA is not built).
//
// calibrate_gpu() measures the ceilings the GPU rooflines are drawn from:
//   - DRAM bandwidth: a float4 STREAM triad a = b + s*c over three arrays of
//     at least 4x the L2 each, so (almost) every byte comes from DRAM;
//   - L2 bandwidth: many read passes over a working set of half the L2, with
//     loads that bypass L1 (ld.global.cg), so every byte comes from L2;
//   - GEMM peaks: cublasGemmEx at n = 8192 (4096 with --quick) for fp32,
//     tf32 (sm_80+), fp16 and bf16 (sm_80+) inputs, all accumulating in fp32.
// Every figure is the best of several runs timed with CUDA events, after a
// warm-up run: on a shared machine the best is what the hardware can do,
// while the median also measures the neighbours.
#include "harness/cuda/cublas.hpp"
#include "harness/cuda/launch.hpp"
#include "harness/gpu.hpp"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace mw {
namespace {

using cuda::cublas_check;  // harness/cuda/cublas.hpp

// --- device discovery -----------------------------------------------------------

struct DeviceCount {
    int count = 0;
    cudaError_t error = cudaSuccess;
};

// Asked once: without a driver every call fails the same way.
const DeviceCount& device_count() {
    static const DeviceCount dc = [] {
        DeviceCount d;
        int n = 0;
        d.error = cudaGetDeviceCount(&n);
        if (d.error == cudaSuccess)
            d.count = n;
        else
            (void)cudaGetLastError();  // do not leave the error for the next check
        return d;
    }();
    return dc;
}

std::string version_string(int v) {  // 12040 -> "12.4"
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

int device_attribute(cudaDeviceAttr attr, int dev) {
    int v = 0;
    if (cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return v;
}

std::string cublas_version() {
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
        return "unknown";
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

// --- small RAII holders, so a failed measurement frees what it allocated ---------

struct DeviceMem {
    void* ptr = nullptr;
    explicit DeviceMem(std::size_t bytes) { MW_CUDA_CHECK(cudaMalloc(&ptr, bytes)); }
    ~DeviceMem() { (void)cudaFree(ptr); }
    DeviceMem(const DeviceMem&) = delete;
    DeviceMem& operator=(const DeviceMem&) = delete;
    template <class T> T* as() const { return static_cast<T*>(ptr); }
};

struct Timer {
    cudaStream_t stream{};
    cudaEvent_t start{}, stop{};
    Timer() {
        MW_CUDA_CHECK(cudaStreamCreate(&stream));
        MW_CUDA_CHECK(cudaEventCreate(&start));
        MW_CUDA_CHECK(cudaEventCreate(&stop));
    }
    ~Timer() {
        (void)cudaEventDestroy(start);
        (void)cudaEventDestroy(stop);
        (void)cudaStreamDestroy(stream);
    }
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

    // Best time in seconds of `reps` runs of enqueue(stream), after one warm-up.
    template <class F> double best_of(int reps, F&& enqueue) {
        enqueue(stream);
        MW_CUDA_CHECK(cudaStreamSynchronize(stream));
        double best = std::numeric_limits<double>::infinity();
        for (int r = 0; r < reps; ++r) {
            MW_CUDA_CHECK(cudaEventRecord(start, stream));
            enqueue(stream);
            MW_CUDA_CHECK(cudaEventRecord(stop, stream));
            MW_CUDA_CHECK(cudaEventSynchronize(stop));
            float ms = 0;
            MW_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
            best = std::min(best, double(ms) * 1e-3);
        }
        return best;
    }
};

// --- kernels -------------------------------------------------------------------------

__device__ __forceinline__ void store_as(float* p, float x) { *p = x; }
__device__ __forceinline__ void store_as(__half* p, float x) { *p = __float2half_rn(x); }
__device__ __forceinline__ void store_as(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// Values in [-1, 1) from a hash of the index: not zeros, which would let the
// GPU run cooler (and so faster) than on real data.
template <class T> __global__ void fill_kernel(T* p, std::size_t n, std::uint32_t seed) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
         i += std::size_t(gridDim.x) * blockDim.x) {
        std::uint32_t h = std::uint32_t(i) * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        store_as(p + i, float(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
}

// STREAM triad, 16 bytes per access: reads b and c, writes a.
__global__ void triad_kernel(float4* __restrict__ a, const float4* __restrict__ b, const float4* __restrict__ c,
                             float s, std::size_t n4) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4;
         i += std::size_t(gridDim.x) * blockDim.x) {
        const float4 x = b[i], y = c[i];
        a[i] = make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
    }
}

// `passes` read sweeps over an L2-resident buffer. __ldcg caches in L2 only;
// with plain loads each SM's slice (~200 KB) would be served from its L1.
__global__ void l2_read_kernel(const float4* __restrict__ p, std::size_t n4, int passes, float* sink) {
    float acc = 0.0f;
    for (int r = 0; r < passes; ++r)
        for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4;
             i += std::size_t(gridDim.x) * blockDim.x) {
            const float4 v = __ldcg(p + i);
            acc += (v.x + v.y) + (v.z + v.w);
        }
    if (acc == 12345.0f) *sink = acc;  // a data-dependent store keeps the loads alive
}

// --- measurements ------------------------------------------------------------------

struct DeviceShape {
    int sms = 0, blocks_per_sm = 0, l2_bytes = 0, cc_major = 0;
    std::size_t mem_bytes = 0;
};

DeviceShape device_shape() {
    cudaDeviceProp prop{};
    MW_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    DeviceShape d;
    d.sms = prop.multiProcessorCount;
    d.blocks_per_sm = std::max(1, prop.maxThreadsPerMultiProcessor / 256);
    d.l2_bytes = prop.l2CacheSize;
    d.cc_major = prop.major;
    d.mem_bytes = prop.totalGlobalMem;
    return d;
}

template <class T> void fill(T* p, std::size_t n, std::uint32_t seed, const DeviceShape& d) {
    launch(fill_kernel<T>, dim3(d.sms * d.blocks_per_sm), dim3(256), 0, cudaStream_t{}, p, n, seed);
}

double measure_dram_gbps(const DeviceShape& d, bool quick) {
    // Each array at least 4x the L2 (and 256 MiB), but at most 1/8 of memory.
    std::size_t bytes = std::max<std::size_t>(4 * std::size_t(d.l2_bytes), (quick ? 64u : 256u) << 20);
    bytes = std::min(bytes, d.mem_bytes / 8) / 16 * 16;
    const std::size_t n4 = bytes / 16;
    DeviceMem a(bytes), b(bytes), c(bytes);
    fill(b.as<float>(), 4 * n4, 1, d);
    fill(c.as<float>(), 4 * n4, 2, d);
    MW_CUDA_CHECK(cudaDeviceSynchronize());
    Timer t;
    const double s = t.best_of(quick ? 5 : 20, [&](cudaStream_t st) {
        launch(triad_kernel, dim3(d.sms * d.blocks_per_sm), dim3(256), 0, st, a.as<float4>(),
               b.as<const float4>(), c.as<const float4>(), 0.5f, n4);
    });
    return 3.0 * double(bytes) / s * 1e-9;
}

double measure_l2_gbps(const DeviceShape& d, bool quick) {
    const std::size_t bytes = std::size_t(d.l2_bytes) / 2 / 16 * 16;
    if (bytes == 0) return 0;
    const std::size_t n4 = bytes / 16;
    // Enough passes to move a few GiB, so launch overhead is noise.
    const double target = double(quick ? 1u << 30 : 4u << 30);
    const int passes = std::max(8, int(target / double(bytes)));
    DeviceMem buf(bytes), sink(sizeof(float));
    fill(buf.as<float>(), 4 * n4, 3, d);
    MW_CUDA_CHECK(cudaDeviceSynchronize());
    Timer t;
    const double s = t.best_of(quick ? 3 : 10, [&](cudaStream_t st) {
        launch(l2_read_kernel, dim3(d.sms * d.blocks_per_sm), dim3(256), 0, st, buf.as<const float4>(), n4,
               passes, sink.as<float>());
    });
    return double(passes) * double(bytes) / s * 1e-9;
}

struct GemmCase {
    const char* dtype;
    cudaDataType_t type;  // of A, B and C
    cublasComputeType_t compute;
    int min_cc_major;
};

void fill_as(cudaDataType_t type, void* p, std::size_t n, std::uint32_t seed, const DeviceShape& d) {
    if (type == CUDA_R_16F)
        fill(static_cast<__half*>(p), n, seed, d);
    else if (type == CUDA_R_16BF)
        fill(static_cast<__nv_bfloat16*>(p), n, seed, d);
    else
        fill(static_cast<float*>(p), n, seed, d);
}

std::vector<ComputePeak> measure_gemm_peaks(const DeviceShape& d, bool quick) {
    const GemmCase cases[] = {
        {"fp32", CUDA_R_32F, CUBLAS_COMPUTE_32F, 0},
        {"tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 8},  // tensor cores from Ampere on
        {"fp16", CUDA_R_16F, CUBLAS_COMPUTE_32F, 0},
        {"bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 8},
    };
    const int n = quick ? 4096 : 8192;
    const std::size_t elems = std::size_t(n) * n;
    DeviceMem A(elems * 4), B(elems * 4), C(elems * 4);  // sized for fp32, reused by 16-bit types
    cublasHandle_t h = nullptr;
    cublas_check(cublasCreate(&h), "cublasCreate");
    std::vector<ComputePeak> peaks;
    try {
        Timer t;
        cublas_check(cublasSetStream(h, t.stream), "cublasSetStream");
        cublas_check(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
        for (const GemmCase& g : cases) {
            if (d.cc_major < g.min_cc_major) continue;
            fill_as(g.type, A.ptr, elems, 11, d);
            fill_as(g.type, B.ptr, elems, 12, d);
            MW_CUDA_CHECK(cudaDeviceSynchronize());
            const float alpha = 1.0f, beta = 0.0f;
            const double s = t.best_of(quick ? 3 : 10, [&](cudaStream_t) {
                cublas_check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, A.ptr, g.type, n, B.ptr,
                                          g.type, n, &beta, C.ptr, g.type, n, g.compute, CUBLAS_GEMM_DEFAULT),
                             "cublasGemmEx");
            });
            peaks.push_back({g.dtype, "cublas", 0, 2.0 * double(n) * n * n / s * 1e-9});
        }
    } catch (...) {
        (void)cublasDestroy(h);
        throw;
    }
    (void)cublasDestroy(h);
    return peaks;
}

}  // namespace

// --- harness/gpu.hpp -------------------------------------------------------------------

int gpu_count() { return device_count().count; }

bool cuda_backend_built() { return true; }

std::string gpu_absent_reason() {
    const DeviceCount& dc = device_count();
    if (dc.error == cudaSuccess) return dc.count > 0 ? "" : "no CUDA device found";
    const std::string what = "cudaGetDeviceCount returned error " + std::to_string(int(dc.error)) + " (" +
                             cudaGetErrorName(dc.error) + ": " + cudaGetErrorString(dc.error) + ")";
    if (dc.error == cudaErrorInsufficientDriver) return "no CUDA driver: " + what;
    if (dc.error == cudaErrorNoDevice) return "no CUDA device: " + what;
    return "CUDA unavailable: " + what;
}

nlohmann::json gpu_machine_info() {
    if (gpu_count() == 0) return nlohmann::json::object();
    cudaDeviceProp prop{};
    MW_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0, runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    const int sm_khz = device_attribute(cudaDevAttrClockRate, 0);
    const int mem_khz = device_attribute(cudaDevAttrMemoryClockRate, 0);
    const int bus_bits = device_attribute(cudaDevAttrGlobalMemoryBusWidth, 0);
    return {
        {"name", prop.name},
        {"device_count", gpu_count()},
        {"sms", prop.multiProcessorCount},
        {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
        {"sm_clock_mhz", sm_khz / 1000},
        {"mem_clock_mhz", mem_khz / 1000},
        {"mem_bus_bits", bus_bits},
        // Double data rate: two transfers per memory clock.
        {"dram_gbps_from_clocks", 2.0 * mem_khz * 1e3 * (bus_bits / 8.0) * 1e-9},
        {"mem_bytes", prop.totalGlobalMem},
        {"l2_bytes", prop.l2CacheSize},
        {"persisting_l2_max_bytes", device_attribute(cudaDevAttrMaxPersistingL2CacheSize, 0)},
        {"shared_mem_per_sm_bytes", prop.sharedMemPerMultiprocessor},
        {"driver", version_string(driver)},
        {"cuda_runtime", version_string(runtime)},
        {"cublas", cublas_version()},
    };
}

void calibrate_gpu(Ceilings& c, bool quick) {
    if (gpu_count() == 0) return;
    MW_CUDA_CHECK(cudaSetDevice(0));
    cudaDeviceProp prop{};
    MW_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const DeviceShape d = device_shape();
    c.gpu_name = prop.name;
    c.gpu_dram_gbps = measure_dram_gbps(d, quick);
    c.gpu_l2_gbps = measure_l2_gbps(d, quick);
    c.gpu_peaks = measure_gemm_peaks(d, quick);
}

}  // namespace mw
