// How `memwall grade` calls a moe-layer-cpu submission: compiled together with
// the student's file into the grader's worker program (commands/grade/
// grade_worker.hpp). Buffers arrive in the op's order (reference/moe/
// moe_layer.cpp): inputs x, w_router, bias, w_gate, w_up, w_down; output y
// (already poisoned with NaN by the grader, which checks afterwards that the
// inputs are unchanged and times the call itself).
#include <cstdint>

#include "commands/grade/grade_worker.hpp"

extern "C" void student_moe_layer(const float* x, const float* w_router, const float* bias, const float* w_gate,
                                  const float* w_up, const float* w_down, float* y, int tokens, int d_model,
                                  int d_ff, int experts, int top_k);

void mw_grade_call(mw::grade::Call& c) {
    student_moe_layer(c.in<float>(0), c.in<float>(1), c.in<float>(2), c.in<float>(3), c.in<float>(4),
                      c.in<float>(5), c.out<float>(0), c.axis("tokens"), c.axis("d_model"), c.axis("d_ff"),
                      c.axis("experts"), c.axis("top_k"));
}
