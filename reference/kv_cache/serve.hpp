// serve: the KV-cache lever's serving simulation. A seeded trace of requests
// arrives over scheduler iterations; each iteration runs the trained model's
// batched decoder step (kernels/model/model_cpu.hpp) for every running
// request's next token and the prompts of the requests admitted in it, on a
// fixed KV-memory budget. The rungs differ only in how the budget is cut up
// and when a request may enter:
//
//   reference/kv_cache/serve.cpp            rung 0  static: contiguous slots of max_len positions
//                                                    (floor(budget / max_len) of them), a batch of up to
//                                                    that many requests formed only when the whole previous
//                                                    batch has finished (static batching)
//   optimized/kv_cache/serve_continuous.cpp    1    continuous_paged: blocks of 16 positions from one pool
//                                                    (budget / 16 of them), a request admitted whenever its
//                                                    prompt's blocks are free, a block taken as it grows and
//                                                    all returned when it ends; the shared prompt prefix
//                                                    computed once and its blocks shared
//
// The trace (make_trace), one stated distribution, from the shape alone:
//   - length (prompt + output) = lo + G capped at max_len, lo = shared + 2,
//     G geometric on {0, 1, ...} (P(G >= k) = q^k) with q solved so that the
//     capped mean is exactly mean_len (trace_length_q);
//   - prompt = round(f x length), f uniform in [0.2, 0.8], clamped to
//     [shared + 1, length - 1]; output = length - prompt (no EOS: a request
//     generates exactly its output tokens, greedily);
//   - every prompt starts with the same `shared` tokens (the first bytes of
//     kPromptText), then bytes of kPromptText from a seeded offset;
//   - arrivals: a Poisson process in iteration units, exponential gaps of
//     mean `gap` iterations (request 0 at iteration 0; gap = 0: all at once).
// Iterations are the simulation's clock: which requests are admitted when,
// and every memory counter, are the same on every run and machine; time to
// first token (from the start of the arrival's iteration) and inter-token
// latency are wall-clock, from the steps' timestamps.
//
// Run:   memwall run serve     (64 requests, mean/max length 500/4096, a 64 MiB budget)
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/registry.hpp"
#include "kernels/kv_cache/kv_store.hpp"
#include "kernels/model/model_cpu.hpp"
#include "reference/kv_cache/generate.hpp"

namespace mw::kv_cache {

struct TraceSpec {
    int requests = 64, mean_len = 500, max_len = 4096, shared = 64, gap = 1;
    std::uint64_t seed = 1;
};
TraceSpec trace_spec(const Shape& s);

struct Request {
    int arrival = 0;          // the iteration it arrives at
    std::vector<int> prompt;  // token ids; the first Trace::shared are every request's
    int output = 0;           // tokens it generates
    int length() const { return int(prompt.size()) + output; }
};
struct Trace {
    std::vector<Request> requests;  // in arrival order
    int shared = 0;                 // tokens every prompt starts with
};

Trace make_trace(const TraceSpec& t);
// The q of the length distribution: lo + sum_{k=1}^{max_len-lo} q^k = mean_len.
double trace_length_q(int mean_len, int lo, int max_len);

// The op's problem for a trace: inputs arrival, prompt_len, output_len [N]
// and prompts (every prompt, one after the other); output tokens
// [N][longest output], a request's row padded with -1 past its output (and
// all -1 for a rejected request). trace_of reads the trace back.
Problem serve_problem(const Shape& s, const Trace& t);
Trace trace_of(const Problem& p);

// KV bytes per position of the served model (the trained one: 4 KiB).
double serve_bytes_per_position();

// What one call of a serving rung reports.
struct ServeResult {
    std::vector<std::vector<int>> tokens;  // per request; empty when rejected
    std::map<std::string, double> counters;
    std::map<std::string, std::vector<double>> series;
    std::vector<std::string> rejections;  // "request 3: 5000 positions, ..."
};

// The part of a serving rung that is not its scheduling policy: the
// requests' progress, the model step of each iteration, and the counters.
// A rung's loop, per iteration:
//     begin_iteration();                 arrivals join waiting()
//     ... admit(r, seq) / feed(r, from) / release(r) / reject(r, why) ...
//     end_iteration();                   one Decoder::step over the rows fed
//     ... release the requests done() ...
// until finished(). admit/release only mark which store sequence a request
// holds (the rung opens, grows and closes it in the store); feed queues a
// request's rows for positions [from, context_len) of its context (its
// prompt, then the tokens generated so far: a decode feeds one row, a
// prompt or a recomputation many), and the step's last row of each request
// gives its next token (argmax, the first maximum on a tie).
class ServeEngine {
public:
    ServeEngine(const Trace& t, KvStore& store, model::cpu::Decoder& dec);

    void begin_iteration();
    void end_iteration();
    int iteration() const { return iter_; }
    bool finished() const { return remaining_ == 0; }
    std::deque<int>& waiting() { return waiting_; }

    const Request& request(int r) const { return trace_.requests[std::size_t(r)]; }
    int context_len(int r) const;  // prompt + generated so far
    int generated(int r) const { return int(state_[std::size_t(r)].tokens.size()); }
    bool done(int r) const { return generated(r) == request(r).output; }
    int seq(int r) const { return state_[std::size_t(r)].seq; }

    void admit(int r, int seq);
    void release(int r);
    void reject(int r, const std::string& why);
    void feed(int r, int from);
    // Runs positions [0, tokens.size()) of store sequence `seq` now, in a
    // step of their own: rows outside any request (a shared prefix, once).
    void run_rows(int seq, const std::vector<int>& tokens);
    // A request preempted with `positions` of its cache to be recomputed.
    void note_preemption(int positions);

    ServeResult result() const;

private:
    using clock = std::chrono::steady_clock;
    struct State {
        int seq = -1;
        std::vector<int> tokens;
        clock::time_point arrived, last;
    };
    const Trace& trace_;
    KvStore& store_;
    model::cpu::Decoder& dec_;
    std::vector<State> state_;
    std::deque<int> waiting_;
    std::vector<std::string> rejections_;
    std::vector<int> rejected_;
    int iter_ = -1, next_arrival_ = 0, remaining_ = 0, preemptions_ = 0;
    double recomputed_ = 0;
    clock::time_point start_, iter_start_, end_;
    // This iteration's rows, and the row after which each fed request's
    // next token is read.
    std::vector<int> row_seq_, row_pos_, row_tok_;
    std::vector<std::pair<int, int>> last_row_;  // (request, row)
    int feeding_ = 0;
    // Per iteration: requests holding memory, requests fed, reserved and wasted bytes.
    std::vector<double> admitted_, running_, reserved_, wasted_;
    std::vector<double> ttft_s_, itl_s_;
    double produced_ = 0;
};

// The glue both rungs share. The served model: the trained one at up to
// max_len positions (decode_model). The budget in positions of
// serve_bytes_per_position(). A rung's Instance: the trace read from p's
// inputs, a decoder over `store`, and each call running `policy` afresh
// (every request from its arrival; the store left as it was found) and
// writing the tokens; the counters and series are the last call's.
const DecodeModel& serve_model(int max_len);
std::int64_t budget_positions(const Shape& s);
using ServePolicy = std::function<ServeResult(const Trace&, model::cpu::Decoder&)>;
Instance serve_instance(Problem& p, std::shared_ptr<KvStore> store, ServePolicy policy);

// The rungs' schedulers, on a store the caller sized (tests call them on
// hand-made traces). static: store.slots() slots; a request longer than a
// slot is rejected. continuous: a paged store with room for
// trace.requests.size() + 1 sequences (the last holds the shared prefix);
// a request longer than max_len, or than the pool, is rejected.
ServeResult serve_static(const Trace& t, ContiguousStore& store, model::cpu::Decoder& dec);
ServeResult serve_continuous(const Trace& t, PagedStore& store, model::cpu::Decoder& dec, int max_len);

}  // namespace mw::kv_cache
