// cuda-emu: the host runtime subset. "Device" memory is host memory (or held
// by another process: remote.cpp), every call is synchronous (launches finish before mw::launch returns), streams
// and events exist only so CUDA host code runs unchanged.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "harness/emu/cuda_emu.hpp"
#include "harness/emu/emu_internal.hpp"

struct CUstream_st {};
struct CUevent_st {
    std::chrono::steady_clock::time_point t;
};
// A captured graph and its instantiation: the recorded work, in order.
struct CUgraph_st {
    std::vector<std::function<void()>> nodes;
};
struct CUgraphExec_st {
    std::vector<std::function<void()>> nodes;
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

// Streams capturing a graph: what each has recorded so far, and whether a
// forbidden call has invalidated it.
struct Capture {
    std::vector<std::function<void()>> nodes;
    bool invalidated = false;
};
std::mutex capture_mu;
std::map<const void*, Capture> captures;

// A synchronizing call while a capture is open: every open capture is
// invalidated (as a GPU does in the global and thread-local modes) and the
// call fails. Returns true when it did.
bool refuse_during_capture() {
    std::lock_guard<std::mutex> lock(capture_mu);
    if (captures.empty()) return false;
    for (auto& [stream, c] : captures) c.invalidated = true;
    return true;
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

namespace {

cudaError_t copy_now(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return record(cudaErrorInvalidMemcpyDirection);
    if (bytes == 0) return cudaSuccess;
    if (!dst || !src) return record(cudaErrorInvalidValue);
    if (mw::emu::detail::remote_device()) return record(mw::emu::detail::remote_copy(dst, src, bytes, kind));
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t set_now(void* dst, int value, std::size_t bytes) {
    if (bytes == 0) return cudaSuccess;
    if (!dst) return record(cudaErrorInvalidValue);
    if (mw::emu::detail::remote_device()) return record(mw::emu::detail::remote_set(dst, value, bytes));
    std::memset(dst, value, bytes);
    return cudaSuccess;
}

// A replayed copy or set that fails throws, as a failed kernel node does:
// cudaGraphLaunch has no other way to say which node went wrong.
void node_check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw mw::emu::LaunchError(std::string("graph node ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    if (refuse_during_capture()) return record(cudaErrorStreamCaptureUnsupported);
    return copy_now(dst, src, bytes, kind);
}
// Legacy-stream work while a capture is open: the capture is invalidated.
static bool legacy_during_capture(const void* s) { return !s && refuse_during_capture(); }

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
    if (legacy_during_capture(s)) return record(cudaErrorStreamCaptureImplicit);
    if (mw::emu::detail::capturing(s)) {
        if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return record(cudaErrorInvalidMemcpyDirection);
        mw::emu::detail::capture_node(s, [=] { node_check(copy_now(dst, src, bytes, kind), "cudaMemcpyAsync"); });
        return cudaSuccess;
    }
    return copy_now(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* dst, int value, std::size_t bytes) {
    if (refuse_during_capture()) return record(cudaErrorStreamCaptureUnsupported);
    return set_now(dst, value, bytes);
}
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t s) {
    if (legacy_during_capture(s)) return record(cudaErrorStreamCaptureImplicit);
    if (mw::emu::detail::capturing(s)) {
        mw::emu::detail::capture_node(s, [=] { node_check(set_now(dst, value, bytes), "cudaMemsetAsync"); });
        return cudaSuccess;
    }
    return set_now(dst, value, bytes);
}

cudaError_t cudaDeviceSynchronize() {
    return refuse_during_capture() ? record(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : record(cudaErrorInvalidValue); }

cudaError_t cudaStreamCreate(cudaStream_t* s) { return create_handle(s); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { return cudaStreamCreate(s); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    {  // a capture still open on it ends with it (a later stream may get its address)
        std::lock_guard<std::mutex> lock(capture_mu);
        captures.erase(s);
    }
    return destroy_handle(s);
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (legacy_during_capture(s)) return record(cudaErrorStreamCaptureImplicit);
    if (mw::emu::detail::capturing(s)) {
        std::lock_guard<std::mutex> lock(capture_mu);
        captures[s].invalidated = true;
        return record(cudaErrorStreamCaptureUnsupported);
    }
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) { return create_handle(e, std::chrono::steady_clock::now()); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { return destroy_handle(e); }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!e) return record(cudaErrorInvalidResourceHandle);
    if (mw::emu::detail::capturing(s)) {  // an event inside a graph: not modelled
        std::lock_guard<std::mutex> lock(capture_mu);
        captures[s].invalidated = true;
        return record(cudaErrorStreamCaptureUnsupported);
    }
    e->t = std::chrono::steady_clock::now();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return e ? cudaSuccess : record(cudaErrorInvalidResourceHandle); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    if (!ms || !start || !end) return record(cudaErrorInvalidValue);
    *ms = std::chrono::duration<float, std::milli>(end->t - start->t).count();
    return cudaSuccess;
}

// --- stream capture and graphs ---------------------------------------------------------

bool mw::emu::detail::capturing(const void* stream) {
    if (!stream) return false;  // the legacy default stream never captures
    std::lock_guard<std::mutex> lock(capture_mu);
    return captures.count(stream) > 0;
}

void mw::emu::detail::capture_node(const void* stream, std::function<void()> node) {
    std::lock_guard<std::mutex> lock(capture_mu);
    const auto it = captures.find(stream);
    if (it == captures.end()) throw mw::emu::LaunchError("work recorded on a stream whose capture has ended");
    it->second.nodes.push_back(std::move(node));
}

void mw::emu::detail::refuse_legacy_during_capture(const void* stream, const char* what) {
    if (legacy_during_capture(stream))
        throw mw::emu::LaunchError(std::string(what) +
                                   " on the legacy default stream while a stream capture is open: on a GPU it would "
                                   "join the capture and invalidate it (enqueue it on the capturing stream)");
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
    if (mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed) return record(cudaErrorInvalidValue);
    if (!s) return record(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot capture
    std::lock_guard<std::mutex> lock(capture_mu);
    if (captures.count(s)) return record(cudaErrorIllegalState);
    captures[s];
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
    if (!graph) return record(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lock(capture_mu);
    const auto it = captures.find(s);
    if (!s || it == captures.end()) return record(cudaErrorIllegalState);
    Capture c = std::move(it->second);
    captures.erase(it);
    *graph = nullptr;
    if (c.invalidated) return record(cudaErrorStreamCaptureInvalidated);
    *graph = new CUgraph_st{std::move(c.nodes)};
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
    if (!status) return record(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lock(capture_mu);
    const auto it = s ? captures.find(s) : captures.end();
    *status = it == captures.end()     ? cudaStreamCaptureStatusNone
              : it->second.invalidated ? cudaStreamCaptureStatusInvalidated
                                       : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
    if (!exec || !graph) return record(cudaErrorInvalidValue);
    *exec = new CUgraphExec_st{graph->nodes};
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    if (!exec) return record(cudaErrorInvalidValue);
    if (mw::emu::detail::capturing(s)) {  // a graph inside a capture: its nodes join the new graph
        for (const auto& node : exec->nodes) mw::emu::detail::capture_node(s, node);
        return cudaSuccess;
    }
    for (const auto& node : exec->nodes) node();
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) { return destroy_handle(graph); }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) { return destroy_handle(exec); }
