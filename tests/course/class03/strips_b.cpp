// Student B: strips of 8 rows; each column of a strip is 8 contiguous floats of out.
extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    const int strip = 8;
    #pragma omp parallel for
    for (int r0 = 0; r0 < rows; r0 += strip) {
        int r1 = r0 + strip < rows ? r0 + strip : rows;
        for (int c = 0; c < cols; ++c) {
            float* dst = out + (long)c * rows;
            for (int r = r0; r < r1; ++r) dst[r] = in[(long)r * cols + c];
        }
    }
}
