// decode_step and generate on the GPU: the host side every CUDA rung of the
// two ops shares (the rungs: reference/kv_cache/decode_recompute.cu,
// optimized/kv_cache/decode_cache.cu, optimized/kv_cache/decode_graph.cu;
// the decoder and its kernels: kernels/model/decode_cuda.cuh). A rung is
// a cache layout (a slot per sequence or shuffled pages; fp32 or int8
// values) and a way of driving the steps:
//
//   Drive::recompute  nothing kept between calls (decode_step) or tokens
//                     (generate): every position of the sequence so far is
//                     fed through the model again, its keys and values
//                     re-projected, before the new position's logits — the
//                     work of the CPU's rung 0, one position per step
//   Drive::eager      the cache kept: a step feeds the new token only, its
//                     51 launches enqueued one by one from the host
//   Drive::graph      the same step captured once into a CUDA graph and
//                     replayed: one submission per step instead of 51
//
// Everything a step reads that changes (token, position, cache length) is
// in device memory, so generate's loop never waits for the host: the next
// token is picked on the device (Decoder::enqueue_advance) and the host
// only enqueues. One sync ends the call. Each rung reports how many
// launches a step takes and the host's time to enqueue one step
// (host_us_per_step: what launch overhead costs; under cuda-emu, where a
// launch runs to completion before it returns, it is the step's whole time).
// Under cuda-emu the graph is the emulator's (harness/emu: capture records,
// a replay reruns), so the graph rung is checked there too.
#pragma once

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/cuda/device_problem.hpp"
#include "kernels/model/decode_cuda.cuh"
#include "reference/kv_cache/generate.hpp"

namespace mw::kv_cache::cuda_decode {
namespace {

using model::gpu_decode::Decoder;
using model::gpu_decode::StepInputs;

enum class Layout { contiguous, paged };
enum class Drive { recompute, eager, graph };

// The block table for `seqs` sequences of max_pages pages: the identity
// (sequence s owns pages s x max_pages ..., a contiguous slot) or a
// shuffled pool (kernels/kv_cache/paged_attention.hpp).
inline std::vector<std::int32_t> block_table(Layout layout, int seqs, int max_pages, std::uint64_t seed) {
    if (layout == Layout::paged) return shuffled_page_table(seqs, max_pages, seed);
    std::vector<std::int32_t> t(std::size_t(seqs) * max_pages);
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = std::int32_t(i);
    return t;
}

inline int pages_for(int positions) { return (positions + kPageSize - 1) / kPageSize; }

// generate's bytes on a cached drive: every weight once per step (a step per
// position but the last), and each step's read of the cache (the step at
// position i reads i + 1 positions).
inline double cached_generate_bytes(const Shape& s, Elem e = Elem::f32) {
    const auto& c = generate_model_for(s).config;
    const double steps = double(s["prompt"] + s["tokens"]) - 1;
    const double per_pos = bytes_per_position({c.layers, c.kv_heads, c.head_dim()}, e);
    return 4.0 * double(generate_model_for(s).params.size()) * steps + per_pos * steps * (steps + 1) / 2;
}

// A captured step and its instantiation, replayed on any stream.
struct Graph {
    cudaStream_t capture{};
    cudaGraph_t graph{};
    cudaGraphExec_t exec{};
    // Non-blocking: legacy-stream work from elsewhere during the capture
    // must not join it (that would invalidate it).
    Graph() { MW_CUDA_CHECK(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking)); }
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;
    ~Graph() {
        if (exec) (void)cudaGraphExecDestroy(exec);
        if (graph) (void)cudaGraphDestroy(graph);
        if (capture) (void)cudaStreamDestroy(capture);
    }
    // Captures enqueue(capture stream) on first use; then one launch on `stream`.
    template <class Enqueue> void replay(cudaStream_t stream, const Enqueue& enqueue) {
        if (!exec) {
            MW_CUDA_CHECK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
            try {
                enqueue(capture);
            } catch (...) {  // close the capture, or the thread's later calls fail with it
                cudaGraph_t partial{};
                (void)cudaStreamEndCapture(capture, &partial);
                if (partial) (void)cudaGraphDestroy(partial);
                (void)cudaGetLastError();
                throw;
            }
            MW_CUDA_CHECK(cudaStreamEndCapture(capture, &graph));
            if (const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0); e != cudaSuccess) {
                (void)cudaGraphDestroy(graph);  // the next call captures afresh
                graph = nullptr;
                exec = nullptr;
                MW_CUDA_CHECK(e);
            }
        }
        MW_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    }
};

// CUDA events owned for an instance's life.
struct Events {
    std::vector<cudaEvent_t> e;
    explicit Events(std::size_t n) : e(n) {
        for (auto& x : e) MW_CUDA_CHECK(cudaEventCreate(&x));
    }
    Events(const Events&) = delete;
    Events& operator=(const Events&) = delete;
    ~Events() {
        for (auto x : e)
            if (x) (void)cudaEventDestroy(x);
    }
    cudaEvent_t operator[](std::size_t i) const { return e[i]; }
};

// Host time of the last call's enqueueing, per step.
struct HostTimes {
    double enqueue_s = 0;
    int steps = 0;
    double us_per_step() const { return steps ? enqueue_s / steps * 1e6 : 0; }
};

// Per-position step inputs for `seqs` sequences over positions 0..T-1,
// device arrays [T][seqs]: tokens[i][s] = tok[s][i] (tok: [seqs][T] host),
// positions i, lengths i + 1. Inputs of position i: StepInputs at + i x seqs.
struct PositionInputs {
    std::shared_ptr<std::int32_t> tokens, positions, lengths;
    int seqs = 0;
    StepInputs at(int i) const {
        const std::size_t o = std::size_t(i) * seqs;
        return {tokens.get() + o, positions.get() + o, lengths.get() + o};
    }
};
inline PositionInputs position_inputs(const std::int32_t* tok, int seqs, int T) {
    std::vector<std::int32_t> t(std::size_t(T) * seqs), pos(t.size()), len(t.size());
    for (int i = 0; i < T; ++i)
        for (int s = 0; s < seqs; ++s) {
            const std::size_t k = std::size_t(i) * seqs + s;
            t[k] = tok[std::size_t(s) * T + i], pos[k] = i, len[k] = i + 1;
        }
    return {model::gpu_decode::upload(t), model::gpu_decode::upload(pos), model::gpu_decode::upload(len), seqs};
}

// decode_step: `batch` sequences' prefixes of ctx tokens, then one step at
// position ctx. Cached drives: the prefix is written into the cache in
// prepare() (untimed, a step per position), and each call decodes position
// ctx again (the rewrite is idempotent). Recompute: each call runs all ctx
// + 1 positions from an empty cache.
inline Instance prepare_decode_step(Problem& p, Layout layout, Drive drive, Elem elem = Elem::f32) {
    const int B = int(p.shape["batch"]), ctx = int(p.shape["ctx"]), T = ctx + 1;
    const auto& dm = decode_model(int(p.shape["kv_heads"]), T);
    const int max_pages = pages_for(T);
    auto dec = std::make_shared<Decoder>(dm.config, dm.params.data(), B, max_pages, B * max_pages,
                                         block_table(layout, B, max_pages, p.seed), elem);
    const auto in = std::make_shared<PositionInputs>(position_inputs(p.in("tokens").as<std::int32_t>(), B, T));
    if (drive != Drive::recompute) {
        for (int i = 0; i < ctx; ++i) dec->enqueue_step(nullptr, in->at(i));
        // The step's inputs in the decoder's own arrays (what a graph reads).
        const std::size_t bytes = std::size_t(B) * sizeof(std::int32_t);
        const StepInputs last = in->at(ctx);
        MW_CUDA_CHECK(cudaMemcpy(dec->tokens(), last.tokens, bytes, cudaMemcpyDeviceToDevice));
        MW_CUDA_CHECK(cudaMemcpy(dec->positions(), last.positions, bytes, cudaMemcpyDeviceToDevice));
        MW_CUDA_CHECK(cudaMemcpy(dec->lengths(), last.lengths, bytes, cudaMemcpyDeviceToDevice));
        MW_CUDA_CHECK(cudaDeviceSynchronize());
    }
    auto graph = std::make_shared<Graph>();
    auto host = std::make_shared<HostTimes>();
    Instance inst = mw::cuda::device_instance(
        p,
        [=](mw::cuda::DeviceProblem& d) {
            float* logits = d.out<float>("logits");
            const auto t0 = std::chrono::steady_clock::now();
            if (drive == Drive::recompute) {
                for (int i = 0; i <= ctx; ++i) dec->enqueue_step(d.stream, in->at(i), i == ctx ? logits : nullptr);
            } else if (drive == Drive::eager) {
                dec->enqueue_step(d.stream, dec->own_inputs(), logits);
            } else {
                graph->replay(d.stream, [&](cudaStream_t s) { dec->enqueue_step(s, dec->own_inputs(), logits); });
            }
            host->enqueue_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            host->steps = drive == Drive::recompute ? T : 1;
        },
        std::size_t(dec->device_bytes()) + std::size_t(in->seqs) * T * 12);
    inst.counters = [dec, host, drive] {
        return std::map<std::string, double>{
            {"launches_per_step", drive == Drive::graph ? 1.0 : double(dec->launches_per_step())},
            {"kernels_per_step", double(dec->launches_per_step())},
            {"host_us_per_step", host->us_per_step()},
            // Recompute keeps nothing between calls (its pool is working memory).
            {"kv_cache_bytes", drive == Drive::recompute ? 0.0 : dec->cache_bytes()}};
    };
    return inst;
}

// generate: the prompt, then `tokens` greedy tokens, one sequence. Cached
// drives: a step per position (the prompt's included: this GPU decoder has
// no batched prefill), each followed by enqueue_advance; the cache is
// reused from call to call (each call rewrites it from position 0).
// Recompute: for each new token, every position so far from position 0.
// Counters: time to first token and inter-token latencies from CUDA events
// recorded between steps (no sync between them), the launches per step,
// the host's enqueue time per step and the cache's bytes.
inline Instance prepare_generate(Problem& p, Layout layout, Drive drive, Elem elem = Elem::f32) {
    const auto& dm = generate_model_for(p.shape);
    const int n_prompt = int(p.shape["prompt"]), n_new = int(p.shape["tokens"]), T = n_prompt + n_new;
    const int max_pages = pages_for(T);
    auto dec = std::make_shared<Decoder>(dm.config, dm.params.data(), 1, max_pages, max_pages,
                                         block_table(layout, 1, max_pages, p.seed), elem);
    // Recompute's inputs: the sequence so far (the prompt, then each token
    // as it is picked) and positions / lengths 0.. / 1.. (PositionInputs).
    std::vector<std::int32_t> seq(std::size_t(T), 0);
    std::copy_n(p.in("prompt").as<std::int32_t>(), n_prompt, seq.begin());
    const auto in = std::make_shared<PositionInputs>(position_inputs(seq.data(), 1, T));
    const std::int32_t start[2] = {0, 1};  // position and length of the first step
    auto start_dev = model::gpu_decode::upload(std::vector<std::int32_t>(start, start + 2));
    auto graph = std::make_shared<Graph>();
    auto host = std::make_shared<HostTimes>();
    // Events: [0] before the first step, [1 + k] after the step that picks token k.
    auto events = std::make_shared<Events>(std::size_t(n_new) + 1);
    Instance inst = mw::cuda::device_instance(
        p,
        [=](mw::cuda::DeviceProblem& d) {
            const std::int32_t* prompt = d.in<const std::int32_t>("prompt");
            std::int32_t* out = d.out<std::int32_t>("tokens");
            // Every call writes every token afresh; poisoned first (-1), so
            // that a call which wrote none (a replay that did nothing) shows.
            MW_CUDA_CHECK(cudaMemsetAsync(out, 0xFF, std::size_t(n_new) * sizeof(std::int32_t), d.stream));
            const auto t0 = std::chrono::steady_clock::now();
            MW_CUDA_CHECK(cudaEventRecord((*events)[0], d.stream));
            int steps = 0;
            const std::size_t one = sizeof(std::int32_t);
            if (drive == Drive::recompute) {
                // The prompt as this call's input holds it, into the sequence's first positions.
                MW_CUDA_CHECK(cudaMemcpyAsync(in->tokens.get(), prompt, std::size_t(n_prompt) * one,
                                              cudaMemcpyDeviceToDevice, d.stream));
                for (int k = 0; k < n_new; ++k) {
                    const int len = n_prompt + k;  // positions 0 .. len - 1, then pick token k
                    for (int i = 0; i < len; ++i) dec->enqueue_step(d.stream, in->at(i)), ++steps;
                    dec->enqueue_pick(in->at(len - 1).positions, n_prompt, out, in->tokens.get() + len, d.stream);
                    MW_CUDA_CHECK(cudaEventRecord((*events)[std::size_t(k) + 1], d.stream));
                }
            } else {
                MW_CUDA_CHECK(cudaMemcpyAsync(dec->tokens(), prompt, one, cudaMemcpyDeviceToDevice, d.stream));
                MW_CUDA_CHECK(cudaMemcpyAsync(dec->positions(), start_dev.get(), one, cudaMemcpyDeviceToDevice, d.stream));
                MW_CUDA_CHECK(cudaMemcpyAsync(dec->lengths(), start_dev.get() + 1, one, cudaMemcpyDeviceToDevice, d.stream));
                auto step = [&](cudaStream_t s) {
                    dec->enqueue_step(s, dec->own_inputs());
                    dec->enqueue_advance(prompt, n_prompt, out, s);
                };
                for (int i = 0; i + 1 < T; ++i, ++steps) {  // the last token is never fed back
                    if (drive == Drive::graph) graph->replay(d.stream, step);
                    else step(d.stream);
                    if (i + 1 >= n_prompt) MW_CUDA_CHECK(cudaEventRecord((*events)[std::size_t(i + 2 - n_prompt)], d.stream));
                }
            }
            host->enqueue_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            host->steps = steps;
        },
        std::size_t(dec->device_bytes()) + std::size_t(T) * 12 + 12);
    inst.counters = [dec, host, drive, events, n_new] {
        MW_CUDA_CHECK(cudaEventSynchronize((*events)[std::size_t(n_new)]));
        DecodeTimes t;
        float ms = 0;
        MW_CUDA_CHECK(cudaEventElapsedTime(&ms, (*events)[0], (*events)[1]));
        t.ttft_s = ms * 1e-3;
        for (int k = 1; k < n_new; ++k) {
            MW_CUDA_CHECK(cudaEventElapsedTime(&ms, (*events)[std::size_t(k)], (*events)[std::size_t(k) + 1]));
            t.itl_s.push_back(ms * 1e-3);
        }
        t.kv_bytes = drive == Drive::recompute ? 0 : dec->cache_bytes();
        auto c = t.counters();
        // Cached drives: the step and its pick; recompute picks once per token, not per step.
        const double kernels = double(dec->launches_per_step() + (drive == Drive::recompute ? 0 : 1));
        c["launches_per_step"] = drive == Drive::graph ? 1.0 : kernels;
        c["kernels_per_step"] = kernels;
        c["host_us_per_step"] = host->us_per_step();
        return c;
    };
    return inst;
}

}  // namespace
}  // namespace mw::kv_cache::cuda_decode
