// Speed control (level 04, int4-gemv-cpu): correct, but it expands W to a
// full fp32 matrix on every call (n_out * n_in * 4 bytes written, then read
// back by an fp32 GEMV) — eight times the bytes the packed format streams,
// plus the writes. It must get every correctness point and lose speed points.
#include <immintrin.h>

#include <cstdint>
#include <vector>

extern "C" void student_gemv_int4_g64(const std::uint8_t* Wq, const std::uint16_t* scales, const float* x, float* y,
                                      int n_out, int n_in, int b) {
    const long ld = (n_in + 63) / 64 * 64, groups = ld / 64;
    std::vector<float> W(std::size_t(n_out) * n_in);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n_out; ++i) {
        const std::uint8_t* row = Wq + i * ld / 2;
        for (long j = 0; j < n_in; ++j) {
            const std::uint8_t byte = row[(j / 32) * 16 + (j % 32) % 16];
            const int q = (j % 32 < 16 ? byte & 0x0F : byte >> 4) - 8;
            W[i * n_in + j] = _cvtsh_ss(scales[i * groups + j / 64]) * float(q);
        }
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n_out; ++i)
        for (long bb = 0; bb < b; ++bb) {
            float acc = 0;
#pragma omp simd reduction(+ : acc)
            for (long j = 0; j < n_in; ++j) acc += W[i * n_in + j] * x[bb * n_in + j];
            y[bb * n_out + i] = acc;
        }
}
