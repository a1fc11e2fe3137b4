// Negative control (level 03, transpose-cpu): the blocked rung without its
// edge clipping on the write side. Reads outside the matrix are guarded
// (zeros), but every tile writes all 32 x 32 of its outputs, so when a side
// is not a multiple of 32 the edge tiles write past the end of the columns
// of `out` (into the next column: wrong values, unless another thread
// happens to write the right one later) and past the end of `out` itself.
// Every correctness shape has such edges: it must not pass any of them.
extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    constexpr long T = 32;
    const long R = rows, C = cols;
    const long tile_rows = (R + T - 1) / T, tile_cols = (C + T - 1) / T;
#pragma omp parallel for schedule(static)
    for (long t = 0; t < tile_rows * tile_cols; ++t) {
        const long i0 = t / tile_cols * T, j0 = t % tile_cols * T;
        float buf[T][T];
        for (long i = 0; i < T; ++i)
            for (long j = 0; j < T; ++j)
                buf[i][j] = (i0 + i < R && j0 + j < C) ? in[(i0 + i) * C + j0 + j] : 0.0f;
        for (long j = 0; j < T; ++j)
            for (long i = 0; i < T; ++i) out[(j0 + j) * R + i0 + i] = buf[i][j];  // no clipping
    }
}
