// Negative control (level 04, int4-gemv-cpu): ignores the group boundaries of
// the scales and applies the row's first scale to the whole row (a scale per
// row, as INT8 per-channel has). Right whenever a row is one group (n_in <= 64).
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
                const float s = _cvtsh_ss(scales[i * groups]);
                acc += s * float(q) * x[bb * n_in + j];
            }
            y[bb * n_out + i] = acc;
        }
    }
}
