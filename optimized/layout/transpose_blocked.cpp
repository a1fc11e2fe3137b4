// transpose, layout lever, rung 1 (CPU): 32x32 tiles staged in a buffer.
// (The ladder is listed in reference/layout/layout.hpp.)
//
// Change from rung 0 (naive): the matrix is cut into 32x32 tiles. A thread
// copies one tile's 32 input row segments (32 floats = 128 bytes = 2 whole
// lines each, read in address order) into a 4 KiB buffer, then writes the
// tile's 32 output row segments, again 128 contiguous bytes each, reading the
// buffer down its columns. Every line of `in` and of `out` is touched once,
// and whole, while it is in L1; the scattered accesses happen inside the
// buffer, which never leaves L1. It is the CPU twin of the GPU's
// shared-memory tile (optimized/layout/transpose_smem_tiles.cu): the buffer
// plays shared memory, a cache line plays a coalesced warp access.
// (Tiling alone, without the buffer, relies on the tile's 32 input lines
// staying in L1 between columns; at a 32 KiB row stride they all map to one
// L1 set of 12 lines and are served from L2 instead.)
//
// Bytes: in read once, out written once: 8*R*C (rung 0: 68*R*C).
// Expected effect: the write side falls from a line per float to 4 bytes
// per float, and the TLB misses from one per store to 64 per tile of 1024
// elements (each of its 32 input and 32 output rows is in its own page):
// 4-8x faster than rung 0 at the default shape on the Zen 4 EPYC and the
// Xeon (results/*/layout-cpu.md), still slower than a plain memcpy of the
// same bytes. Only 2.6x on the Zen 3 EPYC, whose DRAM serves the tiles'
// 128-byte pieces, each in its own page, at 5.5 of its 30 GB/s: there a
// 16x16 tile without the buffer is faster still: graded there with
// `memwall grade 03 --submission tests/course/class03/blocked_a.cpp`, it
// ran 1.10x this rung at 4096^2 on 1 thread (best of 7 interleaved rounds).
#include <algorithm>

#include "reference/layout/layout.hpp"

namespace mw::layout {

void transpose_tiled(const float* in, float* out, long rows, long cols) {
    constexpr long T = kTransposeTile;
    const long tile_rows = (rows + T - 1) / T, tile_cols = (cols + T - 1) / T;
#pragma omp parallel for schedule(static)
    for (long t = 0; t < tile_rows * tile_cols; ++t) {
        const long i0 = t / tile_cols * T, j0 = t % tile_cols * T;
        const long h = std::min(T, rows - i0), w = std::min(T, cols - j0);
        float buf[T][T];
        for (long i = 0; i < h; ++i)
            for (long j = 0; j < w; ++j) buf[i][j] = in[(i0 + i) * cols + j0 + j];
        for (long j = 0; j < w; ++j)
            for (long i = 0; i < h; ++i) out[(j0 + j) * rows + i0 + i] = buf[i][j];
    }
}

namespace {

Instance prepare_blocked(Problem& p) {
    const long R = p.shape["rows"], C = p.shape["cols"];
    const float* in = p.in("in").as<float>();
    float* out = p.out("out").as<float>();
    Instance inst;
    inst.run = [=] { transpose_tiled(in, out, R, C); };
    return inst;
}

}  // namespace
}  // namespace mw::layout

MW_REGISTER_VARIANT(transpose_blocked_cpu, {
    .name = "blocked", .op = "transpose", .lever = "layout",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 1,
    .rationale = "32x32 tiles staged through a 4 KiB buffer: every line of input and output is read or "
                 "written whole, 8 bytes per element instead of 68",
    .bytes = [](const mw::Shape& s, mw::DType) { return 8.0 * double(s["rows"]) * s["cols"]; },
    .prepare = mw::layout::prepare_blocked });
