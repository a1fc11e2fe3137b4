// cuda-emu: the host runtime subset. "Device" memory is host memory (or held
// by another process: remote.cpp), every call is synchronous (launches finish before mw::launch returns), streams
// and events exist only so CUDA host code runs unchanged.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "harness/emu/cuda_emu.hpp"
#include "harness/emu/emu_internal.hpp"

struct CUstream_st {};
struct CUevent_st {
    std::chrono::steady_clock::time_point t;
};

namespace {

thread_local cudaError_t last_error = cudaSuccess;

cudaError_t record(cudaError_t e) {
    if (e != cudaSuccess) last_error = e;
    return e;
}

// Streams and events are host objects: a stream holds nothing (work runs at
// once), an event the time it was recorded.
template <class Handle, class... Init> cudaError_t create_handle(Handle** out, Init... init) {
    if (!out) return record(cudaErrorInvalidValue);
    *out = new Handle{init...};
    return cudaSuccess;
}
template <class Handle> cudaError_t destroy_handle(Handle* h) {
    delete h;
    return cudaSuccess;
}

// CUDA guarantees 256-byte aligned allocations; the size stays exact so
// AddressSanitizer reports an access one element past the end.
constexpr std::align_val_t device_alignment{256};

}  // namespace

const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidSymbol: return "cudaErrorInvalidSymbol";
        case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
        case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        case cudaErrorNotReady: return "cudaErrorNotReady";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorInvalidSymbol: return "invalid device symbol";
        case cudaErrorInvalidDevicePointer: return "invalid device pointer";
        case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
        case cudaErrorInvalidResourceHandle: return "invalid resource handle";
        case cudaErrorNotReady: return "device not ready";
        case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unknown error";
}

cudaError_t cudaGetLastError() {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError() { return last_error; }

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
    if (!ptr) return record(cudaErrorInvalidValue);
    if (mw::emu::detail::remote_device()) return record(mw::emu::detail::remote_malloc(ptr, bytes));
    *ptr = ::operator new(bytes, device_alignment, std::nothrow);
    return *ptr ? cudaSuccess : record(cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void* ptr) {
    if (!ptr) return cudaSuccess;
    if (mw::emu::detail::remote_device()) return record(mw::emu::detail::remote_free(ptr));
    ::operator delete(ptr, device_alignment);
    return cudaSuccess;
}
// Pinned host memory is host memory.
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) {
    if (!ptr) return record(cudaErrorInvalidValue);
    *ptr = ::operator new(bytes, device_alignment, std::nothrow);
    return *ptr ? cudaSuccess : record(cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void* ptr) {
    if (ptr) ::operator delete(ptr, device_alignment);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return record(cudaErrorInvalidMemcpyDirection);
    if (bytes == 0) return cudaSuccess;
    if (!dst || !src) return record(cudaErrorInvalidValue);
    if (mw::emu::detail::remote_device()) return record(mw::emu::detail::remote_copy(dst, src, bytes, kind));
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* dst, int value, std::size_t bytes) {
    if (bytes == 0) return cudaSuccess;
    if (!dst) return record(cudaErrorInvalidValue);
    if (mw::emu::detail::remote_device()) return record(mw::emu::detail::remote_set(dst, value, bytes));
    std::memset(dst, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t) {
    return cudaMemset(dst, value, bytes);
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : record(cudaErrorInvalidValue); }

cudaError_t cudaStreamCreate(cudaStream_t* s) { return create_handle(s); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { return cudaStreamCreate(s); }
cudaError_t cudaStreamDestroy(cudaStream_t s) { return destroy_handle(s); }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaEventCreate(cudaEvent_t* e) { return create_handle(e, std::chrono::steady_clock::now()); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { return destroy_handle(e); }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
    if (!e) return record(cudaErrorInvalidResourceHandle);
    e->t = std::chrono::steady_clock::now();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return e ? cudaSuccess : record(cudaErrorInvalidResourceHandle); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms || !start || !end) return record(cudaErrorInvalidValue);
    *ms = std::chrono::duration<float, std::milli>(end->t - start->t).count();
    return cudaSuccess;
}
