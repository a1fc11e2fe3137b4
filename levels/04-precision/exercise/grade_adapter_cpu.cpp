// How `memwall grade` calls an int4-gemv-cpu submission: compiled together
// with the student's file into the grader's worker program (commands/grade/
// grade_worker.hpp). Buffers arrive in the op's order: inputs W and x, output
// y (already poisoned with NaN by the grader), then the inputs the grader
// prepared for this exercise ("prepared_inputs": "int4_g64_sym"): the packed
// INT4 payload of W and its fp16 scales, made by the project's own quantizer
// (int4 symmetric, G = 64), the very bits the int4_g64_sym rung and its
// contract oracle use. W itself is withheld ("withheld_inputs": it arrives
// empty, 0 bytes): the submission works from the INT4 form alone, and the
// grader copies and compares 256 MiB less per call at the speed shape. The
// grader checks afterwards that x, the payload and the scales are unchanged,
// and times the call itself.
#include <cstdint>

#include "commands/grade/grade_worker.hpp"

extern "C" void student_gemv_int4_g64(const std::uint8_t* Wq, const std::uint16_t* scales, const float* x, float* y,
                                      int n_out, int n_in, int b);

void mw_grade_call(mw::grade::Call& c) {
    student_gemv_int4_g64(c.extra<std::uint8_t>(0), c.extra<std::uint16_t>(1), c.in<float>(1), c.out<float>(0),
                          c.axis("n_out"), c.axis("n_in"), c.axis("b"));
}
