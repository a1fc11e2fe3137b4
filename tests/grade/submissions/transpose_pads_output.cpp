// Negative control (level 03, transpose-cpu): right answer, wrong memory. It
// clears `out` as if it were padded to whole 32 x 32 tiles, then transposes
// correctly. Every element it leaves in `out` is right; the clearing writes
// past the end of `out` whenever a side is not a multiple of 32. A grader
// that only read the output back would give it full marks: the adapter's
// unmapped page after `out` must turn those writes into a crash.
#include <cstring>

extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    const long R = rows, C = cols, Rp = (R + 31) / 32 * 32, Cp = (C + 31) / 32 * 32;
    std::memset(out, 0, sizeof(float) * static_cast<std::size_t>(Rp * Cp));
    for (long i = 0; i < R; ++i)
        for (long j = 0; j < C; ++j) out[j * R + i] = in[i * C + j];
}
