// Copies instead of transposing: right for 1x1 only.
#include <cstring>
extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    std::memcpy(out, in, sizeof(float) * static_cast<size_t>(rows) * cols);
}
