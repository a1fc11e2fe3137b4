// The model stack's parameters and its fp64 reference (the oracle): a forward
// pass with loss, its manual backward pass, and a token-by-token decoder with
// a key/value cache. Written as plain loops over doubles, one sequence at a
// time, for clarity; the fp32 paths that are fast live in kernels/model/
// (model_cpu.hpp) and are checked against these.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/model/config.hpp"  // Config, init_params

namespace mw::model {

// --- fp64 reference --------------------------------------------------------
// Mean cross-entropy (nats) of predicting targets[t] from tokens[0..t], for
// one sequence of T <= max_seq tokens. `logits` (optional) receives [T, vocab].
double ref_loss(const Config& c, const double* params, const int* tokens, const int* targets, int T,
                std::vector<double>* logits = nullptr);

// The same loss, and its gradient with respect to every parameter, added
// into `grad` (param_count(c) values) — the manual backward pass in fp64.
double ref_loss_grad(const Config& c, const double* params, const int* tokens, const int* targets, int T,
                     double* grad);

// One transformer block over one sequence of T positions, in fp64: what its
// backward pass reads (every intermediate), and its output x_out [T, d].
struct RefBlockActs {
    std::vector<double> x_in, xn1, q, k, v, p, o, x_mid, xn2, a, b, h, x_out;
    std::vector<double> r1, r2;  // per row: 1 / rms
};
RefBlockActs ref_block_forward(const Config& c, const LayerPtrs<const double*>& W, const std::vector<double>& x_in,
                               int T);
// dx holds d loss / d x_out on entry and d loss / d x_in on return; the
// weight gradients are added into G.
void ref_block_backward(const Config& c, const LayerPtrs<const double*>& W, const LayerPtrs<double*>& G,
                        const RefBlockActs& A, std::vector<double>& dx);

// Token-by-token decoding with a cache of every past position's keys and
// values (per layer [max_seq, kv_dim]).
struct RefCache {
    std::vector<std::vector<double>> k, v;
    int len = 0;
    // Applied to each new key row and value row ([kv_heads][hd], after RoPE)
    // before it is stored: empty keeps them exact; an INT8 cache's contract
    // oracle rounds them the way that cache stores them.
    std::function<void(double* row, int kv_heads, int hd)> round;
};
RefCache ref_cache(const Config& c);
// Appends `token` at position cache.len and returns its next-token logits.
std::vector<double> ref_step(const Config& c, const double* params, int token, RefCache& cache);

// Greedy continuation of `prompt` by n tokens. margins[i] (optional) is the
// gap between the largest and second-largest logit at step i: where it is
// tiny, an fp32 decoder may legitimately pick the other token (a near-tie).
// `round` as RefCache::round.
std::vector<int> ref_greedy(const Config& c, const double* params, const std::vector<int>& prompt, int n,
                            std::vector<double>* margins = nullptr,
                            const std::function<void(double*, int, int)>& round = {});

}  // namespace mw::model
