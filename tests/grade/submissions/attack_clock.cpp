// Attack class 2, speed credit without speed (level 04): the naive stub of
// level 04, with clock_gettime() redefined to stand still, so an adapter that
// timed the call with the process's own clock would report zero seconds.
// Every time is taken by the grader now, so this earns what the stub earns.
#include <immintrin.h>

#include <cstdint>
#include <ctime>

extern "C" int clock_gettime(clockid_t, struct timespec* t) {
    t->tv_sec = 1000;
    t->tv_nsec = 0;
    return 0;
}

// The level's scalar loop (its stub's) is the answer.
extern "C" void student_gemv_int4_g64(const std::uint8_t* Wq, const std::uint16_t* scales, const float* x, float* y,
                                      int n_out, int n_in, int b) {
    const long ld = (n_in + 63) / 64 * 64, groups = ld / 64;
    for (long bb = 0; bb < b; ++bb)
        for (long i = 0; i < n_out; ++i) {
            const std::uint8_t* row = Wq + i * ld / 2;
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
