// train_step on the GPU, rung 0 (the reference of the CUDA ladder): store
// everything, like the CPU's rung 0 (train_step.cpp), on the GPU block
// (kernels/model/block_cuda.cuh: cuBLAS for every product, the model's CUDA
// kernels for the rest). Every block's input and activations stay in device
// memory, L (X + R) bytes — on a GPU, whose memory is a few tens of GiB, this
// is what caps the batch and the depth first.
// The loss is the dot kernel's fixed-order double sum; dparams start from
// zero and dx from dy on the stream, then the blocks' backwards in reverse.
// Real GPU only (cuBLAS); its kernels run under cuda-emu in tests/model_kernels.
#include "harness/cuda/launch.hpp"

#if !MEMWALL_EMU
#include <memory>
#include <vector>

#include "harness/cuda/device_problem.hpp"
#include "kernels/model/block_cuda.cuh"
#include "reference/checkpointing/train_step.hpp"

namespace mw::checkpointing {
namespace {

Instance prepare_store_all_cuda(Problem& p) {
    struct State {
        model::gpu::DeviceMemory mem;             // destroyed last: the block's buffers live here
        std::unique_ptr<model::gpu::Block> block;
        std::vector<float*> x;                    // x[l]: the input of block l (x[0]: the problem's x); x[L] = y
        std::vector<model::cpu::BlockActs> acts;  // every block's, on the device
    };
    const model::Config c = config_of(p.shape);
    const int B = batch_of(p.shape), T = int(p.shape["seq"]), L = c.layers;
    auto st = std::make_shared<State>();
    st->block = std::make_unique<model::gpu::Block>(c, B, T, st->mem);
    const model::cpu::BlockSizes sz(c, B, T);
    const std::size_t X = std::size_t(p.shape["tokens"]) * std::size_t(c.d_model);
    st->x.push_back(nullptr);
    for (int l = 0; l < L; ++l) st->x.push_back(st->mem.take<float>(X)), st->acts.push_back(st->mem.acts(sz));
    return cuda::device_instance(
        p,
        [st, c, L, X](cuda::DeviceProblem& d) {
            const std::size_t P = model::layer_param_count(c);
            const float* params = d.in<const float>("params");
            float* dparams = d.out<float>("dparams");
            float* dx = d.out<float>("dx");
            const float* dy = d.in<const float>("dy");
            model::gpu::Block& block = *st->block;
            block.bind(d.stream);
            st->x[0] = d.in<float>("x");
            for (int l = 0; l < L; ++l)
                block.forward(model::bind_layer(c, params + l * P), st->x[std::size_t(l)], st->acts[std::size_t(l)],
                              st->x[std::size_t(l) + 1]);
            model::gpu::begin_backward(st->x.back(), dy, X, d.out<float>("loss"), dparams, std::size_t(L) * P, dx,
                                       d.stream);
            for (int l = L - 1; l >= 0; --l)
                block.backward(model::bind_layer(c, params + l * P), model::bind_layer(c, dparams + l * P),
                               st->x[std::size_t(l)], st->acts[std::size_t(l)], dx);
        },
        st->mem.bytes());
}

}  // namespace
}  // namespace mw::checkpointing

MW_REGISTER_VARIANT(train_step_store_all_cuda, {
    .name = "store_all", .op = "train_step", .lever = "checkpointing",
    .role = mw::Role::reference, .backend = mw::Backend::cuda, .rung = 0,
    .rationale = "every activation of every block kept in device memory: cuBLAS products and the model's kernels, "
                 "nothing recomputed",
    .needs = {"gpu"},
    .executed_flops = [](const mw::Shape& s) {
        return mw::checkpointing::executed_flops_cuda(s, mw::checkpointing::Rung::store_all);
    },
    .prepare = mw::checkpointing::prepare_store_all_cuda,
    .memory_model = [](const mw::Shape& s) {
        return mw::checkpointing::memory_model_cuda(s, mw::checkpointing::Rung::store_all);
    },
});

#endif  // !MEMWALL_EMU
