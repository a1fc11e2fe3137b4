// Negative control (level 03, transpose-cpu): a correct transpose that then
// "cleans up" by zeroing its input, as if it were a scratch buffer. The
// answer is right, but `in` is const: the grader must reject it.
#include <cstring>

extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    const long R = rows, C = cols;
    for (long i = 0; i < R; ++i)
        for (long j = 0; j < C; ++j) out[j * R + i] = in[i * C + j];
    std::memset(const_cast<float*>(in), 0, sizeof(float) * static_cast<std::size_t>(R * C));
}
