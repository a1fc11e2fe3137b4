// Student C: cache-oblivious transpose: split the longer side in half until
// a piece is small, then copy it element by element.
static void piece(const float* in, float* out, long R, long C, long r0, long r1, long c0, long c1) {
    const long h = r1 - r0, w = c1 - c0;
    if (h * w <= 256) {
        for (long c = c0; c < c1; ++c)
            for (long r = r0; r < r1; ++r) out[c * R + r] = in[r * C + c];
    } else if (h >= w) {
        const long mid = r0 + h / 2;
        piece(in, out, R, C, r0, mid, c0, c1);
        piece(in, out, R, C, mid, r1, c0, c1);
    } else {
        const long mid = c0 + w / 2;
        piece(in, out, R, C, r0, r1, c0, mid);
        piece(in, out, R, C, r0, r1, mid, c1);
    }
}

extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    piece(in, out, rows, cols, 0, rows, 0, cols);
}
