#include <algorithm>

// blocked transpose (my version)
extern "C" void student_transpose(const float* in, float* out, int rows, int cols)
{
    const long nr = rows, nc = cols;
    constexpr long TILE = 32;    // bigger tiles
    #pragma omp parallel for collapse(2) schedule(static)
    for (long r0 = 0; r0 < nr; r0 += TILE)
        for (long c0 = 0; c0 < nc; c0 += TILE)
        {
            const long r1 = std::min(r0 + TILE, nr);
            const long c1 = std::min(c0 + TILE, nc);
            for (long c = c0; c < c1; ++c)          // column of in = row of out
                for (long r = r0; r < r1; ++r)
                    out[c * nr + r] = in[r * nc + c];
        }
}
