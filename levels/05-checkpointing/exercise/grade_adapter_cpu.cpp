// How `memwall grade` calls a checkpointed-step-cpu submission: compiled
// together with the student's file into the grader's worker program
// (commands/grade/grade_worker.hpp). Buffers arrive in the op's order: inputs
// x, params, dy; outputs loss, dparams, dx (already poisoned with NaN by the
// grader, which checks afterwards that the inputs are unchanged and times
// the call itself).
//
// A submission calls mw::model::cpu::Block (kernels/model/block_cpu.hpp),
// linked from the grader's worker library: the very code, built with the
// project's flags, that the reference variant store_all runs, so the same
// calls on the same inputs give the same bits, which is how the exercise is
// graded. A submission includes the headers only.
#include <cstdint>

#include "commands/grade/grade_worker.hpp"

extern "C" void student_train_step(const float* x, const float* params, const float* dy, float* loss, float* dparams,
                                   float* dx, int layers, int tokens, int seq, int d_model, int heads, int kv_heads,
                                   int d_ff);

void mw_grade_call(mw::grade::Call& c) {
    student_train_step(c.in<float>(0), c.in<float>(1), c.in<float>(2), c.out<float>(0), c.out<float>(1),
                       c.out<float>(2), c.axis("layers"), c.axis("tokens"), c.axis("seq"), c.axis("d_model"),
                       c.axis("heads"), c.axis("kv_heads"), c.axis("d_ff"));
}
