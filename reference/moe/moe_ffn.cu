// moe_ffn on the GPU, rung 0: the sorted dispatch with plain kernels
// (kernels/moe/moe.cuh), the CPU's rung 2 step for step:
//   dispatch_sort      counting sort of the assignments by expert (slot-major),
//                      deterministic: rows in the CPU's order
//   permute_rows       gather each expert's tokens into one block
//   grouped_gemm x 2   x Wg and x Wu for every expert in one launch each
//   swiglu_forward     the model's kernel (kernels/model/elementwise.cuh)
//   grouped_gemm       h Wd
//   unpermute_combine  weighted scatter back onto the residual
// What a faster rung would change: the GEMMs (16 x 16 tiles, one output per
// thread: far from a GPU's peak; cuBLAS's grouped or batched GEMM is the
// vendor rung this ladder lacks so far) and the sort (a parallel scan).
// Run: memwall run moe_ffn --backend cuda   (or --backend cuda-emu --quick)
#include <memory>

#include "harness/cuda/device_memory.hpp"
#include "harness/cuda/device_problem.hpp"
#include "kernels/model/elementwise.cuh"
#include "kernels/moe/moe.cuh"
#include "reference/moe/moe.hpp"

namespace {

struct Workspace {
    std::int64_t *offsets = nullptr, *row_of = nullptr;
    std::int32_t* token = nullptr;
    float *xs = nullptr, *ys = nullptr, *a = nullptr, *b = nullptr, *h = nullptr;
    std::size_t bytes = 0;
    ~Workspace() {
        for (void* p : {static_cast<void*>(offsets), static_cast<void*>(row_of), static_cast<void*>(token),
                        static_cast<void*>(xs), static_cast<void*>(ys), static_cast<void*>(a), static_cast<void*>(b),
                        static_cast<void*>(h)})
            if (p) (void)cudaFree(p);
    }
};

mw::Instance prepare_ffn_cuda(mw::Problem& p) {
    const int T = int(p.shape["tokens"]), d = int(p.shape["d_model"]), f = int(p.shape["d_ff"]),
              E = int(p.shape["experts"]), k = int(p.shape["top_k"]);
    const std::size_t rows = std::size_t(T) * k;
    auto w = std::make_shared<Workspace>();
    auto take = [&](std::size_t bytes) {
        w->bytes += bytes;
        return mw::cuda::alloc_bytes(bytes);
    };
    w->offsets = static_cast<std::int64_t*>(take(8 * (std::size_t(E) + 1)));
    w->row_of = static_cast<std::int64_t*>(take(8 * rows));
    w->token = static_cast<std::int32_t*>(take(4 * rows));
    w->xs = static_cast<float*>(take(4 * rows * d));
    w->ys = static_cast<float*>(take(4 * rows * d));
    w->a = static_cast<float*>(take(4 * rows * f));
    w->b = static_cast<float*>(take(4 * rows * f));
    w->h = static_cast<float*>(take(4 * rows * f));
    mw::Instance inst = mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& g) {
        namespace mc = mw::moe::cuda;
        const auto* ex = g.in<const std::int32_t>("experts");
        mc::dispatch_sort(ex, w->offsets, w->token, w->row_of, T, k, E, g.stream);
        mc::permute_rows(g.in<const float>("x"), w->token, w->xs, int(rows), d, g.stream);
        mc::grouped_gemm(w->xs, g.in<const float>("w_gate"), w->a, w->offsets, E, int(rows), f, d, g.stream);
        mc::grouped_gemm(w->xs, g.in<const float>("w_up"), w->b, w->offsets, E, int(rows), f, d, g.stream);
        mw::model::kernels::swiglu_forward(w->a, w->b, w->h, std::int64_t(rows) * f, g.stream);
        mc::grouped_gemm(w->h, g.in<const float>("w_down"), w->ys, w->offsets, E, int(rows), d, f, g.stream);
        mc::unpermute_combine(g.in<const float>("x"), w->ys, w->row_of, ex, g.in<const float>("weights"),
                              g.out<float>("y"), T, k, d, g.stream);
    });
#if !MEMWALL_EMU
    inst.workspace_bytes += w->bytes;  // cudaMalloc: invisible to the heap tracker
#endif
    inst.counters = [&p] { return mw::moe::ffn_counters(p, -1); };
    return inst;
}

}  // namespace

MW_REGISTER_VARIANT(moe_ffn_sorted_cuda, {
    .name = "sorted_grouped", .op = "moe_ffn", .lever = "moe",
    .role = mw::Role::reference, .backend = MW_CUDA_BACKEND, .rung = 0,
    .rationale = "counting sort by expert, permute, one grouped-GEMM launch per projection (16x16 tiles), "
                 "SwiGLU, weighted unpermute onto the residual",
    .needs = {"gpu"},
    .prepare = prepare_ffn_cuda });
