// moe_ffn on the GPU, rung 1 (vendor): cublas_grouped — rung 0's dispatch,
// with the expert GEMMs as cuBLAS grouped GEMMs.
//
// Changes from rung 0 (reference/moe/moe_ffn.cu): the three grouped_gemm
// launches (16 x 16 shared-memory tiles) become two cublasGemmGroupedBatchedEx
// calls: one for x Wg and x Wu of every expert (2 problems per expert with
// rows), one for h Wd. What it should buy: cuBLAS's tuned fp32 GEMM kernels
// on each expert's block (rung 0's tiles are far from the FMA roof), one call
// for all experts instead of a launch per expert. What it costs: a grouped
// GEMM takes its sizes on the host, so each call copies the E + 1 offsets of
// the device's counting sort to the host and waits for them (one small
// device-to-host copy and a stream synchronization per call), then sends the
// per-problem matrix pointers to the device (a host-to-device copy).
// Arithmetic: CUBLAS_COMPUTE_32F (fp32 FMA, no TF32), so the result is
// checked against the oracle with the fp32 tolerance; cuBLAS's summation
// order is its own, so it is not bit-identical to rung 0.
// Layout: cuBLAS is column-major. Row-major X_e [n_e][K] times row-major
// W_e [K][N] into Y_e [n_e][N] is, column-major, Y_e^T (N x n_e) = W_e^T
// (N x K, lda = N) X_e^T (K x n_e, ldb = K): (m, n, k) = (N, n_e, K), both
// operands untransposed. Per the cuBLAS documentation, the per-group arrays
// (transposes, m, n, k, leading dimensions, alpha, beta, group sizes) are
// host arrays of length group_count, and Aarray/Barray/Carray device arrays
// of device pointers, one per problem; experts with no rows are left out.
// Real GPU only (the emulator has no cuBLAS).
// Run: memwall run moe_ffn --backend cuda
#include "harness/cuda/launch.hpp"

#if !MEMWALL_EMU
#include <cublas_v2.h>

#include <memory>
#include <vector>

#include "harness/cuda/cublas.hpp"
#include "harness/cuda/device_memory.hpp"
#include "harness/cuda/device_problem.hpp"
#include "kernels/model/elementwise.cuh"
#include "kernels/moe/moe.cuh"
#include "reference/moe/moe.hpp"

namespace {

using mw::cuda::cublas_check;

// Device memory of the rung, one allocation, freed with the instance.
struct Arena {
    void* base = nullptr;
    std::size_t used = 0, bytes = 0;
    explicit Arena(std::size_t n) : bytes(n) { base = mw::cuda::alloc_bytes(n); }
    ~Arena() { (void)cudaFree(base); }
    template <class T> T* take(std::size_t count) {
        T* p = reinterpret_cast<T*>(static_cast<char*>(base) + used);
        used += (sizeof(T) * count + 255) / 256 * 256;
        return p;
    }
};

// One grouped call: Y_e = X_e W_e for every listed problem, Y_e [n_e][N].
struct GroupedCall {
    std::vector<cublasOperation_t> trans;
    std::vector<int> m, n, k, lda, ldb, ldc, size;
    std::vector<float> alpha, beta;
    std::vector<const void*> a, b;
    std::vector<void*> c;
    void add(const float* W, const float* X, float* Y, int rows, int N, int K) {
        trans.push_back(CUBLAS_OP_N);
        m.push_back(N), n.push_back(rows), k.push_back(K);
        lda.push_back(N), ldb.push_back(K), ldc.push_back(N);
        alpha.push_back(1.0f), beta.push_back(0.0f), size.push_back(1);
        a.push_back(W), b.push_back(X), c.push_back(Y);
    }
    // dev_ptrs: room for 3 problems() pointers on the device.
    void run(cublasHandle_t h, void** dev_ptrs, cudaStream_t stream) {
        const int g = int(m.size());
        if (g == 0) return;
        std::vector<const void*> ptrs(a);
        ptrs.insert(ptrs.end(), b.begin(), b.end());
        ptrs.insert(ptrs.end(), c.begin(), c.end());
        MW_CUDA_CHECK(cudaMemcpyAsync(dev_ptrs, ptrs.data(), sizeof(void*) * ptrs.size(), cudaMemcpyHostToDevice, stream));
        cublas_check(cublasGemmGroupedBatchedEx(h, trans.data(), trans.data(), m.data(), n.data(), k.data(), alpha.data(),
                                                reinterpret_cast<const void* const*>(dev_ptrs), CUDA_R_32F, lda.data(),
                                                reinterpret_cast<const void* const*>(dev_ptrs + g), CUDA_R_32F, ldb.data(),
                                                beta.data(), dev_ptrs + 2 * g, CUDA_R_32F, ldc.data(), g, size.data(),
                                                CUBLAS_COMPUTE_32F),
                     "cublasGemmGroupedBatchedEx");
        // The host arrays above must outlive the copy of `ptrs`: wait for it.
        MW_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
};

mw::Instance prepare_cublas_grouped(mw::Problem& p) {
    const int T = int(p.shape["tokens"]), d = int(p.shape["d_model"]), f = int(p.shape["d_ff"]),
              E = int(p.shape["experts"]), k = int(p.shape["top_k"]);
    const std::size_t rows = std::size_t(T) * k;
    std::size_t bytes = 0;
    for (std::size_t n : {8 * (std::size_t(E) + 1), 8 * rows, 4 * rows, 4 * rows * d, 4 * rows * d, 4 * rows * f,
                          4 * rows * f, 4 * rows * f, sizeof(void*) * 3 * 2 * std::size_t(E)})
        bytes += (n + 255) / 256 * 256;
    auto ar = std::make_shared<Arena>(bytes);
    auto* offsets = ar->take<std::int64_t>(std::size_t(E) + 1);
    auto* row_of = ar->take<std::int64_t>(rows);
    auto* token = ar->take<std::int32_t>(rows);
    float *xs = ar->take<float>(rows * d), *ys = ar->take<float>(rows * d);
    float *a = ar->take<float>(rows * f), *b = ar->take<float>(rows * f), *h = ar->take<float>(rows * f);
    void** ptrs = ar->take<void*>(3 * 2 * std::size_t(E));
    std::shared_ptr<cublasContext> handle = mw::cuda::make_cublas_handle();
    cublas_check(cublasSetPointerMode(handle.get(), CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    auto host_off = std::make_shared<std::vector<std::int64_t>>(std::size_t(E) + 1);
    mw::Instance inst = mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& g) {
        namespace mc = mw::moe::cuda;
        const auto* ex = g.in<const std::int32_t>("experts");
        mc::dispatch_sort(ex, offsets, token, row_of, T, k, E, g.stream);
        mc::permute_rows(g.in<const float>("x"), token, xs, int(rows), d, g.stream);
        // The grouped GEMM's sizes live on the host.
        MW_CUDA_CHECK(cudaMemcpyAsync(host_off->data(), offsets, 8 * (std::size_t(E) + 1), cudaMemcpyDeviceToHost, g.stream));
        MW_CUDA_CHECK(cudaStreamSynchronize(g.stream));
        cublas_check(cublasSetStream(handle.get(), g.stream), "cublasSetStream");
        const auto* wg = g.in<const float>("w_gate");
        const auto* wu = g.in<const float>("w_up");
        const auto* wd = g.in<const float>("w_down");
        GroupedCall up, down;
        for (int e = 0; e < E; ++e) {
            const std::int64_t r0 = (*host_off)[std::size_t(e)], n = (*host_off)[std::size_t(e) + 1] - r0;
            if (n == 0) continue;
            const std::size_t wo = std::size_t(e) * d * f;
            up.add(wg + wo, xs + r0 * d, a + r0 * f, int(n), f, d);
            up.add(wu + wo, xs + r0 * d, b + r0 * f, int(n), f, d);
            down.add(wd + wo, h + r0 * f, ys + r0 * d, int(n), d, f);
        }
        up.run(handle.get(), ptrs, g.stream);
        mw::model::kernels::swiglu_forward(a, b, h, std::int64_t(rows) * f, g.stream);
        down.run(handle.get(), ptrs, g.stream);
        mc::unpermute_combine(g.in<const float>("x"), ys, row_of, ex, g.in<const float>("weights"), g.out<float>("y"), T,
                              k, d, g.stream);
    });
    inst.workspace_bytes += ar->bytes;  // cudaMalloc: invisible to the heap tracker
    inst.counters = [&p] { return mw::moe::ffn_counters(p, -1); };
    inst.run = [run = inst.run, ar, handle] { run(); };  // the arena and handle live as long as the instance
    return inst;
}

}  // namespace

MW_REGISTER_VARIANT(moe_ffn_cublas_grouped_cuda, {
    .name = "cublas_grouped", .op = "moe_ffn", .lever = "moe",
    .role = mw::Role::vendor, .backend = MW_CUDA_BACKEND, .rung = 1,
    .rationale = "rung 0's sort and permute, then every expert's GEMMs in one cublasGemmGroupedBatchedEx call per "
                 "projection (fp32 compute): cuBLAS's kernels on each expert's block",
    .needs = {"gpu"},
    .prepare = prepare_cublas_grouped });

#endif  // !MEMWALL_EMU
