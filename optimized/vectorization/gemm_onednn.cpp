// GEMM, vectorization lever, vendor rung: oneDNN's matmul primitive.
//
// The second yardstick beside OpenBLAS: Intel's deep-learning library (what
// TensorFlow's oneDNN builds and PyTorch's mkldnn paths call for a matmul on
// a CPU; PyTorch's plain fp32 mm goes to MKL or OpenBLAS). It picks a JIT-built
// kernel for this CPU when the primitive is made (the row's `path` names it:
// "brg:avx512_core" is the batch-reduce GEMM for AVX-512, with AMX tiles on
// a CPU that has them only for bf16 and int8, never fp32) and runs it on the
// OpenMP threads the harness sets, as rung 4 does. Made once in prepare()
// (the JIT compile is not timed), run in the timed call on the problem's own
// buffers, B in plain row-major layout, so that each call packs B's blocks
// as OpenBLAS and rung 4 do; its scratchpad (those packed blocks) is
// allocated by us and shows in the row's peak memory. Loaded at run time (harness/onednn.hpp): a
// machine without libdnnl reports this rung as not run.
#include "harness/onednn_api.hpp"
#include "reference/vectorization/gemm.hpp"

namespace {

mw::Instance prepare(mw::Problem& p) {
    return mw::onednn::instance_of({mw::onednn::matmul_f32(p.in("A").as<float>(), p.in("B").as<float>(),
                                                           p.out("C").as<float>(), p.shape["m"], p.shape["n"],
                                                           p.shape["k"])});
}

}  // namespace

// Bytes: an assumption, as for OpenBLAS: blocked like rung 3, with an MC of a
// few hundred rows (mb = 256) and an NC covering all of N at these sizes.
MW_REGISTER_VARIANT(gemm_onednn_cpu, {
    .name = "onednn", .op = "gemm", .lever = "vectorization",
    .role = mw::Role::vendor, .backend = mw::Backend::cpu, .rung = 6,
    .rationale = "oneDNN's matmul primitive: a deep-learning library's CPU GEMM, a JIT kernel built for "
                 "this CPU, as a second ceiling beside OpenBLAS",
    .needs = {"onednn"},
    .bytes = [](const mw::Shape& s, mw::DType) { return mw::gemm::bytes_blocked(s, 256, double(s["n"])); },
    .prepare = prepare });
