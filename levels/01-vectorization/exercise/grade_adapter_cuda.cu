// How `memwall grade` calls a gemm-cuda submission: inputs A, B and output C
// in device memory (commands/grade/cuda_adapter.hpp does the uploads, the
// poisoning and the downloads; the grader times the whole call).
#include "commands/grade/cuda_adapter.hpp"

void student_gemm_cuda(const float* dA, const float* dB, float* dC, int M, int N, int K, cudaStream_t stream);

void mw_grade_call(mw::grade::Call& c) {
    static mw::grade::DeviceCall d;
    d.before(c);
    student_gemm_cuda(d.in[0], d.in[1], d.out[0], c.axis("m"), c.axis("n"), c.axis("k"), d.stream);
    d.after(c);
}
