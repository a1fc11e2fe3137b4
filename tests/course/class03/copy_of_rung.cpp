#include <algorithm>

// tiled transpose through a small buffer
extern "C" void student_transpose(const float* src, float* dst, int nrows, int ncols) {
    constexpr long TS = 32;
    const long rows = nrows, cols = ncols;
    const long nti = (rows + TS - 1) / TS, ntj = (cols + TS - 1) / TS;
#pragma omp parallel for schedule(static)
    for (long k = 0; k < nti * ntj; ++k) {
        const long r0 = k / ntj * TS, c0 = k % ntj * TS;
        const long hh = std::min(TS, rows - r0), ww = std::min(TS, cols - c0);
        float tile[TS][TS];
        for (long a = 0; a < hh; ++a)
            for (long b = 0; b < ww; ++b) tile[a][b] = src[(r0 + a) * cols + c0 + b];
        for (long b = 0; b < ww; ++b)
            for (long a = 0; a < hh; ++a) dst[(c0 + b) * rows + r0 + a] = tile[a][b];
    }
}
