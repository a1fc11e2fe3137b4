// `memwall train`: trains the model stack (model/) on the fortune
// corpus (model/corpus.hpp) with the fp32 training step and AdamW
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
#include "harness/command.hpp"
#include "harness/plot.hpp"
#include "harness/results.hpp"
#include "harness/strings.hpp"
#include "model/checkpoint.hpp"
#include "model/corpus.hpp"
#include "model/ngram.hpp"
#include "model/trainer.hpp"

namespace mw {
namespace {

struct TrainCliOptions {
    model::Config config;
    model::TrainOptions train;
    std::uint64_t init_seed = 1;
    std::string corpus = model::kDefaultCorpusDir;
    std::string out;          // default: <results folder>/model-<name>.safetensors, never the committed model
    bool force = false;       // --out may replace an existing file
    std::string state;        // resumable checkpoint to write at the end (with optimizer state)
    std::string resume;       // resumable checkpoint to start from
    std::string results_dir;  // default: results/local-<host>
    std::string name = "default";
    std::string ceilings;
    std::int64_t stop_after = 0;  // stop (and save) after this step; 0 = run the whole schedule
    int threads = 0;
    bool quiet = false;
    bool baseline_only = false;  // --baseline: the n-gram baseline alone, nothing trained
};

// The yardstick beside the transformer's validation loss: a byte 6-gram
// with interpolated Witten-Bell smoothing (model/ngram.hpp), counted on the
// training split, scored on the validation split, nats per byte.
constexpr int kBaselineOrder = 6;
double ngram_baseline(const model::Corpus& corpus) {
    return model::NgramModel(corpus.train, kBaselineOrder).cross_entropy(corpus.validation);
}

std::string hms(double s) {
    const int t = int(std::lround(s));
    return fmt("%dm%02ds", t / 60, t % 60);
}

// Every option checked before the corpus is read or anything is written.
void check_options(const TrainCliOptions& o) {
    if (o.threads != 0) check_threads("--threads", o.threads);
    try {
        model::require_valid(o.config);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    const auto& t = o.train;
    check_range("--batch", (long long)t.batch, 1, 4096);
    check_range("--seq", (long long)t.seq, 1, o.config.max_seq);
    check_range("--steps", (long long)t.steps, 1, 100'000'000);
    check_range("--warmup", (long long)t.warmup, 0, 100'000'000);
    check_range("--lr", double(t.lr), 1e-8, 10.0);
    check_range("--min-lr", double(t.min_lr), 0.0, double(t.lr));
    check_range("--eval-every", (long long)t.eval_every, 0, 100'000'000);
    check_range("--stop-after", (long long)o.stop_after, 0, t.steps);
    check_output_path(o.out, "--out", ".safetensors");
    check_output_path(o.state, "--state", ".safetensors");
    if (!o.resume.empty()) check_input_file(o.resume, "--resume");
    if (!o.ceilings.empty()) check_input_file(o.ceilings, "--ceilings");
    for (const std::string* p : {&o.out, &o.state}) {
        std::error_code ec;
        if (!p->empty() && std::filesystem::exists(*p, ec) && !o.force)
            throw UsageError("'" + *p + "' exists: pass --force to replace it (or write elsewhere)");
    }
}

model::Corpus read_corpus(const std::string& dir) {
    try {
        return model::load_corpus(dir);
    } catch (const std::runtime_error& e) {
        throw UsageError(e.what());
    }
}

// Freshly initialized, or the weights and optimizer state of --resume.
model::TrainState initial_state(const TrainCliOptions& o) {
    model::TrainState state(o.config, o.init_seed);
    if (!o.resume.empty()) {
        auto f = model::load_model(o.resume);
        if (!(f.config == o.config)) throw UsageError("--resume " + o.resume + ": its model config differs from the one asked for");
        if (!f.optimizer) throw UsageError("--resume " + o.resume + ": weights only, no optimizer state (write one with --state)");
        state.params = std::move(f.params);
        state.opt = std::move(*f.optimizer);
    }
    return state;
}

// The ceilings of --ceilings, or a quick calibration.
Ceilings train_ceilings(const TrainCliOptions& o) {
    if (!o.ceilings.empty()) {
        auto doc = read_json_file(o.ceilings);
        if (!doc.contains("ceilings")) throw UsageError("'" + o.ceilings + "' has no \"ceilings\" field");
        return ceilings_from_json(doc["ceilings"]);
    }
    std::cerr << "calibrating this machine's fp32 peak (quick; pass --ceilings FILE to reuse a full calibration)...\n";
    return calibrate_cpu(omp_get_max_threads(), true);
}

// A step's model FLOPs and tokens, and the fp32 peak (FLOP/s) MFU divides by.
struct StepCost {
    double flops, tokens, peak;
};

// What the training measured: a record per step and per evaluation, the
// wall time, and the mean time of the steps after the first two (which
// fault in the workspace).
struct TrainLog {
    nlohmann::json steps = nlohmann::json::array(), evals = nlohmann::json::array();
    double timed = 0;
    std::int64_t timed_steps = 0;
    double wall = 0, per_step = 0;
};

// Trains on `train_tokens` until step `until`, recording every step and
// evaluation and printing progress (at most every 5 s) to stderr unless --quiet.
TrainLog train(const TrainCliOptions& o, const std::vector<int>& train_tokens, const std::vector<int>& val_tokens,
               model::TrainState& state, std::int64_t until, const StepCost& cost) {
    const auto& t = o.train;
    model::Trainer trainer(t, train_tokens, val_tokens);
    TrainLog log;
    const auto start = std::chrono::steady_clock::now();
    auto last_print = start;
    std::fprintf(stderr, "training %zu parameters on %zu train / %zu validation bytes, %lld steps of %d x %d tokens\n",
                 model::param_count(o.config), train_tokens.size(), val_tokens.size(), (long long)t.steps, t.batch, t.seq);
    trainer.run(
        state, until,
        [&](const model::StepRecord& r) {
            log.steps.push_back({{"step", r.step}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm}, {"seconds", r.seconds}});
            if (r.step >= 2) log.timed += r.seconds, ++log.timed_steps;  // the first steps fault in the workspace
            const auto now = std::chrono::steady_clock::now();
            if (!o.quiet && (std::chrono::duration<double>(now - last_print).count() > 5 || r.step + 1 == until)) {
                last_print = now;
                const double per = log.timed_steps ? log.timed / double(log.timed_steps) : r.seconds;
                std::fprintf(stderr, "step %6lld/%lld  loss %.3f  lr %.2e  %6.0f tok/s  MFU %4.1f%%  left %s\n",
                             (long long)r.step + 1, (long long)until, r.loss, r.lr, cost.tokens / per,
                             100 * cost.flops / per / cost.peak, hms(per * double(until - r.step - 1)).c_str());
            }
            return true;
        },
        [&](const model::EvalRecord& e) {
            log.evals.push_back({{"step", e.step}, {"train_loss", e.train_loss}, {"val_loss", e.val_loss}, {"val_tokens", e.tokens}});
            if (!o.quiet)
                std::fprintf(stderr, "  eval at step %lld: train %.3f  validation %.3f nats/byte (%lld tokens)\n",
                             (long long)e.step, e.train_loss, e.val_loss, (long long)e.tokens);
        });
    log.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    log.per_step = log.timed_steps ? log.timed / double(log.timed_steps) : log.wall / double(std::max<std::int64_t>(1, until));
    return log;
}

// The weights to --out, and with --state a resumable checkpoint.
void save_weights(const TrainCliOptions& o, const model::TrainState& state, const model::Corpus& corpus) {
    model::ModelFile mf;
    mf.config = o.config;
    mf.params = state.params;
    mf.info = {{"trained_steps", std::to_string(state.opt.step)}, {"corpus", "Debian fortunes (" + std::to_string(corpus.files.size()) + " files)"}};
    model::save_model(o.out, mf);
    if (!o.state.empty()) {
        mf.optimizer = state.opt;
        model::save_model(o.state, mf);
    }
}

// The training record (memwall.train/1).
nlohmann::json train_record(const TrainCliOptions& o, const nlohmann::json& machine, const Ceilings& ceil,
                            const model::TrainState& state, const model::Corpus& corpus, std::size_t train_bytes,
                            std::size_t val_bytes, const TrainLog& log, const StepCost& cost, double baseline) {
    const auto& t = o.train;
    const double per_step = log.per_step;
    return {
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
                    {"train_bytes", train_bytes}, {"validation_bytes", val_bytes},
                    {"validation_rule", "quotation i goes to validation when i % 20 == 19"}}},
        {"summary", {{"wall_seconds", log.wall}, {"seconds_per_step", per_step}, {"tokens_per_s", cost.tokens / per_step},
                     {"model_flops_per_step", cost.flops}, {"achieved_gflops", cost.flops / per_step / 1e9},
                     {"peak_fp32_gflops", cost.peak / 1e9}, {"mfu", cost.flops / per_step / cost.peak},
                     {"hfu", cost.flops / per_step / cost.peak},
                     {"final_val_loss", log.evals.empty() ? nlohmann::json() : log.evals.back()["val_loss"]},
                     {"ngram_baseline", {{"val_loss", baseline}, {"order", kBaselineOrder},
                                         {"smoothing", "interpolated Witten-Bell (model/ngram.hpp)"},
                                         {"command", "memwall train --baseline"}}},
                     {"checkpoint", path_for_record(o.out)}}},
        {"steps", log.steps},
        {"evals", log.evals},
        {"command", "memwall train --steps " + std::to_string(t.steps) + " --batch " + std::to_string(t.batch) +
                        " --seq " + std::to_string(t.seq) + " --out " + path_for_record(o.out)},
    };
}

// The loss curves (training per step, validation per evaluation), when gnuplot is here.
void plot_loss(const TrainCliOptions& o, const std::string& dir, const nlohmann::json& machine, const TrainLog& log) {
    std::vector<LineSeries> series(2);
    series[0].title = "training loss (per step)";
    for (const auto& s : log.steps) series[0].points.emplace_back(s["step"].get<double>() + 1, s["loss"].get<double>());
    series[1].title = "validation loss";
    for (const auto& e : log.evals) series[1].points.emplace_back(e["step"].get<double>(), e["val_loss"].get<double>());
    if (gnuplot_available())
        plot_lines(dir, "loss-" + o.name,
                   "Training the model stack (" + std::to_string(model::param_count(o.config)) + " parameters) on " +
                       std::string(machine.value("cpu_model", "this CPU")),
                   "step", "cross-entropy (nats per byte)", series);
}

// The results folder, and --out there unless given.
std::string results_folder(const TrainCliOptions& o) {
    if (!o.results_dir.empty()) return o.results_dir;
    const std::string host = machine_info().value("hostname", "host");
    return "results/local-" + host.substr(0, host.find('.'));
}

int run_train(TrainCliOptions o) {
    if (o.baseline_only) {
        const model::Corpus corpus = read_corpus(o.corpus);
        std::printf("%d-gram (interpolated Witten-Bell) on the training split (%zu bytes): validation loss %.4f nats/byte "
                    "on the held-out split (%zu bytes)\n",
                    kBaselineOrder, corpus.train.size(), ngram_baseline(corpus), corpus.validation.size());
        return 0;
    }
    if (o.out.empty()) o.out = (std::filesystem::path(results_folder(o)) / ("model-" + o.name + ".safetensors")).string();
    check_options(o);
    if (o.threads > 0) omp_set_num_threads(o.threads);
    const auto& t = o.train;
    const model::Corpus corpus = read_corpus(o.corpus);
    const auto train_tokens = model::to_tokens(corpus.train), val_tokens = model::to_tokens(corpus.validation);
    model::TrainState state = initial_state(o);
    const Ceilings ceil = train_ceilings(o);
    const StepCost cost{3 * model::forward_flops(o.config, t.seq) * t.batch, double(t.batch) * t.seq,
                        peak_gflops(ceil, "fp32") * 1e9};
    const std::int64_t until = o.stop_after > 0 ? std::min(o.stop_after, t.steps) : t.steps;
    const TrainLog log = train(o, train_tokens, val_tokens, state, until, cost);
    save_weights(o, state, corpus);
    const double baseline = ngram_baseline(corpus);

    const nlohmann::json machine = machine_info();
    const std::string dir = results_folder(o);
    const std::filesystem::path out_json = std::filesystem::path(dir) / ("train-" + o.name + ".json");
    write_json_atomic(out_json,
                      train_record(o, machine, ceil, state, corpus, train_tokens.size(), val_tokens.size(), log, cost,
                                   baseline));
    plot_loss(o, dir, machine, log);
    std::printf("trained %lld steps in %s: %.0f tokens/s, %.1f GFLOP/s = %.1f%% MFU; validation loss %.3f nats/byte "
                "(the %d-gram baseline: %.3f)\n",
                (long long)state.opt.step, hms(log.wall).c_str(), cost.tokens / log.per_step,
                cost.flops / log.per_step / 1e9, 100 * cost.flops / log.per_step / cost.peak,
                log.evals.empty() ? NAN : log.evals.back()["val_loss"].get<double>(), kBaselineOrder, baseline);
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
    sub->add_option("--out", o->out, "weights file to write (.safetensors; default <results>/model-<name>.safetensors)");
    sub->add_flag("--force", o->force, "replace --out (and --state) if they exist");
    sub->add_option("--state", o->state, "also write a resumable checkpoint (weights + optimizer state) here");
    sub->add_option("--resume", o->resume, "continue from a checkpoint written with --state");
    sub->add_option("--stop-after", o->stop_after, "stop after this step (the schedule stays --steps long)");
    sub->add_option("--results", o->results_dir, "folder for the training record and plot (default results/local-<host>)");
    sub->add_option("--name", o->name, "name of the record: train-<name>.json, loss-<name>.svg")->capture_default_str();
    sub->add_option("--ceilings", o->ceilings, "ceilings from `memwall calibrate` (else a quick calibration)");
    sub->add_option("--threads", o->threads, "OpenMP threads (0: all)");
    sub->add_flag("--quiet", o->quiet, "no progress lines");
    sub->add_flag("--baseline", o->baseline_only,
                  "print the byte 6-gram baseline's validation loss (interpolated Witten-Bell) and exit: nothing is trained");
    return [o] { return mw::run_train(*o); };
});
