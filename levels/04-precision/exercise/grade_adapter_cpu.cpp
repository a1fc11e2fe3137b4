// How `memwall grade` calls an int4-gemv-cpu submission: compiled together
// with the student's file into the grader's worker program (harness/grade/
// grade_worker.hpp). Buffers arrive in the op's order: inputs W (fp32) and x,
// output y (already poisoned with NaN by the grader).
//
// Per call the adapter quantizes the grader's W with the project's own
// quantizer (kernels/precision/quant.cpp, int4 symmetric, G = 64) — the very
// bits the int4_g64_sym rung and its contract oracle use — hands the packed
// payload and fp16 scales to the student, times only the student's call
// (grading "timing": "call"), and checks afterwards that the payload and the
// scales are unchanged (the grader checks W, x and y itself).
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "harness/grade/grade_worker.hpp"

// The quantizer and the little of the harness it needs, compiled in: the
// worker is a separate program and is not linked with the harness.
#include "harness/inputs.cpp"
#include "harness/registry.cpp"
#include "kernels/precision/quant.cpp"

namespace mw {  // registry.cpp asks these of the GPU backend; the worker has none
int gpu_count() { return 0; }
std::string gpu_absent_reason() { return "the grader's worker runs on the CPU"; }
}  // namespace mw

extern "C" void student_gemv_int4_g64(const std::uint8_t* Wq, const std::uint16_t* scales, const float* x, float* y,
                                      int n_out, int n_in, int b);

void mw_grade_call(mw::grade::Call& c) {
    namespace p = mw::precision;
    const int n_out = c.axis("n_out"), n_in = c.axis("n_in"), b = c.axis("b");
    const p::QMatrix m = p::quantize({p::Format::int4, 64, false}, c.in<float>(0), n_out, n_in);
    const std::vector<std::byte> payload(m.payload.data.get(), m.payload.data.get() + m.payload.size_bytes());
    const std::vector<std::byte> scales(m.scales.data.get(), m.scales.data.get() + m.scales.size_bytes());

    const auto t0 = std::chrono::steady_clock::now();
    student_gemv_int4_g64(m.payload.as<std::uint8_t>(), m.scales.as<std::uint16_t>(), c.in<float>(1),
                          c.out<float>(0), n_out, n_in, b);
    c.device_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    if (std::memcmp(payload.data(), m.payload.data.get(), payload.size()) != 0)
        throw std::runtime_error("the submission wrote into its input Wq (the packed weights); inputs are const");
    if (std::memcmp(scales.data(), m.scales.data.get(), scales.size()) != 0)
        throw std::runtime_error("the submission wrote into its input scales; inputs are const");
}
