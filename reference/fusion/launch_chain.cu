// launch_chain on the GPU, rung 0: one kernel launch per op.
//
// The CUDA ladder:
//   reference/fusion/launch_chain.cu        0 one launch per op, ping-pong buffers in global memory
//   optimized/fusion/launch_chain_graph.cu  1 the same launches captured once in a CUDA Graph, replayed
//   optimized/fusion/launch_chain_fused.cu  2 one kernel applies the whole chain
// This rung: `ops` launches of a tiny element-wise kernel, each reading the
// previous op's output from global memory and writing its own. At n = 65536
// a kernel runs for ~2-3 us, about what a launch costs (~2-5 us from the
// host), so the chain is launch-bound. Bytes: 8n per op.
#include "harness/cuda/device_problem.hpp"
#include "reference/fusion/cuda_common.hpp"
#include "reference/fusion/launch_chain_cuda.hpp"

namespace {

mw::Instance prepare_launches(mw::Problem& p) {
    const int n = int(p.shape["n"]), ops = int(p.shape["ops"]);
    auto tmp = mw::fusion::cuda::device_floats(2 * std::size_t(n));
    return mw::cuda::device_instance(
        p, [=](mw::cuda::DeviceProblem& d) { mw::fusion::cuda::enqueue_chain(d, tmp.get(), n, ops); },
        2 * std::size_t(n) * sizeof(float));
}

}  // namespace

MW_REGISTER_VARIANT(launch_chain_launches_cuda, {
    .name = "per_op_launch", .op = "launch_chain", .lever = "fusion",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "one tiny kernel launch per op: the chain costs ops x launch latency",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return 8.0 * double(s["n"]) * s["ops"]; },
    .prepare = prepare_launches });
