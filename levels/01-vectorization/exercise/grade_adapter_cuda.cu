// How `memwall grade` calls a gemm-cuda submission (compiled with nvcc for a
// GPU, or with g++ -DMEMWALL_EMU=1 for cuda-emu, together with the student's
// file and harness/grade/grade_worker.hpp).
//
// Per call: upload A and B, poison C on the device (0xFF bytes = NaN), time the
// student's call with CUDA events, download C, and copy the device A and B back
// over the shared inputs, so that the grader's unchanged-input check also
// catches a kernel that writes into its inputs.
#include <string>

#include "harness/cuda/launch.hpp"
#include "harness/grade/grade_worker.hpp"

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t stream);

namespace {

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Device buffers kept across calls of the same size (allocation is not the
// student's cost).
struct DeviceBuffers {
    float *A = nullptr, *B = nullptr, *C = nullptr;
    std::size_t a = 0, b = 0, c = 0;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
};

void ensure(float*& p, std::size_t& have, std::size_t want) {
    if (have == want) return;
    if (p) check(cudaFree(p), "cudaFree");
    check(cudaMalloc(reinterpret_cast<void**>(&p), want), "cudaMalloc");
    have = want;
}

}  // namespace

void mw_grade_call(mw::grade::Call& c) {
    static DeviceBuffers d;
    if (!d.stream) {
        check(cudaStreamCreate(&d.stream), "cudaStreamCreate");
        check(cudaEventCreate(&d.start), "cudaEventCreate");
        check(cudaEventCreate(&d.stop), "cudaEventCreate");
    }
    ensure(d.A, d.a, c.in_bytes(0));
    ensure(d.B, d.b, c.in_bytes(1));
    ensure(d.C, d.c, c.out_bytes(0));
    check(cudaMemcpy(d.A, c.in<float>(0), d.a, cudaMemcpyHostToDevice), "upload A");
    check(cudaMemcpy(d.B, c.in<float>(1), d.b, cudaMemcpyHostToDevice), "upload B");
    check(cudaMemset(d.C, 0xFF, d.c), "poison C");
    check(cudaDeviceSynchronize(), "before the call");

    check(cudaEventRecord(d.start, d.stream), "cudaEventRecord");
    student_gemm_cuda(d.A, d.B, d.C, c.axis("m"), c.axis("n"), c.axis("k"), d.stream);
    check(cudaEventRecord(d.stop, d.stream), "cudaEventRecord");
    check(cudaGetLastError(), "the submission's launch");
    check(cudaEventSynchronize(d.stop), "the submission's kernel");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, d.start, d.stop), "cudaEventElapsedTime");
    c.device_seconds = ms * 1e-3;

    check(cudaMemcpy(c.out<float>(0), d.C, d.c, cudaMemcpyDeviceToHost), "download C");
    check(cudaMemcpy(c.in_mutable<float>(0), d.A, d.a, cudaMemcpyDeviceToHost), "download A");
    check(cudaMemcpy(c.in_mutable<float>(1), d.B, d.b, cudaMemcpyDeviceToHost), "download B");
}
