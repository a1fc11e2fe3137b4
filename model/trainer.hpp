// The training loop of the model stack (`memwall train`): batches drawn from
// a token stream, the fp32 TrainStep (model_cpu.hpp), gradient clipping,
// AdamW, a warm-up + cosine learning-rate schedule, periodic validation.
//
// Determinism: the batch of step s is a pure function of (seed, s) — a hash,
// not a generator's state — and every reduction in the step is summed in a
// fixed order, so a run resumed from a checkpoint taken after step s goes on
// bit-identically to the run that never stopped (same thread count).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/model/model_cpu.hpp"

namespace mw::model {

struct TrainOptions {
    int batch = 16, seq = 256;
    std::int64_t steps = 1000;   // total steps of the schedule
    std::int64_t warmup = 50;
    float lr = 3e-3f, min_lr = 3e-4f;
    float clip = 1.0f;
    float weight_decay = 0.1f;
    std::uint64_t seed = 1;
    std::int64_t eval_every = 100;  // 0: only at the end
    int eval_windows = 64;          // validation windows per periodic evaluation (all at the end)
};

// Learning rate at `step` (0-based): linear warm-up to lr, cosine to min_lr.
float lr_at(const TrainOptions& o, std::int64_t step);

struct StepRecord {
    std::int64_t step = 0;
    double loss = 0, lr = 0, grad_norm = 0, seconds = 0;
};
struct EvalRecord {
    std::int64_t step = 0;
    double train_loss = 0, val_loss = 0;  // train_loss: mean of the steps since the last evaluation
    std::int64_t tokens = 0;              // validation tokens scored
};

// Everything that defines where a run is: saved in checkpoints.
struct TrainState {
    Config config;
    std::vector<float> params;
    cpu::AdamW opt;
    explicit TrainState(const Config& c, std::uint64_t init_seed);
};

class Trainer {
public:
    Trainer(TrainOptions o, const std::vector<int>& train, const std::vector<int>& validation);
    // Runs steps state.opt.step .. until-1; calls `on_step` after each step
    // and `on_eval` after each evaluation. Returns false if on_step asks to stop.
    void run(TrainState& s, std::int64_t until, const std::function<bool(const StepRecord&)>& on_step,
             const std::function<void(const EvalRecord&)>& on_eval);
    // Mean cross-entropy (nats per token) over the first `windows` validation
    // windows of seq+1 tokens (all of them when windows <= 0).
    EvalRecord evaluate(const TrainState& s, int windows);
    // The tokens of step `step`'s batch: [batch][seq] inputs and targets.
    void batch_of(std::int64_t step, std::vector<int>& tokens, std::vector<int>& targets) const;
    const TrainOptions& options() const { return o_; }

private:
    TrainOptions o_;
    const std::vector<int>& train_;
    const std::vector<int>& val_;
    std::unique_ptr<cpu::TrainStep> step_, eval_;  // built for the state's config on first use
    std::vector<float> grads_;
    double loss_sum_ = 0;
    std::int64_t loss_count_ = 0;
};

}  // namespace mw::model
