// How `memwall grade` calls a transpose-cuda submission (compiled with nvcc
// for a GPU, or with g++ -DMEMWALL_EMU=1 for cuda-emu, together with the
// student's file and harness/grade/grade_worker.hpp).
//
// Per call: upload `in`, poison `out` on the device (0xFF bytes = NaN), time
// the student's call with CUDA events, download `out`, and copy the device
// `in` back over the shared input, so that the grader's unchanged-input check
// also catches a kernel that writes into its input.
#include <string>

#include "harness/cuda/launch.hpp"
#include "harness/grade/grade_worker.hpp"

void student_transpose_cuda(const float* d_in, float* d_out, int R, int C, cudaStream_t stream);

namespace {

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Device buffers kept across calls of the same size (allocation is not the
// student's cost).
struct DeviceBuffers {
    float *in = nullptr, *out = nullptr;
    std::size_t in_bytes = 0, out_bytes = 0;
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
    ensure(d.in, d.in_bytes, c.in_bytes(0));
    ensure(d.out, d.out_bytes, c.out_bytes(0));
    check(cudaMemcpy(d.in, c.in<float>(0), d.in_bytes, cudaMemcpyHostToDevice), "upload in");
    check(cudaMemset(d.out, 0xFF, d.out_bytes), "poison out");
    check(cudaDeviceSynchronize(), "before the call");

    check(cudaEventRecord(d.start, d.stream), "cudaEventRecord");
    student_transpose_cuda(d.in, d.out, c.axis("rows"), c.axis("cols"), d.stream);
    check(cudaEventRecord(d.stop, d.stream), "cudaEventRecord");
    check(cudaGetLastError(), "the submission's launch");
    check(cudaEventSynchronize(d.stop), "the submission's kernel");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, d.start, d.stop), "cudaEventElapsedTime");
    c.device_seconds = ms * 1e-3;

    check(cudaMemcpy(c.out<float>(0), d.out, d.out_bytes, cudaMemcpyDeviceToHost), "download out");
    check(cudaMemcpy(c.in_mutable<float>(0), d.in, d.in_bytes, cudaMemcpyDeviceToHost), "download in");
}
