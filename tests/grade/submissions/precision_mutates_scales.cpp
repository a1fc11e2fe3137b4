// Negative control (level 04, int4-gemv-cpu): right answer, then it clears a
// scale it "no longer needs". The packed weights and scales are inputs, built
// by the grader's adapter, which must notice.
#include <immintrin.h>

#include <cstdint>

extern "C" void student_gemv_int4_g64(const std::uint8_t* Wq, const std::uint16_t* scales, const float* x, float* y,
                                      int n_out, int n_in, int b) {
    const long ld = (n_in + 63) / 64 * 64, groups = ld / 64;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n_out; ++i) {
        const std::uint8_t* row = Wq + i * ld / 2;
        for (long bb = 0; bb < b; ++bb) {
            float acc = 0;
            for (long j = 0; j < n_in; ++j) {
                const std::uint8_t byte = row[(j / 32) * 16 + (j % 32) % 16];
                const int q = (j % 32 < 16 ? byte & 0x0F : byte >> 4) - 8;
                const float s = _cvtsh_ss(scales[i * groups + j / 64]);
                acc += s * float(q) * x[bb * n_in + j];
            }
            y[bb * n_out + i] = acc;
        }
    }
    const_cast<std::uint16_t*>(scales)[0] = 0;  // "done with them"
}
