// launch_chain on the GPU, rung 1: the same launches, replayed from a CUDA Graph.
//
// Change from rung 0: the chain of `ops` launches is captured once (stream
// capture) into a graph and instantiated; each call is one
// cudaGraphLaunch. The kernels, their bytes and their order are unchanged;
// what goes is the host-side cost of `ops` separate launches (the driver
// submits the whole graph at once and the GPU runs the nodes back to back).
// Real CUDA only: the emulator has no graphs, so this rung does not exist
// under cuda-emu.
#include "harness/cuda/device_problem.hpp"
#include "reference/fusion/cuda_common.hpp"
#include "reference/fusion/launch_chain_cuda.hpp"

#if !MEMWALL_EMU
namespace {

struct Graph {
    cudaGraph_t graph{};
    cudaGraphExec_t exec{};
    ~Graph() {
        if (exec) (void)cudaGraphExecDestroy(exec);
        if (graph) (void)cudaGraphDestroy(graph);
    }
};

mw::Instance prepare_graph(mw::Problem& p) {
    const int n = int(p.shape["n"]), ops = int(p.shape["ops"]);
    auto tmp = mw::fusion::cuda::device_floats(2 * std::size_t(n));
    auto g = std::make_shared<Graph>();
    return mw::cuda::device_instance(
        p,
        [=](mw::cuda::DeviceProblem& d) {
            if (!g->exec) {  // first call: capture the chain on this instance's stream
                MW_CUDA_CHECK(cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeThreadLocal));
                mw::fusion::cuda::enqueue_chain(d, tmp.get(), n, ops);
                MW_CUDA_CHECK(cudaStreamEndCapture(d.stream, &g->graph));
                MW_CUDA_CHECK(cudaGraphInstantiate(&g->exec, g->graph, 0));
            }
            MW_CUDA_CHECK(cudaGraphLaunch(g->exec, d.stream));
        },
        2 * std::size_t(n) * sizeof(float));
}

}  // namespace

MW_REGISTER_VARIANT(launch_chain_graph_cuda, {
    .name = "cuda_graph", .op = "launch_chain", .lever = "fusion",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 1,
    .rationale = "the per-op launches captured once into a CUDA Graph and replayed with one "
                 "cudaGraphLaunch: same kernels and bytes, one submission",
    .needs = {"gpu"},
    .bytes = [](const mw::Shape& s, mw::DType) { return 8.0 * double(s["n"]) * s["ops"]; },
    .prepare = prepare_graph });
#endif
