// serve, rung 0 (the reference): static batching on contiguous caches.
//
// The budget is cut into floor(budget / max_len) slots of max_len positions
// (kernels/kv_cache/kv_store.hpp's ContiguousStore): a server that does not
// know how long a request will run must reserve the longest it may run. The
// scheduler forms a batch of up to `slots` waiting requests (first come,
// first served), prefills their prompts in one step, decodes them together,
// and forms the next batch only when every member has finished: a member
// done early keeps its slot, idle, until the longest one ends (the padded
// batch of static batching). Expected: concurrency capped at the slot count
// whatever the lengths, almost every reserved byte wasted at a mean length
// far below max_len (a slot of 4096 positions holds ~500), and requests
// queued behind the longest member of each batch (long times to first token).
//
// Also here: the op (trace, oracle, validation; serve.hpp states the trace's
// distribution) and the engine both rungs run (ServeEngine).
#include "reference/kv_cache/serve.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "harness/check.hpp"
#include "harness/disturbance.hpp"
#include "harness/inputs.hpp"
#include "harness/timing.hpp"
#include "reference/kv_cache/generate.hpp"
#include "model/model.hpp"

namespace mw::kv_cache {

// --- the trace ----------------------------------------------------------------

TraceSpec trace_spec(const Shape& s) {
    return {int(s["requests"]), int(s["mean_len"]), int(s["max_len"]), int(s["shared"]), int(s["gap"]),
            std::uint64_t(s["seed"])};
}

double trace_length_q(int mean_len, int lo, int max_len) {
    if (!(lo < mean_len && mean_len < max_len))
        throw std::invalid_argument("trace lengths: need lo " + std::to_string(lo) + " < mean_len " +
                                    std::to_string(mean_len) + " < max_len " + std::to_string(max_len));
    // E[min(lo + G, max_len)] = lo + sum_{k=1}^{n} q^k, n = max_len - lo: increasing in q.
    const int n = max_len - lo;
    auto mean = [&](double q) { return lo + q * (1 - std::pow(q, n)) / (1 - q); };
    double a = 0, b = 1;
    for (int i = 0; i < 200; ++i) {
        const double m = (a + b) / 2;
        (mean(m) < mean_len ? a : b) = m;
    }
    return (a + b) / 2;
}

namespace {

// Uniform in (0, 1) from the seed and a stream name: the same on every machine.
double uniform(std::uint64_t seed, const std::string& stream) {
    return (double(mix_seed(seed, stream) >> 11) + 0.5) * 0x1p-53;
}

}  // namespace

Trace make_trace(const TraceSpec& t) {
    const int lo = t.shared + 2;
    const double log_q = std::log(trace_length_q(t.mean_len, lo, t.max_len));
    const std::string text = kPromptText;
    Trace tr;
    tr.shared = t.shared;
    double clock = 0;
    for (int i = 0; i < t.requests; ++i) {
        const std::string id = std::to_string(i);
        if (i > 0) clock += -t.gap * std::log(uniform(t.seed, "serve/gap/" + id));
        const double g = std::floor(std::log(uniform(t.seed, "serve/length/" + id)) / log_q);
        const int len = int(std::min<double>(t.max_len, lo + g));
        const double f = 0.2 + 0.6 * uniform(t.seed, "serve/prompt/" + id);
        const int prompt = std::clamp(int(std::lround(f * len)), t.shared + 1, len - 1);
        Request r;
        r.arrival = int(clock);
        r.output = len - prompt;
        const std::size_t off = mix_seed(t.seed, "serve/offset/" + id) % text.size();
        for (int k = 0; k < prompt; ++k) {
            const std::size_t at = k < t.shared ? std::size_t(k) : off + std::size_t(k - t.shared);
            r.prompt.push_back((unsigned char)text[at % text.size()]);
        }
        tr.requests.push_back(std::move(r));
    }
    return tr;
}

Problem serve_problem(const Shape& s, const Trace& t) {
    Problem p;
    p.shape = s;
    const std::int64_t n = std::int64_t(t.requests.size());
    Buffer arrival = Buffer::make("arrival", DType::i32, std::size_t(n));
    Buffer prompt_len = Buffer::make("prompt_len", DType::i32, std::size_t(n));
    Buffer output_len = Buffer::make("output_len", DType::i32, std::size_t(n));
    std::vector<std::int32_t> prompts;
    int longest = 1;
    for (std::int64_t i = 0; i < n; ++i) {
        const Request& r = t.requests[std::size_t(i)];
        arrival.as<std::int32_t>()[i] = r.arrival;
        prompt_len.as<std::int32_t>()[i] = int(r.prompt.size());
        output_len.as<std::int32_t>()[i] = r.output;
        prompts.insert(prompts.end(), r.prompt.begin(), r.prompt.end());
        longest = std::max(longest, r.output);
    }
    Buffer all = Buffer::make("prompts", DType::i32, prompts.size());
    std::copy(prompts.begin(), prompts.end(), all.as<std::int32_t>());
    for (Buffer* b : {&arrival, &prompt_len, &output_len, &all}) p.inputs.push_back(std::move(*b));
    p.outputs.push_back(Buffer::make("tokens", DType::i32, std::size_t(n * longest), {n, longest}));
    return p;
}

Trace trace_of(const Problem& p) {
    Trace t;
    t.shared = int(p.shape["shared"]);
    const Buffer& arrival = p.in("arrival");
    const std::int32_t* prompts = p.in("prompts").as<std::int32_t>();
    std::size_t at = 0;
    for (std::size_t i = 0; i < arrival.count; ++i) {
        Request r;
        r.arrival = arrival.as<std::int32_t>()[i];
        r.output = p.in("output_len").as<std::int32_t>()[i];
        const int n = p.in("prompt_len").as<std::int32_t>()[i];
        r.prompt.assign(prompts + at, prompts + at + n);
        at += std::size_t(n);
        if (n <= t.shared || r.output < 1 || !std::equal(r.prompt.begin(), r.prompt.begin() + t.shared, prompts))
            throw std::invalid_argument("serve trace: request " + std::to_string(i) + " (prompt " + std::to_string(n) +
                                        ", output " + std::to_string(r.output) + ") must start with the " +
                                        std::to_string(t.shared) + " shared tokens, have one of its own and an output");
        t.requests.push_back(std::move(r));
    }
    return t;
}

double serve_bytes_per_position() {
    const auto& c = default_model().config;
    return bytes_per_position({c.layers, c.kv_heads, c.head_dim()}, Elem::f32);
}

// --- the engine -----------------------------------------------------------------

ServeEngine::ServeEngine(const Trace& t, KvStore& store, model::cpu::Decoder& dec)
    : trace_(t), store_(store), dec_(dec), state_(t.requests.size()), remaining_(int(t.requests.size())),
      start_(clock::now()) {
    for (std::size_t i = 1; i < t.requests.size(); ++i)
        if (t.requests[i].arrival < t.requests[i - 1].arrival)
            throw std::invalid_argument("serve trace: request " + std::to_string(i) + " arrives before request " +
                                        std::to_string(i - 1) + " (requests are listed in arrival order)");
}

int ServeEngine::context_len(int r) const { return int(request(r).prompt.size()) + generated(r); }

void ServeEngine::begin_iteration() {
    ++iter_;
    iter_start_ = clock::now();
    for (; next_arrival_ < int(trace_.requests.size()) && request(next_arrival_).arrival <= iter_; ++next_arrival_) {
        state_[std::size_t(next_arrival_)].arrived = iter_start_;
        waiting_.push_back(next_arrival_);
    }
}

void ServeEngine::admit(int r, int seq) { state_[std::size_t(r)].seq = seq; }
void ServeEngine::release(int r) { state_[std::size_t(r)].seq = -1; }

void ServeEngine::reject(int r, const std::string& why) {
    rejections_.push_back("request " + std::to_string(r) + ": " + why);
    rejected_.push_back(r);
    --remaining_;
}

void ServeEngine::note_preemption(int positions) {
    ++preemptions_;
    recomputed_ += positions;
}

void ServeEngine::feed(int r, int from) {
    const State& st = state_[std::size_t(r)];
    if (st.seq < 0 || done(r) || from < 0 || from >= context_len(r))
        throw std::logic_error("serve: feeding request " + std::to_string(r) + " from position " + std::to_string(from) +
                               " (context " + std::to_string(context_len(r)) + ", sequence " + std::to_string(st.seq) +
                               (done(r) ? ", done)" : ")"));
    const auto& prompt = request(r).prompt;
    const int P = int(prompt.size());
    for (int pos = from; pos < context_len(r); ++pos) {
        row_seq_.push_back(st.seq);
        row_pos_.push_back(pos);
        row_tok_.push_back(pos < P ? prompt[std::size_t(pos)] : st.tokens[std::size_t(pos - P)]);
    }
    last_row_.emplace_back(r, int(row_seq_.size()) - 1);
}

void ServeEngine::run_rows(int seq, const std::vector<int>& tokens) {
    std::vector<int> seqs(tokens.size(), seq), pos(tokens.size());
    std::iota(pos.begin(), pos.end(), 0);
    dec_.step(int(tokens.size()), seqs.data(), pos.data(), tokens.data());
}

void ServeEngine::end_iteration() {
    if (!row_seq_.empty()) {
        for (int pos : row_pos_) attended_ += pos + 1;
        const float* z = dec_.step(int(row_seq_.size()), row_seq_.data(), row_pos_.data(), row_tok_.data());
        const auto now = clock::now();
        const int V = dec_.config().vocab;
        for (const auto& [r, row] : last_row_) {
            State& st = state_[std::size_t(r)];
            const float* zr = z + std::size_t(row) * V;
            st.tokens.push_back(int(std::max_element(zr, zr + V) - zr));
            const double since = std::chrono::duration<double>(now - (st.tokens.size() == 1 ? st.arrived : st.last)).count();
            (st.tokens.size() == 1 ? ttft_s_ : itl_s_).push_back(since);
            st.last = now;
            if (done(r)) --remaining_;
        }
        produced_ += double(last_row_.size());
        end_ = now;
    }
    int holding = 0;
    for (const State& st : state_) holding += st.seq >= 0;
    admitted_.push_back(holding);
    if (!waiting_.empty()) admitted_queued_.push_back(holding);
    running_.push_back(double(last_row_.size()));
    reserved_.push_back(store_.reserved_bytes());
    wasted_.push_back(store_.wasted_bytes());
    row_seq_.clear(), row_pos_.clear(), row_tok_.clear(), last_row_.clear();
}

namespace {

double mean(const std::vector<double>& v) {
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

}  // namespace

ServeResult ServeEngine::result() const {
    ServeResult out;
    for (const State& st : state_) out.tokens.push_back(st.tokens);
    out.rejections = rejections_;
    const double seq_iters = std::accumulate(admitted_.begin(), admitted_.end(), 0.0);
    const double block = 16 * serve_bytes_per_position();
    const double seconds = std::chrono::duration<double>(end_ - start_).count();
    out.counters = {
        {"iterations", double(admitted_.size())},
        {"admitted_max", admitted_.empty() ? 0.0 : *std::max_element(admitted_.begin(), admitted_.end())},
        {"admitted_mean", mean(admitted_)},
        {"admitted_mean_queued", mean(admitted_queued_)},
        {"running_mean", mean(running_)},
        {"kv_budget_bytes", store_.budget_bytes()},
        {"kv_reserved_mean", mean(reserved_)},
        {"kv_wasted_bytes_mean", mean(wasted_)},
        {"kv_wasted_per_seq_blocks",
         seq_iters > 0 ? std::accumulate(wasted_.begin(), wasted_.end(), 0.0) / seq_iters / block : 0.0},
        {"tokens_per_s", seconds > 0 ? produced_ / seconds : 0.0},
        {"ttft_p50_ms", percentile(ttft_s_, 0.5) * 1e3},
        {"ttft_p99_ms", percentile(ttft_s_, 0.99) * 1e3},
        {"itl_p50_ms", percentile(itl_s_, 0.5) * 1e3},
        {"itl_p99_ms", percentile(itl_s_, 0.99) * 1e3},
        {"rejected", double(rejections_.size())},
        {"preemptions", double(preemptions_)},
        {"recomputed_tokens", recomputed_},
        {"kv_read_bytes", attended_ * serve_bytes_per_position()},
    };
    // The admitted batch over time, where it changes: admitted[k] requests
    // hold memory from iteration admitted_from_iteration[k] on.
    auto& from = out.series["admitted_from_iteration"];
    auto& count = out.series["admitted"];
    for (std::size_t i = 0; i < admitted_.size(); ++i)
        if (count.empty() || count.back() != admitted_[i]) from.push_back(double(i)), count.push_back(admitted_[i]);
    out.series["rejected_requests"].assign(rejected_.begin(), rejected_.end());
    return out;
}

// --- the rungs' shared glue ----------------------------------------------------------

const DecodeModel& serve_model(int max_len) { return decode_model(default_model().config.kv_heads, max_len); }

std::int64_t budget_positions(const Shape& s) {
    return std::int64_t(double(s["budget_mib"]) * 1024 * 1024 / serve_bytes_per_position());
}

Instance serve_instance(Problem& p, std::shared_ptr<KvStore> store, ServePolicy policy) {
    const auto& dm = serve_model(int(p.shape["max_len"]));
    auto dec = std::make_shared<model::cpu::Decoder>(dm.config, dm.params.data(), precision::QuantSpec{}, *store,
                                                     int(p.shape["max_len"]));
    auto trace = std::make_shared<const Trace>(trace_of(p));
    auto result = std::make_shared<ServeResult>();
    Buffer& buf = p.out("tokens");
    std::int32_t* out = buf.as<std::int32_t>();
    const std::size_t count = buf.count, steps = std::size_t(buf.dims.back());
    Instance inst;
    inst.run = [=] {
        *result = policy(*trace, *dec);
        std::fill_n(out, count, -1);
        for (std::size_t r = 0; r < result->tokens.size(); ++r)
            std::copy(result->tokens[r].begin(), result->tokens[r].end(), out + r * steps);
    };
    inst.counters = [result, dec] {
        auto c = result->counters;
        dec->free_cores().add_counter(c);
        return c;
    };
    inst.series = [result] { return result->series; };
    return inst;
}

// --- rung 0 ----------------------------------------------------------------------------

ServeResult serve_static(const Trace& t, ContiguousStore& store, model::cpu::Decoder& dec) {
    ServeEngine e(t, store, dec);
    std::vector<int> batch;  // member i holds slot i
    while (!e.finished()) {
        e.begin_iteration();
        if (batch.empty()) {
            while (int(batch.size()) < store.slots() && !e.waiting().empty()) {
                const int r = e.waiting().front();
                e.waiting().pop_front();
                if (e.request(r).length() > store.slot_len()) {
                    e.reject(r, std::to_string(e.request(r).length()) + " positions exceed a slot of max_len = " +
                                    std::to_string(store.slot_len()));
                    continue;
                }
                const int slot = int(batch.size());
                if (!store.open(slot, store.slot_len()))  // the whole slot, reserved now
                    throw std::logic_error("serve: slot " + std::to_string(slot) + " is taken");
                e.admit(r, slot);
                e.feed(r, 0);
                batch.push_back(r);
            }
        } else {
            for (int r : batch)
                if (!e.done(r)) e.feed(r, e.context_len(r) - 1);
        }
        e.end_iteration();
        if (std::all_of(batch.begin(), batch.end(), [&](int r) { return e.done(r); })) {
            for (int r : batch) store.close(e.seq(r)), e.release(r);
            batch.clear();
        }
    }
    return e.result();
}

namespace {

Instance prepare_static(Problem& p) {
    const auto& c = serve_model(int(p.shape["max_len"])).config;
    const int max_len = int(p.shape["max_len"]), slots = int(budget_positions(p.shape) / max_len);
    auto store = std::make_shared<ContiguousStore>(KvGeometry{c.layers, c.kv_heads, c.head_dim()}, slots, max_len);
    return serve_instance(p, store, [store](const Trace& t, model::cpu::Decoder& dec) {
        return serve_static(t, *store, dec);
    });
}

// --- the op ----------------------------------------------------------------------------

Problem make_serve(const Shape& s, DType, std::uint64_t seed) {
    Problem p = serve_problem(s, make_trace(trace_spec(s)));
    p.seed = seed;
    return p;
}

// Every request's greedy continuation by the fp64 model on its own prompt
// (batching changes no request's tokens), a request longer than max_len
// rejected: its row all -1 like the padding, whose margins are infinite.
std::vector<std::vector<double>> oracle_serve(const Problem& p) {
    const Trace t = trace_of(p);
    const int max_len = int(p.shape["max_len"]);
    const auto& dm = serve_model(max_len);
    const std::vector<double> w(dm.params.begin(), dm.params.end());
    const Buffer& out = p.out("tokens");
    const std::int64_t steps = out.dims.back(), n = std::int64_t(t.requests.size());
    std::vector<double> ids(out.count, -1.0), margins(out.count, INFINITY);
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t r = 0; r < n; ++r) {
        const Request& q = t.requests[std::size_t(r)];
        if (q.length() > max_len) continue;
        std::vector<double> m;
        const auto tok = model::ref_greedy(dm.config, w.data(), q.prompt, q.output, &m);
        std::copy(tok.begin(), tok.end(), ids.begin() + r * steps);
        std::copy(m.begin(), m.end(), margins.begin() + r * steps);
    }
    return {token_oracle(std::move(ids), margins)};
}

std::string validate_serve(const Shape& s) {
    auto bad = [&](const std::string& axis, const std::string& why) {
        return axis + " = " + std::to_string(s[axis]) + ": " + why;
    };
    if (s["requests"] < 1 || s["requests"] > 4096) return bad("requests", "valid 1..4096");
    if (s["max_len"] < 8 || s["max_len"] > 32768) return bad("max_len", "valid 8..32768");
    if (s["shared"] < 0 || s["shared"] + 2 >= s["mean_len"])
        return bad("shared", "the shared prefix + 2 (a token of its own and an output) must stay below mean_len = " +
                                 std::to_string(s["mean_len"]));
    if (s["mean_len"] >= s["max_len"]) return bad("mean_len", "must be below max_len = " + std::to_string(s["max_len"]));
    if (s["gap"] < 0 || s["gap"] > 100000) return bad("gap", "valid 0..100000 iterations");
    if (s["budget_mib"] < 1 || s["budget_mib"] > 8192) return bad("budget_mib", "valid 1..8192");
    // Room for one request of max_len positions beside the shared prefix:
    // at least one static slot, and a paged pool no request outgrows.
    const std::int64_t need = s["max_len"] + (s["shared"] + 15) / 16 * 16, have = budget_positions(s);
    if (have < need)
        return bad("budget_mib", "holds " + std::to_string(have) + " positions of " +
                                     std::to_string(std::int64_t(serve_bytes_per_position())) +
                                     " bytes, fewer than one request of max_len = " + std::to_string(s["max_len"]) +
                                     " beside the shared prefix (" + std::to_string(need) + " positions)");
    return {};
}

// Useful work: every request's forward over the positions it feeds
// (prompt + output - 1), as if computed alone; recomputation after a
// preemption and the shared prefix computed once are the rungs' business.
double serve_flops(const Shape& s) {
    double f = 0;
    for (const Request& r : make_trace(trace_spec(s)).requests) f += forward_flops(r.length() - 1);
    return f;
}

double serve_tokens(const Shape& s) {
    double n = 0;
    for (const Request& r : make_trace(trace_spec(s)).requests) n += r.output;
    return n;
}

}  // namespace
}  // namespace mw::kv_cache

MW_REGISTER_OP(serve, {
    .name = "serve", .lever = "kv_cache",
    .summary = "a serving simulation: a seeded trace of requests decoded by the trained model on a fixed KV-memory budget",
    .axes = {"requests", "mean_len", "max_len", "budget_mib", "shared", "gap", "seed"},
    .default_shape = {{{"requests", 32}, {"mean_len", 500}, {"max_len", 4096}, {"budget_mib", 64},
                       {"shared", 64}, {"gap", 1}, {"seed", 1}}},
    .quick_shape = {{{"requests", 8}, {"mean_len", 100}, {"max_len", 512}, {"budget_mib", 4},
                     {"shared", 16}, {"gap", 1}, {"seed", 1}}},
    .dtypes = {mw::DType::f32},
    .flops = mw::kv_cache::serve_flops,
    // The weights once, and the trace's tokens in and out.
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) {
        double tokens = 0;
        for (const auto& r : mw::kv_cache::make_trace(mw::kv_cache::trace_spec(s)).requests) tokens += r.length();
        return 4.0 * double(mw::kv_cache::default_model().params.size()) + 4.0 * tokens;
    },
    .unit = {"tokens", mw::kv_cache::serve_tokens},
    .make_problem = mw::kv_cache::make_serve,
    .oracle = mw::kv_cache::oracle_serve,
    .check = {.mode = mw::CheckMode::token_sequence,
              .reduction_length = [](const mw::Shape&) {
                  const auto& c = mw::kv_cache::default_model().config;
                  return double(c.d_ff) * c.layers;
              },
              .logit_scale = 20.0},
    .validate = mw::kv_cache::validate_serve,
    .flag_axes = {"shared", "gap", "seed"} });

MW_REGISTER_VARIANT(serve_static_cpu, {
    .name = "static", .op = "serve", .lever = "kv_cache",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "static batching on contiguous slots of max_len positions: concurrency capped at budget / max_len, "
                 "a new batch only when the whole previous one has finished",
    .needs = {"avx2"},
    .prepare = mw::kv_cache::prepare_static });
