// speculate on the GPU: greedy speculative decoding over the GPU decoder
// (kernels/model/decode_cuda.cuh), one sequence (batch 1), the host side and
// the verify kernel every CUDA rung of the op shares (rungs:
// reference/speculative/speculate.cu, target_only; optimized/speculative/
// speculate_int4.cu, an int4 copy of the target drafts).
//
// The sequence's tokens live on the device, by position (seq[i]); so do the
// drafts and the target's picks. A round, from position n (seq[n] known,
// not yet fed to the target):
//   draft   K steps of the draft decoder: the first feeds what the draft has
//           not seen (seq[dvalid .. n]: one row, or two after a round that
//           kept all K drafts), each picks the next token on the device into
//           seq[n + 1 ..] (Decoder::enqueue_pick);
//   verify  one step of the target over the K + 1 rows seq[n .. n + K], at
//           positions n .. n + K, all rows reading one sequence's pages (the
//           block table's rows are the same pages): one read of the target's
//           weights for K + 1 positions; verify_kernel then takes each row's
//           argmax, counts the leading drafts equal to it (a), writes the
//           target's own token after them (the bonus, seq[n + a + 1]) and the
//           a + 1 new tokens to the output;
//   decide  the host reads a (one copy and sync per round: the only wait)
//           and moves n to n + a + 1. Nothing is rolled back: positions past
//           the kept ones are simply rewritten by the next round (a cache
//           row is only read up to the reader's own position).
// K = 0 is target_only: one row per round, the bonus is the greedy token.
// Every row of the target's step computes exactly what a one-row step
// does (the GEMVs, norms and attention treat rows independently, in the
// same order), so greedy speculation's tokens are target_only's bit for
// bit (checked: identical_to "target_only").
// The prompt's positions 0 .. P - 2 are fed first, K + 1 rows per step
// (the draft: 2), untimed by the rounds' counters but inside the call.
#pragma once

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness/cuda/device_problem.hpp"
#include "kernels/model/decode_cuda.cuh"
#include "kernels/speculative/expected_tokens.hpp"
#include "reference/kv_cache/decode_cuda.cuh"  // PositionInputs, Events
#include "reference/speculative/speculate.hpp"

namespace mw::speculative::cuda {
namespace {

using model::gpu_decode::Decoder;
using model::gpu_decode::WeightFormat;

// After the target's step over rows seq[n .. n + K] (logits [K + 1][vocab]):
// result[0] = a, the leading drafts seq[n + 1 ..] equal to the target's
// argmax of the row before them; seq[n + a + 1] = the target's argmax of
// row a; out[pos - P] = seq[pos] for the new positions n + 1 .. n + a + 1
// below P + T. One block.
__global__ void MW_LAUNCH_BOUNDS(model::gpu_decode::kAdvanceThreads)
    verify_kernel(const float* __restrict__ logits, int vocab, int K, int n, std::int32_t* seq, int P, int T,
                  std::int32_t* out, std::int32_t* result) {
    __shared__ float best_v[model::gpu_decode::kAdvanceThreads];
    __shared__ int best_i[model::gpu_decode::kAdvanceThreads];
    __shared__ int pick[17];  // K <= 16 (speculate's validation)
    for (int r = 0; r <= K; ++r) {
        const int best = model::gpu_decode::block_argmax(logits + std::int64_t(r) * vocab, vocab, best_v, best_i);
        if (threadIdx.x == 0) pick[r] = best;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int a = 0;
        while (a < K && seq[n + 1 + a] == pick[a]) ++a;
        seq[n + a + 1] = pick[a];
        for (int pos = n + 1; pos <= n + a + 1; ++pos)
            if (pos - P < T) out[pos - P] = seq[pos];
        result[0] = a;
    }
}

struct Counts {
    std::int64_t rounds = 0, target_passes = 0, draft_passes = 0, drafted = 0, accepted = 0, rejected = 0,
                 emitted = 0;
    double draft_s = 0, verify_s = 0, total_s = 0;
};

// The loop for one sequence: target (fp32) and, with K > 0, a draft of the
// same model in `draft_format`, both over caches of P + T + K + 1 positions.
class Speculator {
public:
    Speculator(const model::Config& c, const float* params, int P, int T, int K, WeightFormat draft_format)
        : P_(P), T_(T), K_(K), max_len_(P + T + K + 1) {
        const int pages = kv_cache::cuda_decode::pages_for(max_len_);
        std::vector<std::int32_t> rows(std::size_t(K + 1) * pages);  // every row: the sequence's pages 0 ..
        for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = std::int32_t(i % pages);
        target_ = std::make_unique<Decoder>(c, params, K + 1, pages, pages, rows);
        if (K > 0) {
            std::vector<std::int32_t> two(rows.begin(), rows.begin() + 2 * pages);
            draft_ = std::make_unique<Decoder>(c, params, 2, pages, pages, two, kv_cache::Elem::f32, draft_format);
        }
        const std::vector<std::int32_t> zeros(std::size_t(max_len_), 0);
        in_ = kv_cache::cuda_decode::position_inputs(zeros.data(), 1, max_len_);
        result_ = mw::cuda::device_array<std::int32_t>(1);
        MW_CUDA_CHECK(cudaMallocHost(&host_a_, sizeof(std::int32_t)));
    }
    ~Speculator() { (void)cudaFreeHost(host_a_); }
    Speculator(const Speculator&) = delete;
    Speculator& operator=(const Speculator&) = delete;

    // prompt [P] and out [T]: device arrays. Runs on `stream`; *counts of this call.
    void generate(const std::int32_t* prompt, std::int32_t* out, cudaStream_t stream, Counts* counts) {
        using clock = std::chrono::steady_clock;
        const auto t0 = clock::now();
        Counts c;
        std::int32_t* seq = in_.tokens.get();
        MW_CUDA_CHECK(cudaMemcpyAsync(seq, prompt, std::size_t(P_) * sizeof(std::int32_t), cudaMemcpyDeviceToDevice,
                                      stream));
        // The prompt but its last token, into both caches.
        for (int i = 0; i + 1 < P_; i += K_ + 1) target_->enqueue_step(stream, in_.at(i), nullptr, std::min(K_ + 1, P_ - 1 - i));
        if (draft_)
            for (int i = 0; i + 1 < P_; i += 2) draft_->enqueue_step(stream, in_.at(i), nullptr, std::min(2, P_ - 1 - i));
        int n = P_ - 1, dvalid = P_ - 1, emitted = 0;
        while (emitted < T_) {
            MW_CUDA_CHECK(cudaEventRecord(events_[0], stream));
            if (draft_) {
                const int feed = n - dvalid + 1;  // 1, or 2 after a round that kept every draft
                draft_->enqueue_step(stream, in_.at(dvalid), nullptr, feed);
                draft_->enqueue_pick(in_.at(n).positions, 0, nullptr, seq + n + 1, stream, feed - 1);
                for (int i = 1; i < K_; ++i) {
                    draft_->enqueue_step(stream, in_.at(n + i), nullptr, 1);
                    draft_->enqueue_pick(in_.at(n + i).positions, 0, nullptr, seq + n + i + 1, stream);
                }
                c.draft_passes += K_;
            }
            MW_CUDA_CHECK(cudaEventRecord(events_[1], stream));
            target_->enqueue_step(stream, in_.at(n), nullptr, K_ + 1);
            mw::launch(verify_kernel, dim3(1), dim3(model::gpu_decode::kAdvanceThreads), 0, stream,
                       target_->logits(), target_->config().vocab, K_, n, seq, P_, T_, out, result_.get());
            MW_CUDA_CHECK(cudaMemcpyAsync(host_a_, result_.get(), sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream));
            MW_CUDA_CHECK(cudaEventRecord(events_[2], stream));
            MW_CUDA_CHECK(cudaStreamSynchronize(stream));
            const int a = *host_a_;
            if (a < 0 || a > K_) throw std::runtime_error("speculate (GPU): " + std::to_string(a) + " drafts accepted of " +
                                                          std::to_string(K_));
            float ms = 0;
            MW_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[0], events_[1]));
            c.draft_s += ms * 1e-3;
            MW_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[1], events_[2]));
            c.verify_s += ms * 1e-3;
            ++c.rounds, ++c.target_passes;
            c.drafted += K_, c.accepted += a, c.rejected += a < K_ ? 1 : 0;
            c.emitted += a + 1;
            emitted += a + 1;
            dvalid = n + std::min(a, K_ - 1) + 1;
            n += a + 1;
        }
        c.total_s = std::chrono::duration<double>(clock::now() - t0).count();
        *counts = c;
    }

    // One target step of one row (the plain decoder's cost per token), and
    // the same for the draft: best of `reps`, timed with events, at the
    // prompt's last position (rewritten by every generate).
    double time_step(bool draft, int reps, cudaStream_t stream) {
        const Decoder& d = draft ? *draft_ : *target_;
        double best = 1e30;
        for (int r = 0; r < reps; ++r) {
            MW_CUDA_CHECK(cudaEventRecord(events_[0], stream));
            d.enqueue_step(stream, in_.at(P_ - 1), nullptr, 1);
            MW_CUDA_CHECK(cudaEventRecord(events_[1], stream));
            MW_CUDA_CHECK(cudaEventSynchronize(events_[1]));
            float ms = 0;
            MW_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[0], events_[1]));
            best = std::min(best, ms * 1e-3);
        }
        return best;
    }
    bool has_draft() const { return bool(draft_); }
    double target_weight_bytes() const { return target_->weight_bytes(); }
    double draft_weight_bytes() const { return draft_ ? draft_->weight_bytes() : 0; }
    double device_bytes() const {
        return target_->device_bytes() + (draft_ ? draft_->device_bytes() : 0) + 12.0 * max_len_ + 4;
    }

private:
    int P_, T_, K_, max_len_;
    std::unique_ptr<Decoder> target_, draft_;
    kv_cache::cuda_decode::PositionInputs in_;  // tokens: the sequence by position
    std::shared_ptr<std::int32_t> result_;
    std::int32_t* host_a_ = nullptr;
    kv_cache::cuda_decode::Events events_{3};
};

// A rung's instance: batch 1 (`accepts` refuses more); counters named as the
// CPU rungs' (reference/speculative/speculate.cpp).
inline Instance prepare(Problem& p, bool with_draft) {
    const auto& m = target_model(p.shape);
    const int P = int(p.shape["prompt"]), T = int(p.shape["tokens"]), K = with_draft ? int(p.shape["k"]) : 0;
    auto spec = std::make_shared<Speculator>(m.config, m.params->data(), P, T, K, WeightFormat::int4);
    auto counts = std::make_shared<Counts>();
    // A warm-up call, then the measured step costs the formula takes (under
    // cuda-emu, where timings mean nothing and a step is slow: one timing,
    // no warm-up, over whatever the unwritten cache holds — a cost, not a
    // result, so its values do not matter).
    if (!MEMWALL_EMU) {
        auto d = mw::cuda::device_array<std::int32_t>(std::size_t(P + T));
        MW_CUDA_CHECK(cudaMemcpy(d.get(), p.in("prompt").as<std::int32_t>(), std::size_t(P) * sizeof(std::int32_t),
                                 cudaMemcpyHostToDevice));
        spec->generate(d.get(), d.get() + P, nullptr, counts.get());
    }
    const int reps = MEMWALL_EMU ? 1 : 5;
    const double target_step_s = spec->time_step(false, reps, nullptr);
    const double draft_step_s = with_draft ? spec->time_step(true, reps, nullptr) : 0;
    Instance inst = mw::cuda::device_instance(
        p,
        [spec, counts](mw::cuda::DeviceProblem& d) {
            spec->generate(d.in<const std::int32_t>("prompt"), d.out<std::int32_t>("tokens"), d.stream, counts.get());
        },
        std::size_t(spec->device_bytes()));
    inst.counters = [=] {
        const Counts& c = *counts;
        std::map<std::string, double> r = {
            {"target_passes", double(c.target_passes)},
            {"tokens_per_pass", c.rounds ? double(c.emitted) / double(c.rounds) : 0},
            {"verify_ms", c.verify_s * 1e3},
            {"total_ms", c.total_s * 1e3},
            {"target_step_ms", target_step_s * 1e3},
            {"target_weight_mib", spec->target_weight_bytes() / 1048576.0},
            {"widening", double(m.widening)}};
        if (!spec->has_draft()) return r;
        const double alpha = c.accepted + c.rejected ? double(c.accepted) / double(c.accepted + c.rejected) : 0;
        const double per_round_ms = (c.draft_s + c.verify_s) * 1e3 / double(std::max<std::int64_t>(1, c.target_passes));
        const double E = expected_tokens(alpha, K);
        r.insert({{"drafted", double(c.drafted)},
                  {"accepted", double(c.accepted)},
                  {"acceptance", c.drafted ? double(c.accepted) / double(c.drafted) : 0},
                  {"alpha", alpha},
                  {"draft_passes", double(c.draft_passes)},
                  {"draft_ms", c.draft_s * 1e3},
                  {"draft_ms_per_round", c.draft_s * 1e3 / double(std::max<std::int64_t>(1, c.target_passes))},
                  {"verify_ms_per_round", c.verify_s * 1e3 / double(std::max<std::int64_t>(1, c.target_passes))},
                  {"draft_step_ms", draft_step_s * 1e3},
                  {"draft_weight_mib", spec->draft_weight_bytes() / 1048576.0},
                  {"predicted_tokens_per_pass", E},
                  {"predicted_speedup", E * target_step_s * 1e3 / per_round_ms}});
        return r;
    };
    return inst;
}

// What the CUDA rungs take: one sequence.
inline std::string accepts(const Shape& s) {
    return s["batch"] != 1 ? "batch = " + std::to_string(s["batch"]) + ": the GPU speculator decodes one sequence (batch 1)"
                           : "";
}

}  // namespace
}  // namespace mw::speculative::cuda
