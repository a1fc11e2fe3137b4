// How `memwall grade` calls a checkpointed-step-cpu submission: compiled
// together with the student's file into the grader's worker program
// (harness/grade/grade_worker.hpp). Buffers arrive in the op's order: inputs
// x, params, dy; outputs loss, dparams, dx (already poisoned with NaN by the
// grader, which checks afterwards that the inputs are unchanged and times
// the call itself).
//
// This file also compiles the project's block kernels into the worker, so
// that a submission calls mw::model::cpu::Block (kernels/model/block_cpu.hpp)
// — the very code, built with the project's flags (the level's cxx_flags),
// that the reference variant store_all runs: the same calls on the same
// inputs give the same bits, which is how the exercise is graded. A
// submission includes the headers only. The GEMM rung and the model's
// reference register themselves with the harness's registry, which the
// worker is not linked with: harness/grade/worker_harness.hpp switches
// registration off and compiles in the little of the harness they need.
#include <cstdint>

#include "harness/grade/grade_worker.hpp"
// Not the student's business: the harness code compiled in below has
// functions only the harness's registrations call, and AVX-512 helpers
// whose ABI note GCC prints once per build.
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wpsabi"
#include "harness/grade/worker_harness.hpp"
#include "kernels/model/block_cpu.cpp"
#include "kernels/model/layers_cpu.cpp"
#include "kernels/vectorization/gemm_ex.cpp"
#include "optimized/vectorization/gemm_simd.cpp"
#include "reference/model/reference.cpp"
#include "reference/vectorization/gemm.cpp"

extern "C" void student_train_step(const float* x, const float* params, const float* dy, float* loss, float* dparams,
                                   float* dx, int layers, int tokens, int seq, int d_model, int heads, int kv_heads,
                                   int d_ff);

void mw_grade_call(mw::grade::Call& c) {
    student_train_step(c.in<float>(0), c.in<float>(1), c.in<float>(2), c.out<float>(0), c.out<float>(1),
                       c.out<float>(2), c.axis("layers"), c.axis("tokens"), c.axis("seq"), c.axis("d_model"),
                       c.axis("heads"), c.axis("kv_heads"), c.axis("d_ff"));
}
