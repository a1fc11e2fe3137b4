// Reference solution of exercise int4-gemv-cpu, used by tests/grade: the
// project's own rung (optimized/precision/gemv_q_int4.cpp, int4 G = 64
// symmetric) compiled into the submission: its decoders and row loops
// (optimized/precision/gemv_q_cpu.hpp) run over the student's arrays the way
// the rung's timed call does (x padded to whole groups, the group sums of x,
// row tiles of ~512 KiB dealt out dynamically). Graded against the
// int4_g64_sym variant it *is*, it must get full marks; if it doesn't, the
// grader's timing is unfair.
//
// The rung file registers itself with the harness's registry, which a
// submission is not linked with: harness/grade/worker_harness.hpp switches
// registration off and compiles in the little of the harness needed; the
// quantizer's layout helpers the rung calls (padded_cols, effective_bits)
// are compiled in here.
#include <omp.h>

#include "harness/grade/worker_harness.hpp"
#include "optimized/precision/gemv_q_int4.cpp"
#include "kernels/precision/quant.cpp"

extern "C" void student_gemv_int4_g64(const std::uint8_t* Wq, const std::uint16_t* scales, const float* x, float* y,
                                      int n_out, int n_in, int b) {
    namespace p = mw::precision;
    namespace cpu = mw::precision::cpu;
    // A QMatrix that views the student's arrays (no copy, no ownership).
    p::QMatrix m;
    m.spec = {p::Format::int4, 64, false};
    m.n_out = n_out, m.n_in = n_in, m.ld = p::padded_cols(m.spec, n_in), m.groups_per_row = m.ld / 64;
    auto view = [](const void* q) {
        return std::shared_ptr<std::byte[]>(std::shared_ptr<void>(), static_cast<std::byte*>(const_cast<void*>(q)));
    };
    m.payload.data = view(Wq);
    m.scales.data = view(scales);

    const std::int64_t ldx = m.ld, groups = m.groups_per_row;
    std::vector<float> xpad(std::size_t(b * ldx), 0.0f), xsum(std::size_t(b * groups), 0.0f);
    for (std::int64_t bb = 0; bb < b; ++bb) {
        std::memcpy(xpad.data() + bb * ldx, x + bb * std::int64_t(n_in), std::size_t(n_in) * sizeof(float));
        for (std::int64_t g = 0; g < groups; ++g) {
            float s = 0;
            for (std::int64_t j = g * 64; j < (g + 1) * 64; ++j) s += xpad[bb * ldx + j];
            xsum[bb * groups + g] = s;
        }
    }
    const cpu::Isa isa = cpu::select_isa();
    const double row_bytes = double(n_in) * p::effective_bits(m.spec, n_in) / 8;
    const std::int64_t tile = std::max<std::int64_t>(1, std::int64_t((512 << 10) / row_bytes));
    const cpu::Args a{&m, xpad.data(), ldx, xsum.data(), groups, y};
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t r0 = 0; r0 < n_out; r0 += tile)
        cpu::rows_all_batches<cpu::Int4x16, cpu::Int4x8>(isa, a, b, r0, std::min<std::int64_t>(n_out, r0 + tile));
}
