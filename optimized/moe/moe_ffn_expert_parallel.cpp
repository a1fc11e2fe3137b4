// moe_ffn, rung 4: expert_parallel — the experts split over P MPI processes.
//
// Changes from rung 2 (sorted_grouped): rank r of P holds experts
// [E r / P, E (r+1) / P) and owns tokens [T r / P, T (r+1) / P) (data
// parallel outside the layer). Per call: sort its tokens' assignments by
// expert (then they are grouped by destination rank too, since a rank's
// experts are contiguous), exchange the per-expert counts (Allgather of E
// integers), send each row to its expert's rank (dispatch: MPI_Alltoallv),
// regroup the received rows by local expert, run each local expert once on
// its block (expert_ffn, as rung 2), send the results back (combine:
// MPI_Alltoallv) and add them, weighted, to the residual (combine, as rung
// 2); an Allgatherv then gives every rank the whole y (the harness checks it
// on every rank). What it buys: each process holds and reads 1/P of the
// expert weights, and does about 1/P of the FLOPs. What it costs: the two
// AllToAlls, about 2 T k d 4 (P-1)/P bytes on the wire in all, reported
// against the alpha-beta model (alpha and beta measured by a ping-pong
// between ranks 0 and 1 at prepare time) as counters. Each row's arithmetic
// is rung 2's, so the output is rung 2's bit for bit (identical_to).
//
// Needs `mpirun -n P memwall ...` with P >= 2 (runnable_here's "mpi"); built
// only when CMake finds MPI. The MPI glue (start-up, the split of experts and
// tokens, the ping-pong, the y gather) is kernels/moe/expert_parallel.hpp. Only rank 0 reports (commands/cli.cpp); every
// rank times the same number of calls (Instance::agree_estimate: rank 0's
// warm-up estimate sizes every rank's batches).
#include "kernels/moe/expert_parallel.hpp"
#ifdef MEMWALL_HAVE_MPI

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "kernels/moe/dispatch.hpp"
#include "reference/moe/moe.hpp"

namespace mw::moe {
namespace {

using ep::Clock;
using ep::since;

struct EpState {
    GroupedBuffers local;                 // send rows, received rows regrouped, scratch
    std::vector<float> recv, back;        // rows received / results received back
    std::vector<std::int64_t> counts;     // [P][E]: rows each rank sends to each expert
    double alpha = 0, beta = 0;
    double a2a_s = 0, compute_s = 0, gather_s = 0, offrank_bytes = 0;
    long calls = 0;
};

Instance prepare_expert_parallel(Problem& p) {
    const ep::World& w = ep::world();
    const int P = w.size, r = w.rank;
    const long T = p.shape["tokens"], d = p.shape["d_model"], f = p.shape["d_ff"];
    const int E = int(p.shape["experts"]), k = int(p.shape["top_k"]);
    if (P > E)
        throw std::runtime_error("expert_parallel: " + std::to_string(P) + " ranks for " + std::to_string(E) +
                                 " experts; use at most experts ranks");
    const ep::Split split{T, E, P};
    auto first_expert = [=](int q) { return split.first_expert(q); };
    auto first_token = [=](int q) { return split.first_token(q); };
    const long t0 = first_token(r), Tl = first_token(r + 1) - t0;
    const int e0 = first_expert(r), e1 = first_expert(r + 1);
    const float* x = p.in("x").as<float>();
    const std::int32_t* ex = p.in("experts").as<std::int32_t>();
    const float* wt = p.in("weights").as<float>();
    const Experts weights{p.in("w_gate").as<float>(), p.in("w_up").as<float>(), p.in("w_down").as<float>(), d, f};
    float* y = p.out("y").as<float>();
    auto st = std::make_shared<EpState>();
    std::tie(st->alpha, st->beta) = ep::measure_alpha_beta();

    Instance inst;
    inst.run = [=] {
        EpState& s = *st;
        // Sort this rank's assignments by expert: rows for rank q are then
        // [offsets[first_expert(q)], offsets[first_expert(q + 1)]).
        Dispatch disp = sort_by_expert(ex + t0 * k, Tl, k, E, -1);
        s.local.xs.resize(std::size_t(std::max(1L, long(disp.rows())) * d));
        permute_rows(x + t0 * d, d, disp.token.data(), disp.rows(), s.local.xs.data());
        std::vector<std::int64_t> mine(static_cast<std::size_t>(E));
        for (int e = 0; e < E; ++e) mine[std::size_t(e)] = disp.offsets[std::size_t(e) + 1] - disp.offsets[std::size_t(e)];
        s.counts.resize(std::size_t(P * E));
        MPI_Allgather(mine.data(), E, MPI_INT64_T, s.counts.data(), E, MPI_INT64_T, MPI_COMM_WORLD);
        auto cnt = [&](int q, int e) { return s.counts[std::size_t(q * E + e)]; };
        // Element counts and displacements of both exchanges (int: MPI's).
        std::vector<int> sc(static_cast<std::size_t>(P)), sd(static_cast<std::size_t>(P)), rc(static_cast<std::size_t>(P)), rd(static_cast<std::size_t>(P));
        for (int q = 0; q < P; ++q) {
            sc[std::size_t(q)] = int((disp.offsets[std::size_t(first_expert(q + 1))] - disp.offsets[std::size_t(first_expert(q))]) * d);
            sd[std::size_t(q)] = int(disp.offsets[std::size_t(first_expert(q))] * d);
            long from_q = 0;
            for (int e = e0; e < e1; ++e) from_q += cnt(q, e);
            rc[std::size_t(q)] = int(from_q * d);
            rd[std::size_t(q)] = q ? rd[std::size_t(q) - 1] + rc[std::size_t(q) - 1] : 0;
        }
        const long recv_rows = (rd.back() + rc.back()) / d;
        s.recv.resize(std::size_t(std::max(1L, recv_rows) * d));
        auto ta = Clock::now();
        MPI_Alltoallv(s.local.xs.data(), sc.data(), sd.data(), MPI_FLOAT, s.recv.data(), rc.data(), rd.data(), MPI_FLOAT,
                      MPI_COMM_WORLD);
        double a2a = since(ta);
        // Regroup by local expert (sources in rank order within an expert),
        // run each expert once, and put the results back in received order.
        auto tc = Clock::now();
        long most = 0;
        for (int e = e0; e < e1; ++e) {
            long n = 0;
            for (int q = 0; q < P; ++q) n += cnt(q, e);
            most = std::max(most, n);
        }
        s.local.ys.resize(std::size_t(std::max(1L, most) * d) * 2);
        s.local.scratch.resize(std::size_t(std::max(1L, 3 * most * f)));
        float *xe = s.local.ys.data(), *ye = s.local.ys.data() + most * d;
        for (int e = e0; e < e1; ++e) {
            // Where source q's rows for e start in the receive buffer.
            std::vector<long> at(static_cast<std::size_t>(P));
            long n = 0;
            for (int q = 0; q < P; ++q) {
                long off = rd[std::size_t(q)] / d;
                for (int e2 = e0; e2 < e; ++e2) off += cnt(q, e2);
                at[std::size_t(q)] = off;
                std::copy_n(s.recv.data() + off * d, cnt(q, e) * d, xe + n * d);
                n += cnt(q, e);
            }
            expert_ffn(weights, e, xe, n, ye, s.local.scratch.data());
            n = 0;
            for (int q = 0; q < P; ++q) {
                std::copy_n(ye + n * d, cnt(q, e) * d, s.recv.data() + at[std::size_t(q)] * d);
                n += cnt(q, e);
            }
        }
        s.compute_s += since(tc);
        s.back.resize(std::size_t(std::max(1L, long(disp.rows())) * d));
        ta = Clock::now();
        MPI_Alltoallv(s.recv.data(), rc.data(), rd.data(), MPI_FLOAT, s.back.data(), sc.data(), sd.data(), MPI_FLOAT,
                      MPI_COMM_WORLD);
        a2a += since(ta);
        s.a2a_s += a2a;
        combine(x + t0 * d, s.back.data(), disp.row_of.data(), ex + t0 * k, wt + t0 * k, Tl, k, d, y + t0 * d);
        // Every rank gets the whole y.
        auto tg = Clock::now();
        ep::allgather_tokens(y, d, split);
        s.gather_s += since(tg);
        // Bytes that crossed ranks in both exchanges, over all ranks.
        s.offrank_bytes = 2.0 * ep::offrank_rows(s.counts, split, 1) * double(d) * 4.0;
        ++s.calls;
    };
    // Every rank makes as many timed calls as rank 0 (each call is collective).
    inst.agree_estimate = [](double est) {
        MPI_Bcast(&est, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        return est;
    };
    inst.counters = [&p, st, P, T, k, d] {
        const EpState& s = *st;
        auto c = ffn_counters(p, -1);
        const double n = double(std::max(1L, s.calls));
        // The alpha-beta model: per rank, P - 1 messages and its share of
        // 2 T k d 4 (P-1)/P bytes, in each of the two exchanges.
        const double model_bytes = mw::moe::ep::alltoall_bytes_model(T, k, d, P);
        c["ranks"] = P;
        c["alpha_us"] = s.alpha * 1e6;
        c["beta_gbps"] = s.beta / 1e9;
        c["alltoall_s"] = s.a2a_s / n;                // rank 0's dispatch + combine, mean per call
        c["alltoall_bytes"] = s.offrank_bytes;        // measured: rows that crossed ranks, both ways, all ranks
        c["alltoall_bytes_model"] = model_bytes;      // 2 T k d dtype (P-1)/P
        c["alltoall_model_s"] = 2.0 * (P - 1) * s.alpha + model_bytes / P / s.beta;
        c["expert_compute_s"] = s.compute_s / n;      // rank 0's local experts, mean per call
        c["allgather_s"] = s.gather_s / n;
        return c;
    };
    return inst;
}

}  // namespace
}  // namespace mw::moe

MW_REGISTER_VARIANT(moe_ffn_expert_parallel_cpu, {
    .name = "expert_parallel", .op = "moe_ffn", .lever = "moe",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 4,
    .rationale = "experts split over P MPI ranks: dispatch AllToAllv, one GEMM per local expert, combine "
                 "AllToAllv; 1/P of the weights and FLOPs per rank, plus the exchange",
    .needs = {"mpi"},
    .bytes = mw::moe::ep::exchange_rung_bytes,
    .prepare = mw::moe::prepare_expert_parallel,
    .accepts = mw::moe::ep::ranks_fit_experts,
    .identical_to = "sorted_grouped" });
#else
#include "harness/unbuilt.hpp"
MW_REGISTER_UNBUILT(moe_ffn_expert_parallel_cpu, {.op = "moe_ffn", .name = "expert_parallel", .why = mw::moe::ep::kBuiltWithoutMpi});
#endif  // MEMWALL_HAVE_MPI
