// How `memwall grade` calls a transpose-cuda submission: input `in` and
// output `out` in device memory (commands/grade/cuda_adapter.hpp does the
// uploads, the poisoning and the downloads; the grader times the whole call).
#include "commands/grade/cuda_adapter.hpp"

void student_transpose_cuda(const float* d_in, float* d_out, int R, int C, cudaStream_t stream);

void mw_grade_call(mw::grade::Call& c) {
    static mw::grade::DeviceCall d;
    d.before(c);
    student_transpose_cuda(d.in[0], d.out[0], c.axis("rows"), c.axis("cols"), d.stream);
    d.after(c);
}
