// moe_ffn, rung 5: expert_parallel_overlap — rung 4's exchanges cut into
// chunks and overlapped with the expert compute.
//
// Changes from rung 4 (expert_parallel): each rank's tokens are cut into C
// contiguous chunks (kDefaultChunks; some chunks are empty when C exceeds a
// rank's tokens, and every rank still takes part in every exchange). One
// Allgather sends every chunk's per-expert counts; then per chunk a
// dispatch, the local experts' GEMMs and a combine, software-pipelined with
// non-blocking collectives:
//
//     post dispatch(0)
//     for c in 0 .. C-1:
//         post dispatch(c + 1)                       (MPI_Ialltoallv)
//         wait dispatch(c); run chunk c's experts, calling MPI_Test on the
//           requests in flight between expert blocks
//         post combine(c)                            (MPI_Ialltoallv)
//         wait combine(c - 1); weighted scatter of chunk c - 1 into y
//     wait combine(C - 1); weighted scatter of chunk C - 1
//
// What it should buy: the exchange of chunk c +- 1 hidden behind chunk c's
// GEMMs, leaving about 1/C of rung 4's AllToAll time exposed (the first
// dispatch and the last combine), for C times the messages (C (P - 1)
// alpha more in the alpha-beta model) and expert GEMMs of about T k / (E C)
// rows instead of T k / E, each of which packs its expert's weights again
// (the packed GEMM packs B on every call): C times rung 4's packing.
//
// What it can really buy here is the question this rung measures. Open MPI
// over shared memory moves a non-blocking collective only inside MPI calls
// (no asynchronous progress thread);
// its shared-memory transport copies large messages with the CPU of a rank
// that is inside such a call (single-copy or through a bounce buffer). So the
// MPI_Test calls between expert blocks are what lets anything move at all,
// and with 2 ranks x 1 thread on 2 cores there is no idle core to do the
// copying: what overlap can hide is waiting (one rank's compute finishing
// while the other's data is already there), not the copy. The counters say
// which: comm_s (the same exchanges, in the same order, with no compute),
// compute_s (the same compute with no exchange), total_s (the pipelined
// section) and overlap_fraction = (comm_s + compute_s - total_s) /
// min(comm_s, compute_s): 1 = the shorter one fully hidden, 0 = none, below
// 0 = interleaving cost more than it hid. The three are measured at prepare
// time, interleaved, best of kMeasureReps each, on every rank in step.
//
// Each row's arithmetic is rung 4's (and so rung 2's): the GEMM kernel's
// result for a row does not depend on the block the row sits in
// (kernels/moe/dispatch.hpp, expert_ffn), and each token's k slots are
// combined in ascending expert order as before. So the output is
// sorted_grouped's bit for bit (identical_to), whatever C.
//
// Needs `mpirun -n P memwall ...` with P >= 2; built only when CMake finds MPI.
#include "kernels/moe/expert_parallel.hpp"
#ifdef MEMWALL_HAVE_MPI

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>

#include "kernels/moe/dispatch.hpp"
#include "reference/moe/moe.hpp"

namespace mw::moe {
namespace ep {
namespace {

// C = 4: at the shape (T k / E = 1024 rows per expert, P = 2) an
// expert's GEMMs in a chunk are still 256 rows, tall enough for the packed
// GEMM, while all but a quarter of the exchange can hide.
constexpr int kDefaultChunks = 4;
// The most rows of an expert block between two MPI_Test calls while an
// exchange is in flight (a longer block is cut into near-equal parts). Few
// parts: the packed GEMM packs the expert's weights again on every call
// (3 d d_ff floats, whatever the rows), so each part costs a repack; at the
// issue's shape with 4 chunks an expert's block (~256 rows) is one part.
constexpr long kPollRows = 512;
constexpr int kMeasureReps = 3;

}  // namespace

void expert_parallel_overlap_ffn(const FfnArgs& a, int C, OverlapState& st, OverlapMode mode) {
    if (C < 1) throw std::invalid_argument("expert_parallel_overlap: chunks = " + std::to_string(C) + "; need >= 1");
    const World& w = world();
    const int P = w.size, r = w.rank, E = a.E, k = a.k;
    const long d = a.d, f = a.w.d_ff;
    const Split split{a.T, E, P};
    const long t0 = split.first_token(r), Tl = split.first_token(r + 1) - t0;
    const int e0 = split.first_expert(r), e1 = split.first_expert(r + 1);
    auto chunk_token = [&](int c) { return t0 + Tl * c / C; };  // first token of chunk c
    const bool exchange = mode != OverlapMode::compute_only;
    if (!exchange && st.disp.size() != std::size_t(C))
        throw std::logic_error("expert_parallel_overlap: compute_only needs a previous call with the same chunks");

    if (exchange) {
        // Sort and permute each chunk's assignments; rows for rank q of chunk c
        // are then [offsets[first_expert(q)], offsets[first_expert(q + 1)]) of
        // the chunk's block.
        st.disp.resize(std::size_t(C));
        st.send_row0.assign(std::size_t(C) + 1, 0);
        for (int c = 0; c < C; ++c) {
            st.disp[std::size_t(c)] = sort_by_expert(a.experts + chunk_token(c) * k, chunk_token(c + 1) - chunk_token(c), k, E, -1);
            st.send_row0[std::size_t(c) + 1] = st.send_row0[std::size_t(c)] + st.disp[std::size_t(c)].rows();
        }
        st.xs.resize(std::size_t(std::max(1L, st.send_row0.back()) * d));
        st.back.resize(st.xs.size());
        for (int c = 0; c < C; ++c)
            permute_rows(a.x + chunk_token(c) * d, d, st.disp[std::size_t(c)].token.data(), st.disp[std::size_t(c)].rows(),
                         st.xs.data() + st.send_row0[std::size_t(c)] * d);
        // Every rank's per-chunk, per-expert counts, in one exchange.
        std::vector<std::int64_t> mine(std::size_t(C) * std::size_t(E));
        for (int c = 0; c < C; ++c)
            for (int e = 0; e < E; ++e)
                mine[std::size_t(c * E + e)] = st.disp[std::size_t(c)].offsets[std::size_t(e) + 1] - st.disp[std::size_t(c)].offsets[std::size_t(e)];
        st.counts.resize(std::size_t(P) * mine.size());
        MPI_Allgather(mine.data(), C * E, MPI_INT64_T, st.counts.data(), C * E, MPI_INT64_T, MPI_COMM_WORLD);
        // Element counts and displacements of both exchanges of every chunk,
        // relative to the chunk's first row in xs (send) and recv (receive).
        st.sc.assign(std::size_t(C), std::vector<int>(std::size_t(P)));
        st.sd = st.rc = st.rd = st.sc;
        st.recv_row0.assign(std::size_t(C) + 1, 0);
        for (int c = 0; c < C; ++c) {
            const Dispatch& disp = st.disp[std::size_t(c)];
            long from_all = 0;
            for (int q = 0; q < P; ++q) {
                const std::int64_t s0 = disp.offsets[std::size_t(split.first_expert(q))];
                st.sc[std::size_t(c)][std::size_t(q)] = int((disp.offsets[std::size_t(split.first_expert(q + 1))] - s0) * d);
                st.sd[std::size_t(c)][std::size_t(q)] = int(s0 * d);
                long from_q = 0;
                for (int e = e0; e < e1; ++e) from_q += st.counts[std::size_t((q * C + c) * E + e)];
                st.rc[std::size_t(c)][std::size_t(q)] = int(from_q * d);
                st.rd[std::size_t(c)][std::size_t(q)] = int(from_all * d);
                from_all += from_q;
            }
            st.recv_row0[std::size_t(c) + 1] = st.recv_row0[std::size_t(c)] + from_all;
        }
        st.recv.resize(std::size_t(std::max(1L, st.recv_row0.back()) * d));
        st.out.resize(st.recv.size());
    }
    auto cnt = [&](int q, int c, int e) { return st.counts[std::size_t((q * C + c) * E + e)]; };

    // Buffers for the largest expert block of any chunk.
    long most = 0;
    for (int c = 0; c < C; ++c)
        for (int e = e0; e < e1; ++e) {
            long n = 0;
            for (int q = 0; q < P; ++q) n += cnt(q, c, e);
            most = std::max(most, n);
        }
    st.xe.resize(std::size_t(std::max(1L, most) * d));
    st.ye.resize(st.xe.size());
    st.scratch.resize(std::size_t(std::max(1L, 3 * most * f)));

    std::vector<MPI_Request> disp_req(std::size_t(C), MPI_REQUEST_NULL), comb_req(std::size_t(C), MPI_REQUEST_NULL);
    auto poll = [&](int c) {  // let the library move what is in flight around chunk c
        int flag = 0;
        if (c + 1 < C && disp_req[std::size_t(c + 1)] != MPI_REQUEST_NULL)
            MPI_Test(&disp_req[std::size_t(c + 1)], &flag, MPI_STATUS_IGNORE);
        if (c > 0 && comb_req[std::size_t(c - 1)] != MPI_REQUEST_NULL)
            MPI_Test(&comb_req[std::size_t(c - 1)], &flag, MPI_STATUS_IGNORE);
        ++st.polls;
    };
    auto post_dispatch = [&](int c) {
        const auto i = std::size_t(c);
        MPI_Ialltoallv(st.xs.data() + st.send_row0[i] * d, st.sc[i].data(), st.sd[i].data(), MPI_FLOAT,
                       st.recv.data() + st.recv_row0[i] * d, st.rc[i].data(), st.rd[i].data(), MPI_FLOAT, MPI_COMM_WORLD,
                       &disp_req[i]);
    };
    auto post_combine = [&](int c) {
        const auto i = std::size_t(c);
        MPI_Ialltoallv(st.out.data() + st.recv_row0[i] * d, st.rc[i].data(), st.rd[i].data(), MPI_FLOAT,
                       st.back.data() + st.send_row0[i] * d, st.sc[i].data(), st.sd[i].data(), MPI_FLOAT, MPI_COMM_WORLD,
                       &comb_req[i]);
    };
    // Chunk c's local experts: regroup its received rows by expert (sources
    // in rank order within an expert), run each expert in blocks of at most
    // kPollRows rows, and put the results in `out` in received order.
    auto compute = [&](int c) {
        const float* in = st.recv.data() + st.recv_row0[std::size_t(c)] * d;
        float* res = st.out.data() + st.recv_row0[std::size_t(c)] * d;
        for (int e = e0; e < e1; ++e) {
            std::vector<long> at(static_cast<std::size_t>(P));
            long n = 0;
            for (int q = 0; q < P; ++q) {
                long off = st.rd[std::size_t(c)][std::size_t(q)] / d;
                for (int e2 = e0; e2 < e; ++e2) off += cnt(q, c, e2);
                at[std::size_t(q)] = off;
                std::copy_n(in + off * d, cnt(q, c, e) * d, st.xe.data() + n * d);
                n += cnt(q, c, e);
            }
            // Poll only when something is in flight (not with one chunk, nor
            // when measuring the compute alone).
            const bool in_flight = mode == OverlapMode::pipelined && C > 1;
            const long parts = in_flight ? std::max(1L, (n + kPollRows - 1) / kPollRows) : 1;
            for (long i = 0; i < parts; ++i) {
                const long b0 = n * i / parts, b1 = n * (i + 1) / parts;
                expert_ffn(a.w, e, st.xe.data() + b0 * d, b1 - b0, st.ye.data() + b0 * d, st.scratch.data());
                if (in_flight) poll(c);
            }
            n = 0;
            for (int q = 0; q < P; ++q) {
                std::copy_n(st.ye.data() + n * d, cnt(q, c, e) * d, res + at[std::size_t(q)] * d);
                n += cnt(q, c, e);
            }
        }
    };
    auto scatter = [&](int c) {  // chunk c's weighted combine into y
        const long tc = chunk_token(c);
        combine(a.x + tc * d, st.back.data() + st.send_row0[std::size_t(c)] * d, st.disp[std::size_t(c)].row_of.data(),
                a.experts + tc * k, a.weights + tc * k, chunk_token(c + 1) - tc, k, d, a.y + tc * d);
    };

    st.polls = 0;
    const auto ts = Clock::now();
    if (mode == OverlapMode::compute_only) {
        for (int c = 0; c < C; ++c) compute(c), scatter(c);
    } else {
        const bool work = mode == OverlapMode::pipelined;
        post_dispatch(0);
        for (int c = 0; c < C; ++c) {
            if (c + 1 < C) post_dispatch(c + 1);
            MPI_Wait(&disp_req[std::size_t(c)], MPI_STATUS_IGNORE);
            if (work) compute(c);
            post_combine(c);
            if (c > 0) {
                MPI_Wait(&comb_req[std::size_t(c - 1)], MPI_STATUS_IGNORE);
                if (work) scatter(c - 1);
            }
        }
        MPI_Wait(&comb_req[std::size_t(C - 1)], MPI_STATUS_IGNORE);
        if (work) scatter(C - 1);
    }
    st.section_s = since(ts);
    if (mode == OverlapMode::pipelined) allgather_tokens(a.y, d, split);
}

namespace {

struct OverlapRun {
    OverlapState st;
    double alpha = 0, beta = 0;
    double comm_s = 0, compute_s = 0, total_s = 0;  // best of kMeasureReps, at prepare time
    double section_best = 0;                        // the timed calls' pipelined section, best

};

Instance prepare_overlap(Problem& p) {
    const World& w = world();
    const FfnArgs a = ffn_args(p);
    const int P = w.size, C = kDefaultChunks;
    if (P > a.E)
        throw std::runtime_error("expert_parallel_overlap: " + std::to_string(P) + " ranks for " + std::to_string(a.E) +
                                 " experts; use at most experts ranks");
    auto run = std::make_shared<OverlapRun>();
    std::tie(run->alpha, run->beta) = measure_alpha_beta();
    // comm alone, compute alone and both pipelined, interleaved so that they
    // share the machine's state; every rank in step (a barrier before each).
    auto best = [](double& b, double t) { b = b > 0 ? std::min(b, t) : t; };
    expert_parallel_overlap_ffn(a, C, run->st);  // warm-up; fills the received rows compute_only uses
    for (int i = 0; i < kMeasureReps; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        expert_parallel_overlap_ffn(a, C, run->st, OverlapMode::pipelined);
        best(run->total_s, run->st.section_s);
        MPI_Barrier(MPI_COMM_WORLD);
        expert_parallel_overlap_ffn(a, C, run->st, OverlapMode::comm_only);
        best(run->comm_s, run->st.section_s);
        MPI_Barrier(MPI_COMM_WORLD);
        expert_parallel_overlap_ffn(a, C, run->st, OverlapMode::compute_only);
        best(run->compute_s, run->st.section_s);
    }
    // Rank 0 reports; the slower rank sets the step, so take each figure's
    // maximum over ranks.
    double figs[3] = {run->total_s, run->comm_s, run->compute_s};
    MPI_Allreduce(MPI_IN_PLACE, figs, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    std::tie(run->total_s, run->comm_s, run->compute_s) = std::tuple(figs[0], figs[1], figs[2]);

    Instance inst;
    inst.run = [=] {
        expert_parallel_overlap_ffn(a, C, run->st);
        run->section_best = run->section_best > 0 ? std::min(run->section_best, run->st.section_s) : run->st.section_s;
    };
    inst.agree_estimate = [](double est) {
        MPI_Bcast(&est, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        return est;
    };
    inst.counters = [&p, run, P, C, a] {
        const OverlapRun& s = *run;
        auto c = ffn_counters(p, -1);
        const Split split{a.T, a.E, P};
        // The alpha-beta model: per rank, C (P - 1) messages and its share of
        // 2 T k d 4 (P-1)/P bytes, in each of the two exchanges.
        const double model_bytes = mw::moe::ep::alltoall_bytes_model(a.T, a.k, a.d, P);
        c["ranks"] = P;
        c["chunks"] = C;
        c["alpha_us"] = s.alpha * 1e6;
        c["beta_gbps"] = s.beta / 1e9;
        c["alltoall_bytes"] = 2.0 * offrank_rows(s.st.counts, split, C) * double(a.d) * 4.0;
        c["alltoall_bytes_model"] = model_bytes;
        c["alltoall_model_s"] = 2.0 * C * (P - 1) * s.alpha + model_bytes / P / s.beta;
        c["comm_s"] = s.comm_s;        // the chunked exchanges alone
        c["compute_s"] = s.compute_s;  // the chunked expert compute alone
        c["total_s"] = s.total_s;      // both, pipelined
        c["overlap_fraction"] = (s.comm_s + s.compute_s - s.total_s) / std::max(1e-12, std::min(s.comm_s, s.compute_s));
        c["exposed_comm_s"] = s.total_s - s.compute_s;
        c["section_best_s"] = s.section_best;  // rank 0's pipelined part in the timed calls, best
        c["polls"] = double(s.st.polls);
        return c;
    };
    return inst;
}

}  // namespace
}  // namespace ep
}  // namespace mw::moe

MW_REGISTER_VARIANT(moe_ffn_expert_parallel_overlap_cpu, {
    .name = "expert_parallel_overlap", .op = "moe_ffn", .lever = "moe",
    .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 5,
    .rationale = "expert_parallel with each rank's tokens in chunks: the dispatch of the next chunk and the combine "
                 "of the last in flight (MPI_Ialltoallv, MPI_Test between expert blocks) while a chunk's experts run",
    .needs = {"mpi"},
    .bytes = mw::moe::ep::exchange_rung_bytes,
    .prepare = mw::moe::ep::prepare_overlap,
    .accepts = mw::moe::ep::ranks_fit_experts,
    .identical_to = "sorted_grouped" });
#else
#include "harness/unbuilt.hpp"
MW_REGISTER_UNBUILT(moe_ffn_expert_parallel_overlap_cpu, {.op = "moe_ffn", .name = "expert_parallel_overlap", .why = mw::moe::ep::kBuiltWithoutMpi});
#endif  // MEMWALL_HAVE_MPI
