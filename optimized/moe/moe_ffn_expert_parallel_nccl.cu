// moe_ffn on GPUs, rung 2: expert_parallel_nccl — the CPU's expert_parallel
// (optimized/moe/moe_ffn_expert_parallel.cpp) with one GPU per MPI rank and
// NCCL moving the rows between GPUs.
//
// Changes from rung 0 (reference/moe/moe_ffn.cu, one GPU): rank r of P
// (started by mpirun, GPU r % devices) holds experts [E r / P, E (r+1) / P)
// and owns tokens [T r / P, T (r+1) / P) (kernels/moe/expert_parallel.hpp's
// Split). Per call: the device counting sort of its tokens' assignments
// (rows then grouped by destination rank), the E counts to the host and an
// MPI_Allgather of them (the sizes of every exchange), the dispatch as one
// NCCL group of ncclSend / ncclRecv per peer (a device copy for its own
// rows), the received rows regrouped by local expert (a device copy per
// source and expert), rung 0's grouped GEMMs and SwiGLU over the local
// experts only, the results put back in received order and sent back (the
// combine: the same group, reversed), rung 0's weighted unpermute for its
// tokens, and the whole y on every rank (an in-place ncclBroadcast from each
// rank of its tokens, in one group). What it buys: each GPU reads 1/P of the
// expert weights and does about 1/P of the FLOPs; what it costs: the two
// exchanges over NVLink / PCIe, a host round trip for the counts, and the
// y gather. Every row's arithmetic is rung 0's (the tiled GEMM's order over K
// does not depend on which block a row sits in), so y is rung 0's bit for bit
// (identical_to). Counters: the exchanged bytes and the alpha-beta model's
// bytes, as the CPU rung reports them.
// Needs `mpirun -n P` with P >= 2 and at least P GPUs (runnable_here says so
// and the run is skipped otherwise); built only when CMake finds MPI, NCCL
// (PyPI's nvidia-nccl-cu13 wheel, scripts/install-deps.sh) and nvcc.
// Run: mpirun -n 2 memwall run moe_ffn --backend cuda --variant expert_parallel_nccl
#include "harness/cuda/launch.hpp"

#if !MEMWALL_EMU && MEMWALL_HAVE_NCCL && MEMWALL_HAVE_MPI
#include <nccl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/cuda/device_memory.hpp"
#include "harness/cuda/device_problem.hpp"
#include "kernels/model/elementwise.cuh"
#include "kernels/moe/expert_parallel.hpp"
#include "kernels/moe/moe.cuh"
#include "reference/moe/moe.hpp"

namespace {

namespace ep = mw::moe::ep;

void nccl_check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(r));
}

// The rung's device memory and NCCL communicator, released with the instance.
struct NcclState {
    ncclComm_t comm = nullptr;
    std::vector<void*> blocks;
    std::size_t bytes = 0;
    // this rank's E + 1 offsets; [P][E] counts; the local experts' offsets (kept
    // here: their host-to-device copy must not outlive them)
    std::vector<std::int64_t> host_off, counts, loff;
    double offrank_bytes = 0;
    template <class T> T* take(std::size_t count) {
        const std::size_t n = sizeof(T) * std::max<std::size_t>(1, count);
        blocks.push_back(mw::cuda::alloc_bytes(n));
        bytes += n;
        return static_cast<T*>(blocks.back());
    }
    ~NcclState() {
        for (void* p : blocks) (void)cudaFree(p);
        if (comm) (void)ncclCommDestroy(comm);
    }
};

mw::Instance prepare_nccl(mw::Problem& p) {
    const ep::World& w = ep::world();
    const int P = w.size, r = w.rank;
    const int T = int(p.shape["tokens"]), d = int(p.shape["d_model"]), f = int(p.shape["d_ff"]),
              E = int(p.shape["experts"]), k = int(p.shape["top_k"]);
    if (P > E)
        throw std::runtime_error("expert_parallel_nccl: " + std::to_string(P) + " ranks for " + std::to_string(E) +
                                 " experts; use at most experts ranks");
    int devices = 0;
    MW_CUDA_CHECK(cudaGetDeviceCount(&devices));
    MW_CUDA_CHECK(cudaSetDevice(r % devices));  // before any allocation of this rank
    const ep::Split split{T, E, P};
    const int t0 = int(split.first_token(r)), Tl = int(split.first_token(r + 1)) - t0;
    const int e0 = split.first_expert(r), e1 = split.first_expert(r + 1), El = e1 - e0;
    const std::size_t rows_max = std::size_t(T) * k;  // any rank sends or receives at most T k rows

    auto st = std::make_shared<NcclState>();
    ncclUniqueId id;
    if (r == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    nccl_check(ncclCommInitRank(&st->comm, P, id, r), "ncclCommInitRank");
    auto* offsets = st->take<std::int64_t>(std::size_t(E) + 1);
    auto* local_off = st->take<std::int64_t>(std::size_t(El) + 1);
    auto* row_of = st->take<std::int64_t>(std::size_t(Tl) * k);
    auto* token = st->take<std::int32_t>(std::size_t(Tl) * k);
    float* xs = st->take<float>(std::size_t(Tl) * k * d);
    float* back = st->take<float>(std::size_t(Tl) * k * d);
    float* recv = st->take<float>(rows_max * d);
    float* xe = st->take<float>(rows_max * d);
    float* ye = st->take<float>(rows_max * d);
    float* a = st->take<float>(rows_max * f);
    float* b = st->take<float>(rows_max * f);
    float* h = st->take<float>(rows_max * f);
    st->host_off.resize(std::size_t(E) + 1);
    st->counts.resize(std::size_t(P) * E);

    mw::Instance inst = mw::cuda::device_instance(p, [=](mw::cuda::DeviceProblem& g) {
        namespace mc = mw::moe::cuda;
        NcclState& s = *st;
        const cudaStream_t stream = g.stream;
        const auto* ex = g.in<const std::int32_t>("experts") + std::size_t(t0) * k;
        const auto* x = g.in<const float>("x");
        mc::dispatch_sort(ex, offsets, token, row_of, Tl, k, E, stream);
        mc::permute_rows(x + std::size_t(t0) * d, token, xs, Tl * k, d, stream);
        // Every rank's per-expert counts: the sizes of both exchanges.
        MW_CUDA_CHECK(cudaMemcpyAsync(s.host_off.data(), offsets, 8 * (std::size_t(E) + 1), cudaMemcpyDeviceToHost, stream));
        MW_CUDA_CHECK(cudaStreamSynchronize(stream));
        std::vector<std::int64_t> mine(static_cast<std::size_t>(E));
        for (int e = 0; e < E; ++e) mine[std::size_t(e)] = s.host_off[std::size_t(e) + 1] - s.host_off[std::size_t(e)];
        MPI_Allgather(mine.data(), E, MPI_INT64_T, s.counts.data(), E, MPI_INT64_T, MPI_COMM_WORLD);
        auto cnt = [&](int q, int e) { return s.counts[std::size_t(q) * E + e]; };
        // Rows to and from each peer, and where they sit.
        std::vector<std::int64_t> s0(static_cast<std::size_t>(P)), sn(static_cast<std::size_t>(P)),
            r0(static_cast<std::size_t>(P)), rn(static_cast<std::size_t>(P));
        std::int64_t recv_rows = 0;
        for (int q = 0; q < P; ++q) {
            s0[std::size_t(q)] = s.host_off[std::size_t(split.first_expert(q))];
            sn[std::size_t(q)] = s.host_off[std::size_t(split.first_expert(q + 1))] - s0[std::size_t(q)];
            r0[std::size_t(q)] = recv_rows;
            for (int e = e0; e < e1; ++e) rn[std::size_t(q)] += cnt(q, e);
            recv_rows += rn[std::size_t(q)];
        }
        // exchange(from, to): rows [s0, s0 + sn) of `from` go to peer q, rows
        // [r0, r0 + rn) of `to` come from peer q (reversed for the combine).
        auto exchange = [&](const float* out, const std::vector<std::int64_t>& o0, const std::vector<std::int64_t>& on,
                            float* in, const std::vector<std::int64_t>& i0, const std::vector<std::int64_t>& in_n) {
            nccl_check(ncclGroupStart(), "ncclGroupStart");
            for (int q = 0; q < P; ++q) {
                const auto i = std::size_t(q);
                if (q == r) {
                    if (on[i])
                        MW_CUDA_CHECK(cudaMemcpyAsync(in + i0[i] * d, out + o0[i] * d, sizeof(float) * on[i] * d,
                                                      cudaMemcpyDeviceToDevice, stream));
                    continue;
                }
                if (on[i]) nccl_check(ncclSend(out + o0[i] * d, std::size_t(on[i]) * d, ncclFloat, q, s.comm, stream), "ncclSend");
                if (in_n[i]) nccl_check(ncclRecv(in + i0[i] * d, std::size_t(in_n[i]) * d, ncclFloat, q, s.comm, stream), "ncclRecv");
            }
            nccl_check(ncclGroupEnd(), "ncclGroupEnd");
        };
        exchange(xs, s0, sn, recv, r0, rn);
        // Regroup by local expert (sources in rank order within an expert).
        std::vector<std::int64_t>& loff = s.loff;
        loff.assign(std::size_t(El) + 1, 0);
        std::vector<std::int64_t> at(std::size_t(P) * El);  // where source q's rows for expert e0 + i start in recv
        for (int q = 0; q < P; ++q) {
            std::int64_t o = r0[std::size_t(q)];
            for (int i = 0; i < El; ++i) at[std::size_t(q) * El + i] = o, o += cnt(q, e0 + i);
        }
        auto regroup = [&](float* dst, const float* src, bool to_expert_order) {
            std::int64_t n = 0;
            for (int i = 0; i < El; ++i)
                for (int q = 0; q < P; ++q) {
                    const std::int64_t c = cnt(q, e0 + i);
                    if (c == 0) continue;
                    const std::int64_t from = at[std::size_t(q) * El + i];
                    float* to_p = to_expert_order ? dst + n * d : dst + from * d;
                    const float* from_p = to_expert_order ? src + from * d : src + n * d;
                    MW_CUDA_CHECK(cudaMemcpyAsync(to_p, from_p, sizeof(float) * c * d, cudaMemcpyDeviceToDevice, stream));
                    n += c;
                }
        };
        for (int i = 0; i < El; ++i) {
            std::int64_t n = 0;
            for (int q = 0; q < P; ++q) n += cnt(q, e0 + i);
            loff[std::size_t(i) + 1] = loff[std::size_t(i)] + n;
        }
        regroup(xe, recv, true);
        MW_CUDA_CHECK(cudaMemcpyAsync(local_off, loff.data(), 8 * loff.size(), cudaMemcpyHostToDevice, stream));
        const std::size_t wo = std::size_t(e0) * d * f;
        mc::grouped_gemm(xe, g.in<const float>("w_gate") + wo, a, local_off, El, int(recv_rows), f, d, stream);
        mc::grouped_gemm(xe, g.in<const float>("w_up") + wo, b, local_off, El, int(recv_rows), f, d, stream);
        mw::model::kernels::swiglu_forward(a, b, h, recv_rows * f, stream);
        mc::grouped_gemm(h, g.in<const float>("w_down") + wo, ye, local_off, El, int(recv_rows), d, f, stream);
        regroup(recv, ye, false);
        exchange(recv, r0, rn, back, s0, sn);
        float* y = g.out<float>("y");
        mc::unpermute_combine(x + std::size_t(t0) * d, back, row_of, ex, g.in<const float>("weights") + std::size_t(t0) * k,
                              y + std::size_t(t0) * d, Tl, k, d, stream);
        // Every rank gets the whole y.
        nccl_check(ncclGroupStart(), "ncclGroupStart");
        for (int q = 0; q < P; ++q) {
            const std::size_t first = std::size_t(split.first_token(q)) * d,
                              n = std::size_t(split.first_token(q + 1) - split.first_token(q)) * d;
            if (n) nccl_check(ncclBroadcast(y + first, y + first, n, ncclFloat, q, s.comm, stream), "ncclBroadcast");
        }
        nccl_check(ncclGroupEnd(), "ncclGroupEnd");
        double off = 0;
        for (int q = 0; q < P; ++q)
            for (int e = 0; e < E; ++e)
                if (e < split.first_expert(q) || e >= split.first_expert(q + 1)) off += double(cnt(q, e));
        s.offrank_bytes = 2.0 * off * d * 4.0;
    });
    inst.workspace_bytes += st->bytes;  // cudaMalloc: invisible to the heap tracker
    inst.run = [run = inst.run, st] { run(); };
    inst.agree_estimate = [](double est) {
        MPI_Bcast(&est, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        return est;
    };
    inst.counters = [&p, st, P, T, k, d] {
        auto c = mw::moe::ffn_counters(p, -1);
        c["ranks"] = P;
        c["alltoall_bytes"] = st->offrank_bytes;                                  // both exchanges, all ranks
        c["alltoall_bytes_model"] = mw::moe::ep::alltoall_bytes_model(T, k, d, P);
        return c;
    };
    return inst;
}

}  // namespace

MW_REGISTER_VARIANT(moe_ffn_expert_parallel_nccl_cuda, {
    .name = "expert_parallel_nccl", .op = "moe_ffn", .lever = "moe",
    .role = mw::Role::optimized, .backend = MW_CUDA_BACKEND, .rung = 2,
    .rationale = "experts split over P GPUs, one per MPI rank: NCCL send/recv groups for the dispatch and the "
                 "combine, rung 0's grouped GEMMs on the local experts; 1/P of the weights and FLOPs per GPU",
    .needs = {"gpu", "mpi", "gpu_per_rank"},
    .prepare = prepare_nccl,
    .accepts = mw::moe::ep::ranks_fit_experts,
    .identical_to = "sorted_grouped" });

#elif !MEMWALL_EMU
#include "harness/unbuilt.hpp"
MW_REGISTER_UNBUILT(moe_ffn_expert_parallel_nccl_cuda,
                    {.op = "moe_ffn", .name = "expert_parallel_nccl",
                     .why = "it needs NCCL and MPI, and CMake did not find both when this build was configured: "
                            "install openmpi-bin and libopenmpi-dev, and the nvidia-nccl wheel "
                            "(scripts/install-deps.sh does both), then configure and build again"});
#endif  // !MEMWALL_EMU && MEMWALL_HAVE_NCCL && MEMWALL_HAVE_MPI
