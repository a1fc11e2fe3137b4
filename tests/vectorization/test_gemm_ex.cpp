// gemm_ex and gemm_ex_serial (kernels/vectorization/gemm_ex.cpp), the packed
// GEMM the model stack's forward and backward passes call, against an fp64
// product: every combination of transposed operands, row strides past the
// logical widths, C overwritten and accumulated into, on one thread and on
// two, odd shapes first and then an N past one column block (NC, sized from
// this machine's L2: 512 or 1024 on the CPUs met so far) by 33, where the
// threaded version walks a ragged last NC block of B. Columns of C between N and
// its row stride must stay untouched.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/vectorization/gemm_cpu.hpp"

namespace {

using mw::gemm::View;

struct Shape {
    int M, N, K;
};

// A logical M x K (or K x N) matrix laid out row-major or as the transpose of
// a row-major one, with a leading dimension past its width.
struct Operand {
    std::vector<float> store;
    View view;
};
Operand lay_out(const std::vector<float>& m, int rows, int cols, bool transposed) {
    Operand o;
    if (!transposed) {
        const long ld = cols + 3;
        o.store.assign(std::size_t(rows * ld), 7.0f);
        for (int i = 0; i < rows; ++i)
            for (int j = 0; j < cols; ++j) o.store[std::size_t(i * ld + j)] = m[std::size_t(i) * cols + j];
        o.view = View::rows(o.store.data(), ld);
    } else {  // stored as the cols x rows row-major transpose
        const long ld = rows + 2;
        o.store.assign(std::size_t(cols * ld), 7.0f);
        for (int i = 0; i < rows; ++i)
            for (int j = 0; j < cols; ++j) o.store[std::size_t(j * ld + i)] = m[std::size_t(i) * cols + j];
        o.view = View::transposed(o.store.data(), ld);
    }
    return o;
}

void check_all(const Shape& s, const std::string& isa) {
    std::mt19937 g(unsigned(s.M * 131 + s.N * 7 + s.K));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> a(std::size_t(s.M) * s.K), b(std::size_t(s.K) * s.N), c0(std::size_t(s.M) * s.N);
    for (auto& x : a) x = u(g);
    for (auto& x : b) x = u(g);
    for (auto& x : c0) x = u(g);
    // fp64 product and, per element, the sum of |a b| that bounds its rounding
    std::vector<double> ab(c0.size()), mag(c0.size());
    for (int i = 0; i < s.M; ++i)
        for (int p = 0; p < s.K; ++p) {
            const double x = a[std::size_t(i) * s.K + p];
            for (int j = 0; j < s.N; ++j) {
                ab[std::size_t(i) * s.N + j] += x * b[std::size_t(p) * s.N + j];
                mag[std::size_t(i) * s.N + j] += std::abs(x * b[std::size_t(p) * s.N + j]);
            }
        }
    const long ldc = s.N + 5;
    const int threads_before = omp_get_max_threads();
    const float sentinel = 12345.0f;
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (bool acc : {false, true})
                for (int threads : {1, 2}) {
                    const Operand A = lay_out(a, s.M, s.K, ta), B = lay_out(b, s.K, s.N, tb);
                    std::vector<float> c(std::size_t(s.M * ldc), sentinel);
                    for (int i = 0; i < s.M; ++i)
                        for (int j = 0; j < s.N; ++j) c[std::size_t(i * ldc + j)] = acc ? c0[std::size_t(i) * s.N + j] : -999.0f;
                    omp_set_num_threads(threads);
                    if (threads == 1)
                        mw::gemm::gemm_ex_serial(A.view, B.view, c.data(), ldc, s.M, s.N, s.K, acc);
                    else
                        mw::gemm::gemm_ex(A.view, B.view, c.data(), ldc, s.M, s.N, s.K, acc);
                    int bad = 0;
                    for (int i = 0; i < s.M && bad < 3; ++i) {
                        for (int j = 0; j < s.N && bad < 3; ++j) {
                            const std::size_t e = std::size_t(i) * s.N + j;
                            const double want = ab[e] + (acc ? c0[e] : 0.0);
                            const double tol = 2.0 * (s.K + 1) * FLT_EPSILON * (mag[e] + (acc ? std::abs(c0[e]) : 0.0)) + 1e-30;
                            const double got = c[std::size_t(i * ldc + j)];
                            if (!(std::abs(got - want) <= tol)) {
                                ADD_FAILURE() << isa << " M=" << s.M << " N=" << s.N << " K=" << s.K << " ta=" << ta << " tb=" << tb
                                              << " accumulate=" << acc << " threads=" << threads << ": C(" << i << "," << j
                                              << ") = " << got << ", want " << want << " (tolerance " << tol << ")";
                                ++bad;
                            }
                        }
                        for (long j = s.N; j < ldc && bad < 3; ++j)
                            if (c[std::size_t(i * ldc + j)] != sentinel) {
                                ADD_FAILURE() << isa << " M=" << s.M << " N=" << s.N << " K=" << s.K << " threads=" << threads
                                              << ": wrote C(" << i << "," << j << ") past N";
                                ++bad;
                            }
                    }
                }
    omp_set_num_threads(threads_before);
}

const Shape kOdd[] = {{1, 1, 1}, {7, 7, 7}, {33, 1, 129}, {1, 33, 7}, {129, 127, 33}, {65, 77, 300}};
// N past one NC block (of the ISA that runs) by 33: a ragged second block (and a ragged KC slice).
Shape wide() { return {65, mw::gemm::cpu::select_kernel().nc + 33, 300}; }

TEST(GemmEx, OddShapesMatchFp64) {
    for (const Shape& s : kOdd) check_all(s, "default ISA");
}

// NC is the largest multiple of NR whose KC x NC slice of packed B (floats)
// fills at most half of the L2 sysconf reports, kept within [256, 2048].
TEST(GemmEx, ColumnBlockTakesHalfOfL2) {
    const double l2 = double(sysconf(_SC_LEVEL2_CACHE_SIZE));
    if (l2 <= 0) GTEST_SKIP() << "the OS reports no L2 size";
    const auto& k = mw::gemm::cpu::select_kernel();
    const double slice = 4.0 * k.kc * k.nc;
    EXPECT_EQ(k.nc % k.nr, 0) << k.nc;
    EXPECT_GE(k.nc, 256);
    EXPECT_LE(k.nc, 2048);
    if (k.nc > 256) {
        EXPECT_LE(slice, l2 / 2) << "NC " << k.nc << " with L2 " << l2;
    }
    if (k.nc < 2048) {
        EXPECT_GT(slice + 4.0 * k.kc * k.nr, l2 / 2) << "NC " << k.nc << " with L2 " << l2;
    }
}

TEST(GemmEx, NPastOneColumnBlockMatchesFp64) { check_all(wide(), "default ISA"); }

TEST(GemmEx, Avx2FallbackMatchesFp64) {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2+FMA";
    setenv("MEMWALL_ISA", "avx2", 1);
    check_all({33, 1, 129}, "avx2");
    check_all(wide(), "avx2");
    unsetenv("MEMWALL_ISA");
}

}  // namespace
