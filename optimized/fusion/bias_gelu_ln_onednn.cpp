// bias_gelu_ln, fusion lever, vendor rung: oneDNN, as a library offers it.
//
// oneDNN has no one primitive for the three ops; what it offers is fusion by
// post-op. Two primitives:
//   binary add     t = GELU_tanh(x + bias)   bias broadcast over rows, GELU as
//                                            an eltwise post-op (one pass)
//   layer norm     y = LN(t) * gamma + beta  scale and shift (one pass per row)
// so one full-size temporary crosses DRAM: read x, write t, read t, write y,
// 4 sweeps of rows*hidden*4 against rung 2's 2 and the naive rung's 8. What
// this buys over our passes is oneDNN's own JIT code; what it cannot buy is
// the fusion across a reduction (the layer norm needs a whole row of GELU
// output) that rung 2 does by hand. Made once in prepare() (JIT compile not
// timed; the temporary is allocated there and counted); the row's `path`
// names both kernels. Loaded at run time (harness/onednn.hpp).
#include <memory>

#include "harness/onednn_api.hpp"
#include "reference/fusion/fusion.hpp"

namespace {

mw::Instance prepare(mw::Problem& p) {
    namespace dnn = mw::onednn;
    const auto& a = dnn::api();
    const long R = p.shape["rows"], H = p.shape["hidden"];
    const auto x_md = dnn::f32_desc({R, H}, dnnl_ab), bias_md = dnn::f32_desc({1, H}, dnnl_ab);
    const auto vec_md = dnn::f32_desc({H}, dnnl_a);
    auto t = std::make_shared<mw::Buffer>(mw::Buffer::make("t", mw::DType::f32, R * H, {R, H}));

    dnnl_binary_desc_t bd;
    dnn::check(a.dnnl_binary_desc_init(&bd, dnnl_binary_add, &x_md, &bias_md, &x_md), "dnnl_binary_desc_init");
    dnnl_post_ops_t po = nullptr;
    dnn::check(a.dnnl_post_ops_create(&po), "dnnl_post_ops_create");
    std::unique_ptr<dnnl_post_ops, decltype(a.dnnl_post_ops_destroy)> po_owner(po, a.dnnl_post_ops_destroy);
    dnn::check(a.dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_gelu_tanh, 0.0f, 0.0f),
               "dnnl_post_ops_append_eltwise");
    auto add_gelu = std::make_shared<dnn::Bound>(&bd, po);
    add_gelu->arg(DNNL_ARG_SRC_0, x_md, p.in("x").as<float>());
    add_gelu->arg(DNNL_ARG_SRC_1, bias_md, p.in("bias").as<float>());
    add_gelu->arg(DNNL_ARG_DST, x_md, t->as<float>());

    dnnl_layer_normalization_desc_t ld;
    // Inference without global statistics: oneDNN computes each row's mean
    // and variance itself and keeps them in the scratchpad (no stat buffers).
    dnn::check(a.dnnl_layer_normalization_forward_desc_init(&ld, dnnl_forward_inference, &x_md, nullptr,
                                                            mw::fusion::kLnEps, dnnl_use_scale | dnnl_use_shift),
               "dnnl_layer_normalization_forward_desc_init");
    auto ln = std::make_shared<dnn::Bound>(&ld);
    ln->arg(DNNL_ARG_SRC, x_md, t->as<float>());
    ln->arg(DNNL_ARG_DST, x_md, p.out("y").as<float>());
    ln->arg(DNNL_ARG_SCALE, vec_md, p.in("gamma").as<float>());
    ln->arg(DNNL_ARG_SHIFT, vec_md, p.in("beta").as<float>());

    return dnn::instance_of({add_gelu, ln}, t);
}

}  // namespace

MW_REGISTER_VARIANT(bias_gelu_ln_onednn_cpu, {
    .name = "onednn", .op = "bias_gelu_ln", .lever = "fusion",
    .role = mw::Role::vendor, .backend = mw::Backend::cpu, .rung = 3,
    .rationale = "oneDNN's nearest offer: binary add with a GELU post-op, then its layer normalization; "
                 "4 sweeps through DRAM (one temporary) against rung 2's 2",
    .needs = {"onednn"},
    .bytes = [](const mw::Shape& s, mw::DType) {
        return 4.0 * (4.0 * double(s["rows"]) * s["hidden"] + 3.0 * s["hidden"]);
    },
    .prepare = prepare });
