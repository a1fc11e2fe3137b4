// Negative control (level 03, transpose-cpu): a blocked transpose that moves
// only the full 32 x 32 tiles and forgets the partial ones at the right and
// bottom edges, so when a side is not a multiple of 32 those elements of
// `out` keep the grader's NaN poison.
extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    constexpr long T = 32;
    const long R = rows, C = cols;
#pragma omp parallel for collapse(2) schedule(static)
    for (long i0 = 0; i0 < R / T * T; i0 += T)
        for (long j0 = 0; j0 < C / T * T; j0 += T) {
            float buf[T][T];
            for (long i = 0; i < T; ++i)
                for (long j = 0; j < T; ++j) buf[i][j] = in[(i0 + i) * C + j0 + j];
            for (long j = 0; j < T; ++j)
                for (long i = 0; i < T; ++i) out[(j0 + j) * R + i0 + i] = buf[i][j];
        }
}
