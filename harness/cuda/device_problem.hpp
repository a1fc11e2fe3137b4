// Host glue shared by every CUDA variant: mirror a Problem's buffers on the
// device and wrap a launch into the harness's Instance.
//
//   .prepare = [](mw::Problem& p) {
//       const int M = int(p.shape["m"]), N = int(p.shape["n"]), K = int(p.shape["k"]);
//       return mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& d) {
//           mw::launch(my_kernel, grid, block, 0, d.stream,
//                      d.in<float>("A"), d.in<float>("B"), d.out<float>("C"), M, N, K);
//       });
//   }
//
// The same header is compiled by nvcc (backend "cuda") and by the host
// compiler through the emulator (backend "cuda-emu"), and both copies end up
// in one binary. Everything here therefore sits in an unnamed namespace:
// each translation unit gets its own copy, so the two builds never collide
// under one linker symbol (the one exception, the L2 flush, is real-CUDA-only).
// It uses only the runtime calls the emulator provides; streams, events and
// the L2 flush are used on a real GPU only.
#pragma once

#include "harness/cuda/launch.hpp"
#include "harness/registry.hpp"

#include <climits>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

// __launch_bounds__ for real GPUs; the emulator has no register file to budget.
#ifndef MW_LAUNCH_BOUNDS
#if MEMWALL_EMU
#define MW_LAUNCH_BOUNDS(...)
#else
#define MW_LAUNCH_BOUNDS(...) __launch_bounds__(__VA_ARGS__)
#endif
#endif

#if !MEMWALL_EMU
namespace mw::cuda::detail {

// Evicts the L2 before a cold-cache measurement: writing a buffer twice the
// L2's size through it pushes out every line the kernel's inputs left there.
// The buffer is allocated once per process and never freed, so static
// destruction never races the CUDA context's teardown. (Not in the unnamed
// namespace below: one buffer for the whole binary. Only nvcc-compiled code
// sees it, so the emulated build cannot clash with it.)
inline void flush_l2(cudaStream_t stream) {
    static const std::pair<void*, std::size_t> scratch = [] {
        int dev = 0, l2 = 0;
        MW_CUDA_CHECK(cudaGetDevice(&dev));
        MW_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
        std::size_t bytes = 2 * std::size_t(l2 > 0 ? l2 : 64 << 20);
        void* p = nullptr;
        MW_CUDA_CHECK(cudaMalloc(&p, bytes));
        return std::pair{p, bytes};
    }();
#if CUDART_VERSION >= 11000
    // A persisting-L2 window set by an earlier kernel would survive the memset.
    // Devices without persisting L2 return an error here; clear it so the
    // next launch's error check does not see it.
    if (cudaCtxResetPersistingL2Cache() != cudaSuccess) (void)cudaGetLastError();
#endif
    MW_CUDA_CHECK(cudaMemsetAsync(scratch.first, 0, scratch.second, stream));
}

}  // namespace mw::cuda::detail
#endif

namespace mw::cuda {
namespace {

struct DeviceBuffer {
    std::string name;
    std::size_t bytes = 0;
    void* ptr = nullptr;
};

// Device copies of one Problem's inputs and outputs, plus the stream (and, on
// a real GPU, the timing events) every launch of the instance uses. Freed
// when the last Instance lambda holding it goes away.
struct DeviceProblem {
    std::vector<DeviceBuffer> inputs, outputs;
    cudaStream_t stream{};  // emulator: the default stream
#if !MEMWALL_EMU
    cudaEvent_t start{}, stop{};
#endif

    DeviceProblem() = default;
    DeviceProblem(const DeviceProblem&) = delete;
    DeviceProblem& operator=(const DeviceProblem&) = delete;

    inline ~DeviceProblem() {
        // Errors are ignored: a destructor must not throw, and at process exit
        // the CUDA context may already be gone.
        for (auto* list : {&inputs, &outputs})
            for (auto& b : *list)
                if (b.ptr) (void)cudaFree(b.ptr);
#if !MEMWALL_EMU
        if (start) (void)cudaEventDestroy(start);
        if (stop) (void)cudaEventDestroy(stop);
        if (stream) (void)cudaStreamDestroy(stream);
        (void)cudaGetLastError();
#endif
    }

    template <class T> T* in(const std::string& name) const { return static_cast<T*>(find(inputs, name)); }
    template <class T> T* out(const std::string& name) const { return static_cast<T*>(find(outputs, name)); }

    static inline void* find(const std::vector<DeviceBuffer>& list, const std::string& name) {
        for (const auto& b : list)
            if (b.name == name) return b.ptr;
        throw std::runtime_error("device buffer '" + name + "' not found");
    }
};

inline DeviceBuffer device_alloc(const Buffer& host) {
    DeviceBuffer d{host.name, host.size_bytes(), nullptr};
    if (d.bytes) MW_CUDA_CHECK(cudaMalloc(&d.ptr, d.bytes));
    return d;
}

// Allocates device buffers, copies the inputs in and poisons the outputs with
// 0xFF bytes (a NaN in every float type), so a kernel that skips an element
// fails the check instead of inheriting a correct value.
inline std::shared_ptr<DeviceProblem> make_device_problem(const Problem& p) {
    auto d = std::make_shared<DeviceProblem>();
#if !MEMWALL_EMU
    MW_CUDA_CHECK(cudaStreamCreate(&d->stream));
    MW_CUDA_CHECK(cudaEventCreate(&d->start));
    MW_CUDA_CHECK(cudaEventCreate(&d->stop));
#endif
    for (const Buffer& b : p.inputs) {
        d->inputs.push_back(device_alloc(b));
        if (b.size_bytes())
            MW_CUDA_CHECK(cudaMemcpyAsync(d->inputs.back().ptr, b.data.get(), b.size_bytes(),
                                          cudaMemcpyHostToDevice, d->stream));
    }
    for (const Buffer& b : p.outputs) {
        d->outputs.push_back(device_alloc(b));
        if (b.size_bytes()) MW_CUDA_CHECK(cudaMemsetAsync(d->outputs.back().ptr, 0xFF, b.size_bytes(), d->stream));
    }
    MW_CUDA_CHECK(cudaStreamSynchronize(d->stream));
    return d;
}

// A device array of n elements (at least one) that frees itself: a
// variant's own workspace, held by its Instance's lambdas.
template <class T> std::shared_ptr<T> device_array(std::size_t n) {
    void* p = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&p, (n ? n : 1) * sizeof(T)));
    return std::shared_ptr<T>(static_cast<T*>(p), [](T* q) { (void)cudaFree(q); });
}

// Kernels index with int (cheaper address arithmetic); refuse shapes whose
// buffers would overflow it instead of reading out of bounds.
inline void require_int_indexing(const Problem& p) {
    for (const auto* list : {&p.inputs, &p.outputs})
        for (const Buffer& b : *list)
            if (b.count > std::size_t(INT_MAX))
                throw std::runtime_error("buffer '" + b.name + "' has " + std::to_string(b.count) +
                                         " elements; CUDA kernels index with int (max " +
                                         std::to_string(INT_MAX) + ") at shape " + p.shape.str());
}

// Copies every device output into the storage of the Problem's output
// Buffers (shared with `outs`, so the Problem sees them).
inline void fetch_outputs(const DeviceProblem& d, std::vector<Buffer>& outs) {
    for (std::size_t i = 0; i < outs.size(); ++i)
        if (outs[i].size_bytes())
            MW_CUDA_CHECK(cudaMemcpyAsync(outs[i].data.get(), d.outputs[i].ptr, outs[i].size_bytes(),
                                          cudaMemcpyDeviceToHost, d.stream));
    MW_CUDA_CHECK(cudaStreamSynchronize(d.stream));
}

#if !MEMWALL_EMU
// One launch timed with CUDA events on the instance's stream; the flush, if
// any, is enqueued before the start event and so is not timed.
template <class Launch>
double time_on_device(DeviceProblem& d, const Launch& launch, bool cold) {
    if (cold) detail::flush_l2(d.stream);
    MW_CUDA_CHECK(cudaEventRecord(d.start, d.stream));
    launch(d);
    MW_CUDA_CHECK(cudaEventRecord(d.stop, d.stream));
    MW_CUDA_CHECK(cudaEventSynchronize(d.stop));
    float ms = 0;
    MW_CUDA_CHECK(cudaEventElapsedTime(&ms, d.start, d.stop));
    return double(ms) * 1e-3;
}
#endif

// Builds the harness Instance around `launch(DeviceProblem&)`, which enqueues
// the variant's kernel(s) on d.stream without synchronizing.
template <class Launch>
Instance device_instance(Problem& p, Launch launch, std::size_t workspace_bytes = 0) {
    require_int_indexing(p);
    std::shared_ptr<DeviceProblem> d = make_device_problem(p);
    Instance inst;
    inst.run = [d, launch] { launch(*d); };
    inst.sync = [d] { MW_CUDA_CHECK(cudaStreamSynchronize(d->stream)); };
    inst.fetch = [d, outs = p.outputs]() mutable { fetch_outputs(*d, outs); };
#if !MEMWALL_EMU
    inst.device_time = [d, launch](bool cold) { return time_on_device(*d, launch, cold); };
    // Device memory is invisible to the host heap tracker: the declared
    // workspace plus the device copies of the inputs and outputs.
    std::size_t mirrors = 0;
    for (const auto* list : {&d->inputs, &d->outputs})
        for (const DeviceBuffer& b : *list) mirrors += b.bytes;
    inst.workspace_bytes = workspace_bytes + mirrors;
#else
    // Emulated device memory comes from operator new, which the tracker sees
    // (mirrors and workspaces alike): declaring it again would count it twice.
    (void)workspace_bytes;
#endif
    return inst;
}

}  // namespace
}  // namespace mw::cuda
