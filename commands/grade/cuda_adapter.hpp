// What every CUDA exercise adapter does around the student's kernel (compiled
// with nvcc for a GPU, or with g++ -DMEMWALL_EMU=1 for cuda-emu):
//
//   per call: upload each input, poison each output on the device (0xFF bytes
//   = NaN), synchronize, call the student's function, synchronize, download
//   each output, and copy each device input back over the shared input, so
//   that the grader's unchanged-input check also catches a kernel that writes
//   into its inputs.
//
// The grader times the whole call with its own clock (nothing a submission
// can override reports a time); device buffers are kept across calls of the
// same size, so allocation is not the student's cost.
//
// Under cuda-emu as `memwall grade` runs it, the grader holds the device
// memory itself (commands/grade/device_server.hpp) and has staged the call's
// buffers there before the call (SharedHeader::device): the adapter passes
// those addresses and copies nothing, and the grader reads the outputs from
// its own copy.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "harness/cuda/launch.hpp"
#include "commands/grade/grade_worker.hpp"

namespace mw::grade {

inline void cuda_check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// The device side of one call: inputs and outputs in the op's order.
struct DeviceCall {
    float* in[kMaxBuffers] = {};
    float* out[kMaxBuffers] = {};
    std::size_t in_bytes[kMaxBuffers] = {}, out_bytes[kMaxBuffers] = {};
    cudaStream_t stream = nullptr;

    static void ensure(float*& p, std::size_t& have, std::size_t want) {
        if (have == want) return;
        if (p) cuda_check(cudaFree(p), "cudaFree");
        cuda_check(cudaMalloc(reinterpret_cast<void**>(&p), want), "cudaMalloc");
        have = want;
    }

    bool staged_by_grader = false;

    // Upload, poison, synchronize: everything before the student's call.
    void before(const Call& c) {
        if (!stream) cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate");
        staged_by_grader = c.header->device[0] != 0;
        if (staged_by_grader) {
            for (unsigned i = 0; i < c.header->n_inputs; ++i) in[i] = reinterpret_cast<float*>(c.header->device[i]);
            for (unsigned i = 0; i < c.header->n_outputs; ++i)
                out[i] = reinterpret_cast<float*>(c.header->device[c.header->n_inputs + i]);
            return;
        }
        for (unsigned i = 0; i < c.header->n_inputs; ++i) {
            ensure(in[i], in_bytes[i], c.in_bytes(static_cast<int>(i)));
            cuda_check(cudaMemcpy(in[i], c.in<float>(static_cast<int>(i)), in_bytes[i], cudaMemcpyHostToDevice),
                       "upload an input");
        }
        for (unsigned i = 0; i < c.header->n_outputs; ++i) {
            ensure(out[i], out_bytes[i], c.out_bytes(static_cast<int>(i)));
            cuda_check(cudaMemset(out[i], 0xFF, out_bytes[i]), "poison an output");
        }
        cuda_check(cudaDeviceSynchronize(), "before the call");
    }

    // Wait for the student's kernels, then download outputs and inputs.
    void after(const Call& c) {
        cuda_check(cudaGetLastError(), "the submission's launch");
        cuda_check(cudaStreamSynchronize(stream), "the submission's kernel");
        cuda_check(cudaDeviceSynchronize(), "the submission's kernels");
        if (staged_by_grader) return;
        for (unsigned i = 0; i < c.header->n_outputs; ++i)
            cuda_check(cudaMemcpy(c.out<float>(static_cast<int>(i)), out[i], out_bytes[i], cudaMemcpyDeviceToHost),
                       "download an output");
        for (unsigned i = 0; i < c.header->n_inputs; ++i)
            cuda_check(cudaMemcpy(c.in_mutable<float>(static_cast<int>(i)), in[i], in_bytes[i],
                                  cudaMemcpyDeviceToHost),
                       "download an input");
    }
};

}  // namespace mw::grade
