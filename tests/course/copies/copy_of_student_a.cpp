#include <vector>
// my gemm
// idea: make B column-major so that the inner product walks both operands contiguously

extern "C" void student_gemm(const float* X, const float* Y, float* Z, int rows, int cols, int inner)
{
    std::vector<float> yt(static_cast<size_t>(cols) * inner);   // Y transposed
    #pragma omp parallel for
    for (int c = 0; c < cols; ++c)
        for (int p = 0; p < inner; ++p)
            yt[static_cast<size_t>(c) * inner + p] = Y[static_cast<size_t>(p) * cols + c];

    #pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r)
    {
        const float* x = X + static_cast<size_t>(r) * inner;   // row r of X
        for (int c = 0; c < cols; ++c)
        {
            const float* y = yt.data() + static_cast<size_t>(c) * inner;
            float t0 = 0, t1 = 0, t2 = 0, t3 = 0;   // four partial sums
            int p = 0;
            for (; p + 4 <= inner; p += 4)
            {
                t0 += x[p] * y[p];
                t1 += x[p + 1] * y[p + 1];
                t2 += x[p + 2] * y[p + 2];
                t3 += x[p + 3] * y[p + 3];
            }
            for (; p < inner; ++p) t0 += x[p] * y[p];
            Z[static_cast<size_t>(r) * cols + c] = (t0 + t1) + (t2 + t3);
        }
    }
}
