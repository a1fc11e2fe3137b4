// cuda-emu test kernels: stream capture into a graph, and its replay.
#include "harness/cuda/launch.hpp"
#include "tests/emu/emu_kernels.hpp"

namespace {

__global__ void add_kernel(float* y, float v, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += v;
}

__global__ void scale_kernel(float* y, const float* s, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= s[0];
}

}  // namespace

namespace emu_test {

GraphReplay graph_replay(int n) {
    GraphReplay r;
    float *y = nullptr, *s = nullptr, *host_s = nullptr;
    MW_CUDA_CHECK(cudaMalloc(&y, n * sizeof(float)));
    MW_CUDA_CHECK(cudaMalloc(&s, sizeof(float)));
    MW_CUDA_CHECK(cudaMallocHost(&host_s, sizeof(float)));
    MW_CUDA_CHECK(cudaMemset(y, 0, n * sizeof(float)));
    cudaStream_t st{};
    MW_CUDA_CHECK(cudaStreamCreate(&st));
    const dim3 grid((n + 63) / 64), block(64);

    // Captured: y += v (v = 1 at capture), s <- *host_s, y *= s.
    float v = 1.0f;
    MW_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    cudaStreamCaptureStatus status{};
    MW_CUDA_CHECK(cudaStreamIsCapturing(st, &status));
    r.capturing_during = status == cudaStreamCaptureStatusActive;
    mw::launch(add_kernel, grid, block, 0, st, y, v, n);
    MW_CUDA_CHECK(cudaMemcpyAsync(s, host_s, sizeof(float), cudaMemcpyHostToDevice, st));
    mw::launch(scale_kernel, grid, block, 0, st, y, (const float*)s, n);
    cudaGraph_t graph{};
    MW_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    MW_CUDA_CHECK(cudaStreamIsCapturing(st, &status));
    r.capturing_after = status != cudaStreamCaptureStatusNone;
    std::vector<float> h(std::size_t(n), 0.0f);
    MW_CUDA_CHECK(cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
    r.after_capture = h;

    cudaGraphExec_t exec{};
    MW_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    v = 100.0f;  // too late: the launch node holds the value it was captured with
    *host_s = 2.0f;
    MW_CUDA_CHECK(cudaGraphLaunch(exec, st));
    MW_CUDA_CHECK(cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
    r.after_first = h;  // (0 + 1) * 2
    *host_s = 3.0f;     // the copy node reads the host memory when it runs
    MW_CUDA_CHECK(cudaGraphLaunch(exec, st));
    MW_CUDA_CHECK(cudaStreamSynchronize(st));
    MW_CUDA_CHECK(cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
    r.after_second = h;  // (2 + 1) * 3

    // The legacy stream cannot capture; a synchronous copy invalidates a capture.
    r.legacy_begin = cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeThreadLocal);
    (void)cudaGetLastError();
    MW_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    r.sync_copy_in_capture = cudaMemcpy(h.data(), y, sizeof(float), cudaMemcpyDeviceToHost);
    cudaGraph_t broken{};
    r.end_after_sync_copy = cudaStreamEndCapture(st, &broken);
    r.broken_graph_null = broken == nullptr;
    (void)cudaGetLastError();

    // A launch on the legacy stream while a capture is open throws and
    // invalidates the capture; a capturing stream destroyed takes its
    // capture with it (copies work again).
    MW_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    try {
        mw::launch(add_kernel, grid, block, 0, nullptr, y, 1.0f, n);
    } catch (const mw::emu::LaunchError&) {
        r.legacy_launch_threw = true;
    }
    r.end_after_legacy_launch = cudaStreamEndCapture(st, &broken);
    (void)cudaGetLastError();
    cudaStream_t doomed{};
    MW_CUDA_CHECK(cudaStreamCreate(&doomed));
    MW_CUDA_CHECK(cudaStreamBeginCapture(doomed, cudaStreamCaptureModeThreadLocal));
    MW_CUDA_CHECK(cudaStreamDestroy(doomed));
    r.copy_after_destroyed_capture = cudaMemcpy(h.data(), y, sizeof(float), cudaMemcpyDeviceToHost);

    MW_CUDA_CHECK(cudaGraphExecDestroy(exec));
    MW_CUDA_CHECK(cudaGraphDestroy(graph));
    MW_CUDA_CHECK(cudaStreamDestroy(st));
    MW_CUDA_CHECK(cudaFreeHost(host_s));
    MW_CUDA_CHECK(cudaFree(s));
    MW_CUDA_CHECK(cudaFree(y));
    return r;
}

}  // namespace emu_test
