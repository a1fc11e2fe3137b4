// Attack class 6, exactness only where it is checked (level 03): a correct
// blocked transpose that, on the 2nd to 4th calls at the speed shape (the
// first round of timed calls: the 1st is the check before timing), changes
// the last bit of one element. The grader compares timed calls with the
// reference exactly for an exact exercise.
#include <cstring>

extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    static int big_calls = 0;
    for (int i0 = 0; i0 < rows; i0 += 32)
        for (int j0 = 0; j0 < cols; j0 += 32)
            for (int i = i0; i < i0 + 32 && i < rows; ++i)
                for (int j = j0; j < j0 + 32 && j < cols; ++j) out[std::size_t(j) * rows + i] = in[std::size_t(i) * cols + j];
    if (rows >= 4096 && ++big_calls >= 2 && big_calls <= 4) {
        unsigned u;
        std::memcpy(&u, &out[12345], 4);
        u ^= 1;
        std::memcpy(&out[12345], &u, 4);
    }
}
