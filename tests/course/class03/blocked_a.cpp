// Student A: 16x16 blocks, both loops of a block inside L1.
#include <algorithm>

extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    const long R = rows, C = cols;
    constexpr long B = 16;
#pragma omp parallel for collapse(2) schedule(static)
    for (long ib = 0; ib < R; ib += B)
        for (long jb = 0; jb < C; jb += B) {
            const long ie = std::min(ib + B, R), je = std::min(jb + B, C);
            for (long j = jb; j < je; ++j)
                for (long i = ib; i < ie; ++i) out[j * R + i] = in[i * C + j];
        }
}
