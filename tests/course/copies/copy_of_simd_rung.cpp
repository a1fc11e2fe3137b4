// gemm exercise -- my fast version (packing + register tile kernel)
#include <immintrin.h>
#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace {

constexpr int TILE_R = 6, TILE_C = 16, DEPTH = 256, ROWS_BLK = 96, COLS_BLK = 1024, EVERY = 4, LINE = 16;

void pack_rhs(const float *src, int stride, int depth, int width, int step, float *dst)
{
    for (int col0 = 0; col0 < width; col0 += step)
    {
        const int w = std::min(step, width - col0);
        for (int d = 0; d < depth; ++d)
        {
            const float *row = src + long(d) * stride + col0;
            std::copy(row, row + w, dst);
            std::fill(dst + w, dst + step, 0.0f);
            dst += step;
        }
    }
}

// one k step of the register tile
template <int R>
__attribute__((target("avx2,fma"))) [[gnu::always_inline]] inline void one_step(const float *&lhs, const float *&rhs,
                                                                               __m256 (&acc0)[R], __m256 (&acc1)[R])
{
    const __m256 v0 = _mm256_load_ps(rhs), v1 = _mm256_load_ps(rhs + 8);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
    {
        const __m256 s = _mm256_broadcast_ss(lhs + r);
        acc0[r] = _mm256_fmadd_ps(s, v0, acc0[r]);
        acc1[r] = _mm256_fmadd_ps(s, v1, acc1[r]);
    }
    lhs += R;
    rhs += 16;
}

// register-tiled inner kernel
template <int R>
__attribute__((target("avx2,fma")))
void tile_kernel(int depth, const float *lhs, const float *rhs, float *out, int ld, bool add, const float *ahead)
{
    __m256 acc0[R], acc1[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
    int d = 0;
    for (; d + EVERY <= depth; d += EVERY, ahead += LINE)
    {
        __builtin_prefetch(ahead, 0, 2);
#pragma GCC unroll 1
        for (int u = 0; u < EVERY; ++u) one_step<R>(lhs, rhs, acc0, acc1);
    }
    for (; d < depth; ++d) one_step<R>(lhs, rhs, acc0, acc1);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
    {
        float *o = out + long(r) * ld;
        if (add)
        {
            acc0[r] = _mm256_add_ps(acc0[r], _mm256_loadu_ps(o));
            acc1[r] = _mm256_add_ps(acc1[r], _mm256_loadu_ps(o + 8));
        }
        _mm256_storeu_ps(o, acc0[r]);
        _mm256_storeu_ps(o + 8, acc1[r]);
    }
}

void pack_lhs(const float *src, int stride, int rows_n, int depth, int step, float *dst)
{
    for (int row0 = 0; row0 < rows_n; row0 += step)
    {
        const int h = std::min(step, rows_n - row0);
        for (int d = 0; d < depth; ++d)
        {
            for (int r = 0; r < h; ++r) dst[r] = src[long(row0 + r) * stride + d];
            for (int r = h; r < step; ++r) dst[r] = 0.0f;
            dst += step;
        }
    }
}

void block_multiply(int rows_n, int cols_n, int depth, const float *L, const float *Rp, float *out, int ld, bool add)
{
    const long pan = long(TILE_C) * depth, part = depth / EVERY * LINE;
    for (int c = 0; c < cols_n; c += TILE_C)
    {
        const int w = std::min(TILE_C, cols_n - c);
        const float *rhs = Rp + long(c) * depth;
        for (int r = 0; r < rows_n; r += TILE_R)
        {
            const int h = std::min(TILE_R, rows_n - r);
            const float *lhs = L + long(r) * depth;
            float *o = out + long(r) * ld + c;
            const float *ahead = rhs;
            if (c + TILE_C < cols_n) ahead = rhs + pan + std::min(long(r / TILE_R) * part, pan - part);
            int nr_ = r + TILE_R, nc_ = c;
            if (nr_ >= rows_n) nr_ = 0, nc_ += TILE_C;
            if (nc_ < cols_n)
            {
                const int hh = std::min(TILE_R, rows_n - nr_), ww = std::min(TILE_C, cols_n - nc_);
                for (int i = 0; i < hh; ++i)
                {
                    const auto lo = reinterpret_cast<std::uintptr_t>(out + long(nr_ + i) * ld + nc_) / 64 * 64;
                    const auto hi = reinterpret_cast<std::uintptr_t>(out + long(nr_ + i) * ld + nc_ + ww - 1);
                    for (auto q = lo; q <= hi; q += 64)
                        __builtin_prefetch(reinterpret_cast<const void *>(q), 0, 3);
                }
            }
            if (h == TILE_R && w == TILE_C)
            {
                tile_kernel<TILE_R>(depth, lhs, rhs, o, ld, add, ahead);
                continue;
            }
            alignas(64) float scratch[TILE_R * TILE_C];
            tile_kernel<TILE_R>(depth, lhs, rhs, scratch, TILE_C, false, ahead);
            for (int i = 0; i < h; ++i)
                for (int j = 0; j < w; ++j)
                    o[long(i) * ld + j] = scratch[i * TILE_C + j] + (add ? o[long(i) * ld + j] : 0.0f);
        }
    }
}

}  // namespace

extern "C" void student_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    float *lhs = static_cast<float *>(std::aligned_alloc(64, sizeof(float) * (ROWS_BLK + TILE_R) * DEPTH));
    float *rhs = static_cast<float *>(std::aligned_alloc(64, sizeof(float) * (long(K) + DEPTH) * (COLS_BLK + TILE_C)));
    for (int jc = 0; jc < N; jc += COLS_BLK) {
        const int nc = std::min(COLS_BLK, N - jc);
        for (int pc = 0; pc < K; pc += DEPTH)
            pack_rhs(B + long(pc) * N + jc, N, std::min(DEPTH, K - pc), nc, TILE_C,
                     rhs + long(pc) * ((nc + TILE_C - 1) / TILE_C * TILE_C));
        for (int ic = 0; ic < M; ic += ROWS_BLK) {
            const int mc = std::min(ROWS_BLK, M - ic);
            for (int pc = 0; pc < K; pc += DEPTH) {
                const int kc = std::min(DEPTH, K - pc);
                pack_lhs(A + long(ic) * K + pc, K, mc, kc, TILE_R, lhs);
                block_multiply(mc, nc, kc, lhs, rhs + long(pc) * ((nc + TILE_C - 1) / TILE_C * TILE_C),
                               C + long(ic) * N + jc, N, pc > 0);
            }
        }
    }
    std::free(lhs);
    std::free(rhs);
}
