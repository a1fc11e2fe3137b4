// Not an attack of its own: a CUDA submission whose first call never
// returns and launches nothing, so that a test can kill the grader while the
// worker and the kernel executor are live (the executor started and frozen,
// not yet run once: red-team batch 9 found a grader killed then left
// everything of the grade behind) and check that the guard removes them all.
#include <unistd.h>

#include "harness/cuda/launch.hpp"

void student_gemm_cuda(const float*, const float*, float*, int, int, int, cudaStream_t) {
    for (;;) sleep(3119);
}
