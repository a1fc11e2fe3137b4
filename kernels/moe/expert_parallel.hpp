// Expert parallelism over MPI: what moe_ffn's expert_parallel rungs share
// (optimized/moe/moe_ffn_expert_parallel.cpp, rung 4, and
// moe_ffn_expert_parallel_overlap.cpp, rung 5). Built only when CMake finds
// MPI (MEMWALL_HAVE_MPI).
//
//   world               this process's rank and the number of ranks; MPI is
//                       started on first use (the rest of memwall never needs
//                       it) and finalized at exit
//   Split               rank q of P holds experts [first_expert(q),
//                       first_expert(q + 1)) and owns tokens [first_token(q),
//                       first_token(q + 1)): contiguous, as even as integers
//                       allow, any P <= E
//   measure_alpha_beta  alpha (s per message) and beta (bytes/s) of the
//                       alpha-beta cost model, from a ping-pong between ranks
//                       0 and 1, broadcast to every rank
//   allgather_tokens    every rank gets the whole y from each rank's tokens
//   offrank_rows        assignments whose expert lives on another rank than
//                       their token (the rows that cross the wire, each way)
#pragma once

namespace mw::moe::ep {
// Why the expert-parallel rungs are missing from a build without MPI (said by
// `memwall run` when one is asked for).
inline constexpr const char* kBuiltWithoutMpi =
    "it needs MPI, which CMake did not find when this build was configured: install openmpi-bin and "
    "libopenmpi-dev (scripts/install-deps.sh does), then configure and build again";
}  // namespace mw::moe::ep

#ifdef MEMWALL_HAVE_MPI
// The C API only (Open MPI would otherwise pull in its deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/registry.hpp"  // Shape, DType
#include "kernels/moe/dispatch.hpp"

namespace mw::moe::ep {

struct World {
    int rank = 0, size = 1;
};
const World& world();

struct Split {
    long T = 0;
    int E = 0, P = 1;
    int first_expert(int q) const { return int(long(E) * q / P); }
    long first_token(int q) const { return T * q / P; }
};

std::pair<double, double> measure_alpha_beta();

// The expert-parallel rungs' `accepts`: at most one rank per expert (from the
// launcher's environment, before MPI starts), or why not.
inline std::string ranks_fit_experts(const Shape& s) {
    const int P = launch_size();
    return P > s["experts"] ? "experts = " + std::to_string(s["experts"]) + " < " + std::to_string(P) +
                                  " MPI ranks (each rank holds at least one expert: mpirun -n P with P <= experts)"
                            : "";
}

// y [T][d]: rank q has written its tokens' rows; afterwards every rank has all.
void allgather_tokens(float* y, long d, const Split& s);

// counts [P][per_rank] with per_rank = groups * E (a rank's per-expert row
// counts, `groups` times: once per chunk): the rows whose expert is not on the
// sending rank.
double offrank_rows(const std::vector<std::int64_t>& counts, const Split& s, int groups);

// The cost model of both exchanges (dispatch and combine), fp32 rows:
// 2 T k d dtype (P - 1) / P bytes cross between ranks in all.
inline double alltoall_bytes_model(long T, long k, long d, int P) {
    return 2.0 * double(T) * double(k) * double(d) * 4.0 * (P - 1) / P;
}

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// --- rung 5: the chunked, overlapped exchange (defined in
// optimized/moe/moe_ffn_expert_parallel_overlap.cpp, whose idea it is) -------
//
// Each rank's tokens are cut into `chunks` contiguous pieces (some empty
// when chunks exceeds a rank's tokens); per piece a full dispatch, expert
// compute and combine, pipelined: the dispatch of chunk c + 1 and the
// combine of chunk c - 1 are in flight (MPI_Ialltoallv) while chunk c's
// experts run, and MPI_Test is called between expert blocks so that the
// library can move them. Every rank must call it with the same chunks.
enum class OverlapMode {
    pipelined,     // the rung: exchanges and compute interleaved
    comm_only,     // the same exchanges in the same order, no compute (y is not computed)
    compute_only,  // the same expert blocks and weighted combines on the last call's
                   // received rows, no exchange (y is not gathered over ranks)
};
struct OverlapState {
    std::vector<Dispatch> disp;                    // per chunk
    std::vector<std::int64_t> counts;             // [P][chunks][E]
    std::vector<long> send_row0, recv_row0;       // per chunk: first row in xs / recv
    std::vector<std::vector<int>> sc, sd, rc, rd; // per chunk, per rank: MPI element counts, displacements
    std::vector<float> xs, recv, out, back, xe, ye, scratch;
    long polls = 0;                               // MPI_Test calls made between expert blocks (last call)
    double section_s = 0;                         // the pipelined part of the last call (after the
                                                  // count exchange, before the y Allgatherv)
};
void expert_parallel_overlap_ffn(const FfnArgs& a, int chunks, OverlapState& st,
                                 OverlapMode mode = OverlapMode::pipelined);

}  // namespace mw::moe::ep
#endif  // MEMWALL_HAVE_MPI
