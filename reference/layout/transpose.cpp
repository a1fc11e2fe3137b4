// transpose, layout lever, rung 0 (CPU): the two-line loop.
//
// The op: out[C,R] = in[R,C]^T, fp32, an exact data movement (the check asks
// for bit equality). It is the copy behind every .contiguous() of a
// transposed view, and the lesson in its purest form: no arithmetic at all,
// only the order in which addresses are touched.
//
// This rung: for each row i of `in`, for each column j, out[j*R + i] =
// in[i*C + j]. Reads walk `in` in address order (4 bytes per float, every
// line used whole). Writes walk a column of `out`: C floats R*4 bytes apart,
// each in its own line. A line of `out` takes 16 floats, from 16 consecutive
// rows i, but between two of them the loop writes C = 8192 other lines
// (512 KiB, all at one page offset because R*4 = 32 KiB: 12 lines of L1 and
// 512 of L2 can hold them, layout.hpp), so each line is fetched, given one
// float, and evicted dirty: 64 bytes written back per 4-byte store, plus a
// TLB miss per store (each one lands in a different page).
//
// Bytes: in read once, a 64-byte line written back per float:
//     4*R*C + 64*R*C = 68*R*C     (the blocked rung: 8*R*C, 8.5x less).
// Rows are split over OpenMP threads, as in the blocked rung's tiles.
//
// This file also defines the op: shapes, seeded inputs, exact oracle.
#include <vector>

#include "harness/inputs.hpp"
#include "reference/layout/layout.hpp"

namespace mw::layout {

namespace {

Problem make_transpose(const Shape& s, DType dtype, std::uint64_t seed) {
    const auto R = s["rows"], C = s["cols"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("in", DType::f32, R * C, {R, C}));
    p.outputs.push_back(Buffer::make("out", DType::f32, R * C, {C, R}));
    fill_uniform(p.in("in"), seed, -1.0, 1.0);
    return p;
}

std::vector<std::vector<double>> transpose_oracle(const Problem& p) {
    const auto R = p.shape["rows"], C = p.shape["cols"];
    const float* in = p.in("in").as<float>();
    std::vector<double> out(R * C);
#pragma omp parallel for schedule(static)
    for (std::int64_t j = 0; j < C; ++j)
        for (std::int64_t i = 0; i < R; ++i) out[j * R + i] = in[i * C + j];
    return {std::move(out)};
}

Instance prepare_naive(Problem& p) {
    const long R = p.shape["rows"], C = p.shape["cols"];
    const float* in = p.in("in").as<float>();
    float* out = p.out("out").as<float>();
    Instance inst;
    inst.run = [=] {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < R; ++i)
            for (long j = 0; j < C; ++j) out[j * R + i] = in[i * C + j];
    };
    return inst;
}

}  // namespace

double transpose_bytes_naive_cpu(const Shape& s, DType) { return 68.0 * double(s["rows"]) * s["cols"]; }

}  // namespace mw::layout

MW_REGISTER_OP(transpose, {
    .name = "transpose",
    .lever = "layout",
    .summary = "out[C,R] = in[R,C]^T, fp32 (exact)",
    .axes = {"rows", "cols"},
    // 256 MiB each way: far outside every cache; R*4 = 32 KiB, a multiple of
    // the 4 KiB page, as transformer dimensions usually are.
    .default_shape = {{{"rows", 8192}, {"cols", 8192}}},
    .quick_shape = {{{"rows", 2048}, {"cols", 2048}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape&) { return 0.0; },
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) { return 8.0 * double(s["rows"]) * s["cols"]; },
    .make_problem = mw::layout::make_transpose,
    .oracle = mw::layout::transpose_oracle,
    .check = {.mode = mw::CheckMode::exact},
});

MW_REGISTER_VARIANT(transpose_naive_cpu, {
    .name = "naive", .op = "transpose", .lever = "layout",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "read rows, write columns: every 4-byte store lands in its own cache line and page, "
                 "so a whole 64-byte line is written back per float",
    .bytes = mw::layout::transpose_bytes_naive_cpu,
    .prepare = mw::layout::prepare_naive });
