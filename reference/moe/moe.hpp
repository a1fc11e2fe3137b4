// The MoE routing lever: a mixture-of-experts FFN layer, where a router sends
// each token to k of E experts (each expert the model stack's SwiGLU MLP), and
// what it costs to get the tokens to their experts and back. Ops:
//
//   moe_route: router logits x W_r + bias -> softmax over E -> top-k (k = 1, 2,
//   ...) -> the k probabilities renormalized to sum to 1 (axes tokens,
//   d_model, experts, top_k, skew). Outputs: `experts` [tokens][k] (i32,
//   checked exactly: larger logit first, equal logits -> lower expert index
//   first) and `weights` [tokens][k] (f32, by tolerance). The router's inputs
//   lie on a dyadic grid (x in 1/8ths, W_r and the bias in 1/256ths and
//   1/2048ths) so every logit is exact in fp32 whatever the summation order:
//   an index is then a function of the inputs, and a tie is a real tie the
//   stated rule decides. Counters: assignments per expert and the Switch
//   Transformer's auxiliary load-balancing loss E sum_e f_e P_e (f_e: the
//   share of the T k assignments that go to e; P_e: e's mean probability).
//   moe_ffn: y = x + sum_j w[t][j] FFN_{e[t][j]}(x[t]), FFN_e(x) =
//   (silu(x Wg_e) * (x Wu_e)) Wd_e, for a routing given as inputs (made by
//   moe_route's fp64 rule from seeded router inputs; axes tokens, d_model,
//   d_ff, experts, top_k, capacity_pct, skew). The op is dropless; the
//   capacity rung's contract drops by the rule below. Useful FLOPs 6 T k d
//   d_ff; unit: tokens.
//   moe_layer: the whole layer, routing included (router inputs as moe_route's,
//   expert weights as moe_ffn's; experts 0 and 1 share a router column, so
//   their logits tie on every token and the tie rule changes y): level 08's
//   exercise, checked against route_exact then ffn_exact in fp64.
//
// skew s > 0: two seeded "hot" experts get +s/4 on their logits, so most
// tokens go to them (the counters say how many), which shows the
// imbalance, the drops and the step time set by the busiest expert.
// capacity_pct c > 0: an expert takes at most C = ceil(c T k / (100 E))
// assignments (c = 125: capacity factor 1.25). Priority is slot-major, as in
// GShard and Switch: every token's first choice before anyone's second, in
// token order within a slot. A dropped assignment adds nothing: a token whose
// every choice is dropped passes through the residual (y = x). c = 0:
// unbounded (dropless).
//
// The ladders (CPU), each rung one idea:
//   reference/moe/moe_route.cpp                      rung 0  naive: per token, a dot product per expert, softmax, partial sort
//   optimized/moe/moe_route_gemm.cpp                    1  gemm: the logits as one packed GEMM, then one pass per token
//   reference/moe/moe_ffn.cpp                        rung 0  dense_masked: every expert on every token (GEMMs of T rows),
//                                                            masked by the routing weights: E/k times the useful FLOPs
//   optimized/moe/moe_ffn_gather.cpp                    1  gather: per token, its k experts as GEMVs: the useful FLOPs,
//                                                            but each token streams 3 d d_ff weights per expert
//   optimized/moe/moe_ffn_sorted_grouped.cpp            2  sorted_grouped: counting sort of the assignments by expert,
//                                                            one GEMM per expert on its contiguous block, weighted
//                                                            scatter back: the useful FLOPs at GEMM speed (MegaBlocks)
//   optimized/moe/moe_ffn_capacity.cpp                  3  capacity: rung 2 with at most C rows per expert; overflow
//                                                            dropped and counted (contract: the drop rule in fp64)
//   optimized/moe/moe_ffn_expert_parallel.cpp           4  expert_parallel: experts split over P MPI ranks; dispatch
//                                                            AllToAllv, local grouped GEMMs, combine AllToAllv
//                                                            (needs `mpirun -n P`, P >= 2; built when MPI is found)
//   optimized/moe/moe_ffn_expert_parallel_overlap.cpp   5  expert_parallel_overlap: rung 4 in chunks of tokens, the
//                                                            next chunk's dispatch and the last one's combine in flight
//                                                            (MPI_Ialltoallv) while a chunk's experts run; counters:
//                                                            comm alone, compute alone, both, the overlap fraction
//   reference/moe/moe_layer.cpp                      rung 0  dense_masked: router dot products per token, then
//                                                            moe_ffn's dense_masked
//   optimized/moe/moe_layer_sorted_grouped.cpp          1  sorted_grouped: router GEMM, then moe_ffn's rung 2
//                                                            (level 08's exercise is graded against it)
// (CUDA; kernels in kernels/moe/moe.cuh, run under cuda-emu in the tests)
//   reference/moe/moe_route.cu                       rung 0  naive: a thread per token, route.hpp's rule on the device
//   reference/moe/moe_ffn.cu                         rung 0  sorted_grouped: device counting sort, permute, grouped
//                                                            GEMM launches (16x16 tiles), SwiGLU, weighted unpermute
//   optimized/moe/moe_ffn_cublas_grouped.cu        vendor  cublas_grouped: rung 0's dispatch, the expert GEMMs as
//                                                            cublasGemmGroupedBatchedEx calls (real GPU only)
//   optimized/moe/moe_ffn_expert_parallel_nccl.cu       2  expert_parallel_nccl: experts over P GPUs, one per MPI
//                                                            rank, NCCL send/recv for dispatch and combine (real GPUs
//                                                            only; built when NCCL is found)
// The dispatch machinery (counting sort, permute, expert block, combine) has
// one home: kernels/moe/dispatch.hpp; a token's top-k and weights another,
// kernels/moe/route.hpp; the MPI glue of the expert-parallel rungs a third,
// kernels/moe/expert_parallel.hpp.
//
// Run:   memwall run moe_route --shape top_k=1 --shape top_k=2
//        memwall run moe_ffn --variant sorted_grouped --variant capacity   (dense_masked runs too)
//        memwall run moe_ffn --variant capacity --shape skew=8,capacity_pct=100 --shape skew=8,capacity_pct=125
//        mpirun -n 2 memwall run moe_ffn --variant expert_parallel --variant expert_parallel_overlap --skip-naive --threads 1
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "harness/registry.hpp"
#include "kernels/moe/dispatch.hpp"

namespace mw::moe {

// The router's seeded inputs on their dyadic grid: x [T][d], W_r [d][E],
// bias [E] (the skew). Shared by moe_route and moe_ffn, which must route the
// same tokens the same way.
void fill_router_inputs(Buffer& x, Buffer& w_router, Buffer& bias, const Shape& s, std::uint64_t seed);
// Declares a problem's router inputs x, w_router and bias (the first three
// inputs of moe_route and moe_layer) and fills them as above.
void add_router_inputs(Problem& p);

// The routing rule in fp64: experts[t*k + j] and renormalized weights[t*k + j];
// probs (optional) receives the full softmax [T][E] for the auxiliary loss.
struct Routing {
    std::vector<std::int32_t> experts;
    std::vector<double> weights;
    std::vector<double> probs;
};
Routing route_exact(const float* x, const float* w_router, const float* bias, long T, long d, int E, int k);

// moe_route's shape rules (top_k <= experts, <= 8; d_model <= 8192, where the
// grid stops keeping logits exact) and its counters, from the variant's indices.
std::string validate_route_shape(const Shape& s);
std::map<std::string, double> route_counters(const Problem& p);

// The drop rule, stated once in the plainest form: kept[t*k + j] for each
// assignment (capacity < 0: all kept).
std::vector<char> kept_assignments(const std::int32_t* experts, long T, int k, int E, long capacity);

// The capacity C for capacity_pct c (c = 0: -1, unbounded).
long expert_capacity(const Shape& s);

// y = x + sum over kept assignments of w FFN_e(x), in fp64 (kept empty: all),
// for moe_ffn's problem or any routing and weights.
struct FfnInputs {
    const float* x;
    const std::int32_t* experts;
    const double* weights;
    const float *gate, *up, *down;
};
std::vector<double> ffn_exact(const Shape& s, const FfnInputs& in, const std::vector<char>& kept);
std::vector<double> ffn_exact(const Problem& p, const std::vector<char>& kept);

// Useful FLOPs of moe_ffn: 6 T k d d_ff.
double ffn_useful_flops(const Shape& s);
// Bytes of the expert weights (3 d d_ff fp32 each), all E of them.
double ffn_weight_bytes(const Shape& s);
// Activations in and out and the routing: x, y, experts, weights.
double ffn_activation_bytes(const Shape& s);

// moe_ffn's shape and buffers as the rungs use them (FfnArgs: kernels/moe/dispatch.hpp).
FfnArgs ffn_args(Problem& p);

// The traffic both expert-parallel CPU rungs declare: the weights once (over
// all ranks), x, y and the routing, the permuted rows in and out (4 T k d
// floats) and a, b, h of T k rows (24 T k d_ff bytes); the exchange is
// counted apart.
namespace ep {
double exchange_rung_bytes(const Shape& s, DType);
}

// Loads of the routing in `p` (rows per expert, after the drop rule).
std::vector<long> expert_loads(const Problem& p, long capacity);
// Counters every moe_ffn rung reports: the busiest expert's rows against the
// mean, assignments and tokens dropped, the capacity.
std::map<std::string, double> ffn_counters(const Problem& p, long capacity);

}  // namespace mw::moe
