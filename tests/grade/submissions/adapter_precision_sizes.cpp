// Not a submission: an adapter for level 04's exercise in a test's copy of
// the level (tests/grade/test_grade_precision.cpp). It fails every call in
// which W did not arrive empty, or x, the INT4 payload or the scales did not
// arrive whole, then calls the submission as the level's own adapter does.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "commands/grade/grade_worker.hpp"

extern "C" void student_gemv_int4_g64(const std::uint8_t* Wq, const std::uint16_t* scales, const float* x, float* y,
                                      int n_out, int n_in, int b);

void mw_grade_call(mw::grade::Call& c) {
    const std::size_t n_out = c.axis("n_out"), n_in = c.axis("n_in"), b = c.axis("b");
    const std::size_t groups = (n_in + 63) / 64;  // G = 64; rows padded to whole groups
    const auto want = [](const char* what, std::size_t got, std::size_t bytes) {
        if (got != bytes)
            throw std::runtime_error(std::string(what) + " arrived with " + std::to_string(got) + " bytes, not " +
                                     std::to_string(bytes));
    };
    want("W", c.in_bytes(0), 0);
    want("x", c.in_bytes(1), b * n_in * 4);
    const std::size_t payload = c.header->bytes[c.header->n_inputs + c.header->n_outputs];
    const std::size_t scales = c.header->bytes[c.header->n_inputs + c.header->n_outputs + 1];
    want("Wq", payload, n_out * groups * 32);
    want("scales", scales, n_out * groups * 2);
    student_gemv_int4_g64(c.extra<std::uint8_t>(0), c.extra<std::uint16_t>(1), c.in<float>(1), c.out<float>(0),
                          c.axis("n_out"), c.axis("n_in"), c.axis("b"));
}
