// The training loop (model/trainer.hpp).
#include "model/trainer.hpp"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "harness/inputs.hpp"
#include "model/model.hpp"

namespace mw::model {

float lr_at(const TrainOptions& o, std::int64_t step) {
    if (step < o.warmup) return o.lr * float(step + 1) / float(o.warmup);
    const double t = double(step - o.warmup) / double(std::max<std::int64_t>(1, o.steps - o.warmup));
    const double c = 0.5 * (1 + std::cos(M_PI * std::min(1.0, t)));
    return float(o.min_lr + (o.lr - o.min_lr) * c);
}

TrainState::TrainState(const Config& c, std::uint64_t init_seed)
    : config(c), params(init_params(c, init_seed)), opt(c) {}

Trainer::Trainer(TrainOptions o, const std::vector<int>& train, const std::vector<int>& validation)
    : o_(o), train_(train), val_(validation) {
    if (train_.size() < std::size_t(o_.seq) + 2 || val_.size() < std::size_t(o_.seq) + 2)
        throw std::invalid_argument("training and validation text must each hold more than seq + 1 = " +
                                    std::to_string(o_.seq + 1) + " tokens");
}

void Trainer::batch_of(std::int64_t step, std::vector<int>& tokens, std::vector<int>& targets) const {
    const std::size_t T = std::size_t(o_.seq), span = train_.size() - T - 1;
    tokens.resize(std::size_t(o_.batch) * T);
    targets.resize(tokens.size());
    for (int b = 0; b < o_.batch; ++b) {
        const std::uint64_t h = mix_seed(o_.seed ^ (std::uint64_t(step) * 0x9E3779B97F4A7C15ull), "batch" + std::to_string(b));
        const std::size_t at = std::size_t(h % span);
        for (std::size_t t = 0; t < T; ++t) {
            tokens[b * T + t] = train_[at + t];
            targets[b * T + t] = train_[at + t + 1];
        }
    }
}

EvalRecord Trainer::evaluate(const TrainState& s, int windows) {
    const int T = o_.seq;
    const std::int64_t available = std::int64_t((val_.size() - 1) / std::size_t(T));
    const std::int64_t n = windows <= 0 ? available : std::min<std::int64_t>(windows, available);
    // Windows scored o_.batch at a time (the training step's GEMM shapes);
    // the remainder in one smaller batch.
    double sum = 0;
    for (std::int64_t w0 = 0; w0 < n;) {
        const int nb = int(std::min<std::int64_t>(o_.batch, n - w0));
        if (!eval_ || eval_->batch() != nb || !(eval_->config() == s.config) || eval_->seq() != T)
            eval_ = std::make_unique<cpu::TrainStep>(s.config, nb, T);
        std::vector<int> x(std::size_t(nb) * T), y(x.size());
        for (int b = 0; b < nb; ++b)
            for (int t = 0; t < T; ++t) {
                const std::size_t at = std::size_t((w0 + b) * T + t);
                x[std::size_t(b) * T + t] = val_[at], y[std::size_t(b) * T + t] = val_[at + 1];
            }
        sum += eval_->forward(s.params.data(), x.data(), y.data()) * nb;
        w0 += nb;
    }
    EvalRecord r;
    r.step = s.opt.step;
    r.val_loss = sum / double(n);
    r.tokens = n * T;
    r.train_loss = loss_count_ ? loss_sum_ / double(loss_count_) : NAN;
    return r;
}

void Trainer::run(TrainState& s, std::int64_t until, const std::function<bool(const StepRecord&)>& on_step,
                  const std::function<void(const EvalRecord&)>& on_eval) {
    if (!step_ || !(step_->config() == s.config)) step_ = std::make_unique<cpu::TrainStep>(s.config, o_.batch, o_.seq);
    s.opt.weight_decay = o_.weight_decay;
    grads_.assign(s.params.size(), 0.0f);
    std::vector<int> tokens, targets;
    while (s.opt.step < until) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::int64_t step = s.opt.step;
        batch_of(step, tokens, targets);
        std::fill(grads_.begin(), grads_.end(), 0.0f);
        StepRecord r;
        r.step = step;
        r.loss = step_->forward_backward(s.params.data(), grads_.data(), tokens.data(), targets.data());
        r.grad_norm = cpu::clip_grad_norm(grads_.data(), grads_.size(), o_.clip);
        r.lr = lr_at(o_, step);
        s.opt.update(s.params.data(), grads_.data(), float(r.lr));
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        loss_sum_ += r.loss, ++loss_count_;
        const bool go_on = on_step(r);
        const bool last = s.opt.step == until;
        if ((o_.eval_every > 0 && s.opt.step % o_.eval_every == 0) || last) {
            on_eval(evaluate(s, last ? 0 : o_.eval_windows));
            loss_sum_ = 0, loss_count_ = 0;
        }
        if (!go_on) return;
    }
}

}  // namespace mw::model
