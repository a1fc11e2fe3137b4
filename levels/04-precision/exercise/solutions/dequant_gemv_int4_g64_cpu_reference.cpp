// Reference solution of exercise int4-gemv-cpu, used by tests/grade: the
// project's own rung (optimized/precision/gemv_q_int4.cpp, int4 G = 64
// symmetric), linked from the grader's worker library and called on a
// QMatrix that views the student's arrays: the very function the rung's
// timed call runs (x padded to whole groups, the group sums of x, row tiles
// of ~512 KiB dealt out dynamically). Graded against the int4_g64_sym
// variant it *is*, it must get full marks; if it doesn't, the grader's
// timing is unfair.
#include <cstdint>
#include <memory>

#include "kernels/precision/gemv.hpp"
#include "kernels/precision/quant.hpp"

extern "C" void student_gemv_int4_g64(const std::uint8_t* Wq, const std::uint16_t* scales, const float* x, float* y,
                                      int n_out, int n_in, int b) {
    namespace p = mw::precision;
    // A QMatrix that views the student's arrays (no copy, no ownership).
    p::QMatrix m;
    m.spec = {p::Format::int4, 64, false};
    m.n_out = n_out, m.n_in = n_in, m.ld = p::padded_cols(m.spec, n_in), m.groups_per_row = m.ld / 64;
    auto view = [](const void* q) {
        return std::shared_ptr<std::byte[]>(std::shared_ptr<void>(), static_cast<std::byte*>(const_cast<void*>(q)));
    };
    m.payload.data = view(Wq);
    m.scales.data = view(scales);
    p::cpu::gemv_int4(m, x, b, y);
}
