// Negative control (level 03, transpose-cpu): copies the input as it is.
// Right only where a transpose is a copy (a single row), wrong everywhere
// else.
#include <cstring>

extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    std::memcpy(out, in, sizeof(float) * static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
}
