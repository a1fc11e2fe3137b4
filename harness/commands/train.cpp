// `memwall train`: trains the model stack (reference/model/) on the fortune
// corpus (reference/model/corpus.hpp) with the fp32 training step and AdamW
// (kernels/model/), then writes
//   --out FILE.safetensors       the weights (and, with --state, a resumable
//                                checkpoint with the optimizer's state)
//   --results DIR/train-<name>.json   tokens/s, MFU against the calibrated
//                                fp32 peak, loss per step, train and
//                                validation loss per evaluation
//   DIR/loss-<name>.{svg,png}    the loss curves
// Progress (step, loss, tokens/s, MFU, time left) goes to stderr.
//
// MFU here is PaLM's: model FLOPs per step (3 x the forward pass, the
// backward being twice the forward; attention counted at each position's
// causal prefix length, see forward_flops) divided by the step time and the
// machine's measured fp32 peak (all threads). Nothing is recomputed in this
// step, so HFU = MFU.
#include <CLI/CLI.hpp>

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "harness/ceilings.hpp"
#include "harness/cli.hpp"
#include "harness/plot.hpp"
#include "harness/results.hpp"
#include "harness/runner.hpp"
#include "harness/strings.hpp"
#include "kernels/model/trainer.hpp"
#include "reference/model/checkpoint.hpp"
#include "reference/model/corpus.hpp"

namespace mw {
namespace {

struct TrainCliOptions {
    model::Config config;
    model::TrainOptions train;
    std::uint64_t init_seed = 1;
    std::string corpus = model::kDefaultCorpusDir;
    std::string out = "results/model/default.safetensors";
    std::string state;        // resumable checkpoint to write at the end (with optimizer state)
    std::string resume;       // resumable checkpoint to start from
    std::string results_dir;  // default: results/local-<host>
    std::string name = "default";
    std::string ceilings;
    std::int64_t stop_after = 0;  // stop (and save) after this step; 0 = run the whole schedule
    int threads = 0;
    bool quiet = false;
};

std::string hms(double s) {
    const int t = int(std::lround(s));
    return fmt("%dm%02ds", t / 60, t % 60);
}

int run_train(const TrainCliOptions& o) {
    if (o.threads > 0) omp_set_num_threads(o.threads);
    model::require_valid(o.config);
    const auto& t = o.train;
    if (t.batch <= 0) throw UsageError("--batch " + std::to_string(t.batch) + ": must be positive");
    if (t.seq <= 0 || t.seq > o.config.max_seq)
        throw UsageError("--seq " + std::to_string(t.seq) + ": must be in 1..max_seq = " + std::to_string(o.config.max_seq));
    if (t.steps <= 0) throw UsageError("--steps " + std::to_string(t.steps) + ": must be positive");
    if (!o.out.ends_with(".safetensors")) throw UsageError("--out " + o.out + ": expected a .safetensors file name");

    model::Corpus corpus;
    try {
        corpus = model::load_corpus(o.corpus);
    } catch (const std::runtime_error& e) {
        throw UsageError(e.what());
    }
    const auto train_tokens = model::to_tokens(corpus.train), val_tokens = model::to_tokens(corpus.validation);

    model::TrainState state(o.config, o.init_seed);
    if (!o.resume.empty()) {
        auto f = model::load_model(o.resume);
        if (!(f.config == o.config)) throw UsageError("--resume " + o.resume + ": its model config differs from the one asked for");
        if (!f.optimizer) throw UsageError("--resume " + o.resume + ": weights only, no optimizer state (write one with --state)");
        state.params = std::move(f.params);
        state.opt = std::move(*f.optimizer);
    }
    const Ceilings ceil = [&] {
        if (!o.ceilings.empty()) {
            auto doc = read_json_file(o.ceilings);
            if (!doc.contains("ceilings")) throw UsageError("'" + o.ceilings + "' has no \"ceilings\" field");
            return ceilings_from_json(doc["ceilings"]);
        }
        std::cerr << "calibrating this machine's fp32 peak (quick; pass --ceilings FILE to reuse a full calibration)...\n";
        return calibrate_cpu(omp_get_max_threads(), true);
    }();
    const double peak = peak_gflops(ceil, "fp32") * 1e9;
    const double step_flops = 3 * model::forward_flops(o.config, t.seq) * t.batch;
    const double step_tokens = double(t.batch) * t.seq;

    model::Trainer trainer(t, train_tokens, val_tokens);
    const std::int64_t until = o.stop_after > 0 ? std::min(o.stop_after, t.steps) : t.steps;
    nlohmann::json steps = nlohmann::json::array(), evals = nlohmann::json::array();
    double timed = 0;
    std::int64_t timed_steps = 0;
    const auto start = std::chrono::steady_clock::now();
    auto last_print = start;
    std::fprintf(stderr, "training %zu parameters on %zu train / %zu validation bytes, %lld steps of %d x %d tokens\n",
                 model::param_count(o.config), train_tokens.size(), val_tokens.size(), (long long)t.steps, t.batch, t.seq);
    trainer.run(
        state, until,
        [&](const model::StepRecord& r) {
            steps.push_back({{"step", r.step}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm}, {"seconds", r.seconds}});
            if (r.step >= 2) timed += r.seconds, ++timed_steps;  // the first steps fault in the workspace
            const auto now = std::chrono::steady_clock::now();
            if (!o.quiet && (std::chrono::duration<double>(now - last_print).count() > 5 || r.step + 1 == until)) {
                last_print = now;
                const double per = timed_steps ? timed / double(timed_steps) : r.seconds;
                std::fprintf(stderr, "step %6lld/%lld  loss %.3f  lr %.2e  %6.0f tok/s  MFU %4.1f%%  left %s\n",
                             (long long)r.step + 1, (long long)until, r.loss, r.lr, step_tokens / per,
                             100 * step_flops / per / peak, hms(per * double(until - r.step - 1)).c_str());
            }
            return true;
        },
        [&](const model::EvalRecord& e) {
            evals.push_back({{"step", e.step}, {"train_loss", e.train_loss}, {"val_loss", e.val_loss}, {"val_tokens", e.tokens}});
            if (!o.quiet)
                std::fprintf(stderr, "  eval at step %lld: train %.3f  validation %.3f nats/byte (%lld tokens)\n",
                             (long long)e.step, e.train_loss, e.val_loss, (long long)e.tokens);
        });
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double per_step = timed_steps ? timed / double(timed_steps) : wall / double(std::max<std::int64_t>(1, until));

    model::ModelFile mf;
    mf.config = o.config;
    mf.params = state.params;
    mf.info = {{"trained_steps", std::to_string(state.opt.step)}, {"corpus", "Debian fortunes (" + std::to_string(corpus.files.size()) + " files)"}};
    model::save_model(o.out, mf);
    if (!o.state.empty()) {
        mf.optimizer = state.opt;
        model::save_model(o.state, mf);
    }

    const nlohmann::json machine = machine_info();
    const std::string host = machine.value("hostname", "host");
    const std::string dir = o.results_dir.empty() ? "results/local-" + host.substr(0, host.find('.')) : o.results_dir;
    nlohmann::json doc = {
        {"schema", "memwall.train/1"},
        {"machine", machine},
        {"ceilings", to_json(ceil)},
        {"model", {{"d_model", o.config.d_model}, {"layers", o.config.layers}, {"heads", o.config.heads},
                   {"kv_heads", o.config.kv_heads}, {"d_ff", o.config.d_ff}, {"vocab", o.config.vocab},
                   {"max_seq", o.config.max_seq}, {"parameters", model::param_count(o.config)},
                   {"vocabulary", "bytes (256 tokens)"}}},
        {"training", {{"batch", t.batch}, {"seq", t.seq}, {"steps", t.steps}, {"stopped_after", state.opt.step},
                      {"warmup", t.warmup}, {"lr", t.lr}, {"min_lr", t.min_lr}, {"clip", t.clip},
                      {"weight_decay", t.weight_decay}, {"seed", t.seed}, {"init_seed", o.init_seed},
                      {"threads", omp_get_max_threads()}, {"resumed_from", path_for_record(o.resume)}}},
        {"corpus", {{"folder", o.corpus}, {"files", corpus.files}, {"quotations", corpus.quotations},
                    {"train_bytes", train_tokens.size()}, {"validation_bytes", val_tokens.size()},
                    {"validation_rule", "quotation i goes to validation when i % 20 == 19"}}},
        {"summary", {{"wall_seconds", wall}, {"seconds_per_step", per_step}, {"tokens_per_s", step_tokens / per_step},
                     {"model_flops_per_step", step_flops}, {"achieved_gflops", step_flops / per_step / 1e9},
                     {"peak_fp32_gflops", peak / 1e9}, {"mfu", step_flops / per_step / peak},
                     {"hfu", step_flops / per_step / peak},
                     {"final_val_loss", evals.empty() ? nlohmann::json() : evals.back()["val_loss"]},
                     {"checkpoint", path_for_record(o.out)}}},
        {"steps", steps},
        {"evals", evals},
        {"command", "memwall train --steps " + std::to_string(t.steps) + " --batch " + std::to_string(t.batch) +
                        " --seq " + std::to_string(t.seq) + " --out " + path_for_record(o.out)},
    };
    const std::filesystem::path out_json = std::filesystem::path(dir) / ("train-" + o.name + ".json");
    write_json_atomic(out_json, doc);
    std::vector<LineSeries> series(2);
    series[0].title = "training loss (per step)";
    for (const auto& s : steps) series[0].points.emplace_back(s["step"].get<double>() + 1, s["loss"].get<double>());
    series[1].title = "validation loss";
    for (const auto& e : evals) series[1].points.emplace_back(e["step"].get<double>(), e["val_loss"].get<double>());
    if (gnuplot_available())
        plot_lines(dir, "loss-" + o.name,
                   "Training the model stack (" + std::to_string(model::param_count(o.config)) + " parameters) on " +
                       std::string(machine.value("cpu_model", "this CPU")),
                   "step", "cross-entropy (nats per byte)", series);
    std::printf("trained %lld steps in %s: %.0f tokens/s, %.1f GFLOP/s = %.1f%% MFU; validation loss %.3f nats/byte\n",
                (long long)state.opt.step, hms(wall).c_str(), step_tokens / per_step, step_flops / per_step / 1e9,
                100 * step_flops / per_step / peak, evals.empty() ? NAN : evals.back()["val_loss"].get<double>());
    std::printf("wrote %s, %s\n", o.out.c_str(), out_json.string().c_str());
    return 0;
}

}  // namespace
}  // namespace mw

MW_REGISTER_COMMAND(train, [](CLI::App& app) -> mw::CommandAction {
    auto* sub = app.add_subcommand("train", "Train the model stack on the fortune corpus (the default model unless told otherwise)");
    auto o = std::make_shared<mw::TrainCliOptions>();
    auto& c = o->config;
    auto& t = o->train;
    sub->add_option("--d-model", c.d_model, "model width")->capture_default_str();
    sub->add_option("--layers", c.layers, "transformer blocks")->capture_default_str();
    sub->add_option("--heads", c.heads, "query heads")->capture_default_str();
    sub->add_option("--kv-heads", c.kv_heads, "key/value heads (divides --heads)")->capture_default_str();
    sub->add_option("--d-ff", c.d_ff, "SwiGLU hidden width")->capture_default_str();
    sub->add_option("--max-seq", c.max_seq, "longest context")->capture_default_str();
    sub->add_option("--steps", t.steps, "steps of the schedule")->capture_default_str();
    sub->add_option("--batch", t.batch, "sequences per step")->capture_default_str();
    sub->add_option("--seq", t.seq, "tokens per sequence")->capture_default_str();
    sub->add_option("--warmup", t.warmup, "warm-up steps")->capture_default_str();
    sub->add_option("--lr", t.lr, "peak learning rate")->capture_default_str();
    sub->add_option("--min-lr", t.min_lr, "learning rate at the end of the cosine")->capture_default_str();
    sub->add_option("--eval-every", t.eval_every, "steps between validation passes (0: only at the end)")->capture_default_str();
    sub->add_option("--seed", t.seed, "batch sampling seed")->capture_default_str();
    sub->add_option("--init-seed", o->init_seed, "initialization seed")->capture_default_str();
    sub->add_option("--corpus", o->corpus, "folder of fortune files")->capture_default_str();
    sub->add_option("--out", o->out, "weights file to write (.safetensors)")->capture_default_str();
    sub->add_option("--state", o->state, "also write a resumable checkpoint (weights + optimizer state) here");
    sub->add_option("--resume", o->resume, "continue from a checkpoint written with --state");
    sub->add_option("--stop-after", o->stop_after, "stop after this step (the schedule stays --steps long)");
    sub->add_option("--results", o->results_dir, "folder for the training record and plot (default results/local-<host>)");
    sub->add_option("--name", o->name, "name of the record: train-<name>.json, loss-<name>.svg")->capture_default_str();
    sub->add_option("--ceilings", o->ceilings, "ceilings from `memwall calibrate` (else a quick calibration)");
    sub->add_option("--threads", o->threads, "OpenMP threads (0: all)");
    sub->add_flag("--quiet", o->quiet, "no progress lines");
    return [o] { return mw::run_train(*o); };
});
