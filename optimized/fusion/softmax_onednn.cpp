// softmax, fusion lever, vendor rung: oneDNN's softmax primitive.
//
// A deep-learning library's CPU softmax (oneDNN's: TensorFlow's oneDNN
// builds call it; PyTorch's CPU softmax is its own) for the same op (axis 1 of
// a rows x cols fp32 matrix, forward inference), beside our ladder: its JIT
// kernel works row by row, so like rung 2 it should read x from DRAM once
// and write y once while a row sits in cache (8 KiB-32 KiB at these widths).
// Made once in prepare() (the JIT compile is not timed); the row's `path` is
// oneDNN's name for the kernel it picked. Loaded at run time
// (harness/onednn.hpp): a machine without libdnnl reports it as not run.
#include "harness/onednn_api.hpp"
#include "reference/fusion/fusion.hpp"

namespace {

mw::Instance prepare(mw::Problem& p) {
    namespace dnn = mw::onednn;
    const auto md = dnn::f32_desc({p.shape["rows"], p.shape["cols"]}, dnnl_ab);
    dnnl_softmax_desc_t d;
    dnn::check(dnn::api().dnnl_softmax_forward_desc_init(&d, dnnl_forward_inference, &md, 1),
               "dnnl_softmax_forward_desc_init");
    auto b = std::make_shared<dnn::Bound>(&d);
    b->arg(DNNL_ARG_SRC, md, p.in("x").as<float>());
    b->arg(DNNL_ARG_DST, md, p.out("y").as<float>());
    return dnn::instance_of({b});
}

}  // namespace

MW_REGISTER_VARIANT(softmax_onednn_cpu, {
    .name = "onednn", .op = "softmax", .lever = "fusion",
    .role = mw::Role::vendor, .backend = mw::Backend::cpu, .rung = 3,
    .rationale = "oneDNN's softmax primitive, a library's CPU softmax: a JIT kernel per row, x read once "
                 "from DRAM and y written once, as rung 2",
    .needs = {"onednn"},
    .bytes = [](const mw::Shape& s, mw::DType) { return 8.0 * double(s["rows"]) * s["cols"]; },
    .prepare = prepare });
