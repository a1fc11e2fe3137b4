// Speculative decoding: the acceptance rule and the draft/verify loop
// (kernels/speculative/speculate.hpp).
#include "kernels/speculative/speculate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/model/sampling.hpp"
#include "kernels/model/config.hpp"

namespace mw::speculative {

Draft make_draft(const std::string& kind, const model::Config& c, const float* params, const model::Config* small_cfg,
                 const float* small_params) {
    Draft d;
    d.config = c, d.params = params;
    if (kind == "int4") {
        d.format = kInt4Draft;
    } else if (kind == "early_exit") {
        const int layers = early_exit_layers(c);
        d.config = first_layers_config(c, layers);
        d.own = first_layers_params(c, params, layers);
        d.params = d.own.data();
    } else if (kind == "small" && small_cfg && small_params) {
        if (small_cfg->vocab != c.vocab) throw std::invalid_argument("the small draft's vocabulary differs from the target's");
        d.config = *small_cfg, d.params = small_params;
    } else {
        throw std::invalid_argument("draft '" + kind + "': valid: int4, early_exit, small (with its model)");
    }
    return d;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// --- models ---------------------------------------------------------------------

model::Config first_layers_config(const model::Config& c, int layers) {
    if (layers < 1 || layers > c.layers)
        throw std::invalid_argument("self-speculative draft of " + std::to_string(layers) + " layers; valid: 1.." +
                                    std::to_string(c.layers));
    model::Config d = c;
    d.layers = layers;
    return d;
}

std::vector<float> first_layers_params(const model::Config& c, const float* params, int layers) {
    const model::Config d = first_layers_config(c, layers);
    std::vector<float> out(model::param_count(d));
    const std::size_t head = std::size_t(c.vocab) * c.d_model, per = model::layer_param_count(c);
    std::copy(params, params + head + per * std::size_t(layers), out.begin());
    const float* final_norm = params + head + per * std::size_t(c.layers);
    std::copy(final_norm, final_norm + c.d_model, out.begin() + std::ptrdiff_t(head + per * std::size_t(layers)));
    return out;
}

// --- the loop -------------------------------------------------------------------

namespace {

kv_cache::KvGeometry geometry_of(const model::Config& c) { return {c.layers, c.kv_heads, c.head_dim()}; }

}  // namespace

Speculator::Speculator(const model::Config& tc, const float* tp, precision::QuantSpec tf, const model::Config* dc,
                       const float* dp, precision::QuantSpec df, int batch, int max_len)
    : B_(batch), max_len_(max_len), tc_(tc) {
    if (batch < 1) throw std::invalid_argument("speculative decoding of batch " + std::to_string(batch));
    tstore_ = std::make_unique<kv_cache::ContiguousStore>(geometry_of(tc), batch, max_len);
    target_ = std::make_unique<model::cpu::Decoder>(tc, tp, tf, *tstore_, max_len);
    if (dc) {
        if (dc->vocab != tc.vocab)
            throw std::invalid_argument("draft vocabulary " + std::to_string(dc->vocab) + " differs from the target's " +
                                        std::to_string(tc.vocab));
        dc_ = *dc;
        dstore_ = std::make_unique<kv_cache::ContiguousStore>(geometry_of(*dc), batch, max_len);
        draft_ = std::make_unique<model::cpu::Decoder>(*dc, dp, df, *dstore_, max_len);
    }
}

Speculator::~Speculator() = default;

double Speculator::target_weight_bytes() const { return target_->weight_bytes(); }
double Speculator::draft_weight_bytes() const { return draft_ ? draft_->weight_bytes() : 0; }

namespace {

double time_step(model::cpu::Decoder& dec, kv_cache::KvStore& store, int B, int max_len, int reps) {
    // One row per sequence at the middle of the slot, as a decode step there.
    std::vector<int> seq, pos, tok;
    for (int b = 0; b < B; ++b) {
        if (!store.is_open(b)) store.open(b, max_len);
        seq.push_back(b), pos.push_back(std::min(store.written(b), max_len - 1)), tok.push_back(' ');
    }
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        dec.step(B, seq.data(), pos.data(), tok.data());
        best = std::min(best, seconds_since(t0));
    }
    for (int b = 0; b < B; ++b) store.truncate(b, std::min(store.written(b), pos[std::size_t(b)]));
    return best;
}

}  // namespace

double Speculator::time_target_step(int reps) { return time_step(*target_, *tstore_, B_, max_len_, reps); }
double Speculator::time_draft_step(int reps) {
    if (!draft_) return 0;
    return time_step(*draft_, *dstore_, B_, max_len_, reps);
}

namespace {

// One decoder step's rows: sequence, position, token.
struct Rows {
    std::vector<int> seq, pos, tok;
    void clear() { seq.clear(), pos.clear(), tok.clear(); }
    void add(int b, int at, int token) { seq.push_back(b), pos.push_back(at), tok.push_back(token); }
    int size() const { return int(seq.size()); }
    const float* step(model::cpu::Decoder& dec) const { return dec.step(size(), seq.data(), pos.data(), tok.data()); }
};

// One sequence through the rounds.
struct Sequence {
    std::vector<int> tokens;  // the prompt, then what was emitted
    int* out = nullptr;       // its row of the output
    int emitted = 0, round = 0;
    int k = 0;                // draft tokens this round
    std::vector<int> drafts;
    std::vector<double> q, p;  // this round's draft [k][V] and target [k + 1][V] distributions
    int last_row = 0;          // its last row in a draft step
};

// What one generate() call's steps share.
struct Loop {
    model::cpu::Decoder& target;
    model::cpu::Decoder* draft;
    kv_cache::KvStore& tstore;
    kv_cache::KvStore* dstore;
    RoundFn round_fn;
    int V, max_len, n_new;
    const SpecOptions& o;
    Counts& c;
    std::vector<Sequence> seqs;
    std::vector<double> u;  // the acceptance tests' uniforms of one sequence-round
    Rows rows;
};

// Sequence b's seeded uniforms: stream 4b + 0 the draft's draws, 4b + 1 the
// acceptance tests (index 80 round + j), 4b + 2 the round's last draw.
double draft_uniform(const Loop& l, int b, int j) {
    return uniform(l.o.seed, std::uint64_t(b) * 4 + 0, std::uint64_t(l.seqs[b].round) * 80 + j);
}
double accept_uniform(const Loop& l, int b, int j) {
    return uniform(l.o.seed, std::uint64_t(b) * 4 + 1, std::uint64_t(l.seqs[b].round) * 80 + j);
}
double last_uniform(const Loop& l, int b) { return uniform(l.o.seed, std::uint64_t(b) * 4 + 2, std::uint64_t(l.seqs[b].round)); }

void check_arguments(int P, int n_new, int K, int asked_K, int max_len) {
    if (P < 1 || n_new < 1) throw std::invalid_argument("speculative decoding needs a prompt and at least one new token");
    if (K < 0 || K > 64) throw std::invalid_argument("K = " + std::to_string(asked_K) + "; valid: 1..64");
    if (P + n_new + K + 1 > max_len)
        throw std::invalid_argument("prompt + tokens + K + 1 = " + std::to_string(P + n_new + K + 1) +
                                    " positions exceed the caches' " + std::to_string(max_len));
}

// Sequences restart in fresh slots every call.
void open_sequences(Loop& l, const int* prompts, int P) {
    const int B = int(l.seqs.size());
    for (int b = 0; b < B; ++b) {
        Sequence& s = l.seqs[b];
        s.tokens.assign(prompts + std::size_t(b) * P, prompts + std::size_t(b + 1) * P);
        for (auto* st : {&l.tstore, l.dstore}) {
            if (!st) continue;
            if (st->is_open(b)) st->close(b);
            if (!st->open(b, l.max_len)) throw std::runtime_error("speculative decoding: no cache slot for sequence " + std::to_string(b));
        }
    }
}

// Prefill: every prompt token but the last, which each round feeds.
void prefill(Loop& l, int P) {
    const auto t0 = std::chrono::steady_clock::now();
    for (auto* dec : {&l.target, l.draft}) {
        if (!dec) continue;
        l.rows.clear();
        for (int b = 0; b < int(l.seqs.size()); ++b)
            for (int i = 0; i < P - 1; ++i) l.rows.add(b, i, l.seqs[b].tokens[i]);
        l.rows.step(*dec);
    }
    l.c.prefill_s = seconds_since(t0);
}

// The row's distribution (softmax at the options' temperature and top-k)
// copied into slot j of `dist`.
void put_probs(const Loop& l, const float* z, std::size_t row, std::vector<double>& dist, int j) {
    const auto probs = model::sampling_probs(z + row * l.V, l.V, l.o.temperature, l.o.top_k);
    std::copy(probs.begin(), probs.end(), dist.begin() + std::ptrdiff_t(j) * l.V);
}

// Draft step j proposes position L + j of each sequence with j < k, after
// feeding it what it has not seen: up to the last token and j drafts.
void draft_step(Loop& l, const std::vector<int>& active, int j) {
    const auto t0 = std::chrono::steady_clock::now();
    l.rows.clear();
    for (int b : active) {
        Sequence& s = l.seqs[b];
        if (j >= s.k) continue;
        const int L = int(s.tokens.size());
        for (int at = l.dstore->written(b); at <= L - 1 + j; ++at) l.rows.add(b, at, at < L ? s.tokens[at] : s.drafts[at - L]);
        s.last_row = l.rows.size() - 1;
    }
    const float* z = l.rows.step(*l.draft);
    ++l.c.draft_passes;
    for (int b : active) {
        Sequence& s = l.seqs[b];
        if (j >= s.k) continue;
        put_probs(l, z, std::size_t(s.last_row), s.q, j);
        s.drafts.push_back(draw(s.q.data() + std::ptrdiff_t(j) * l.V, l.V, draft_uniform(l, b, j)));
    }
    l.c.draft_s += seconds_since(t0);
}

// Verify: the last kept token and the drafts, appended where the target's
// cache ends, in one step for the whole batch.
void verify_step(Loop& l, const std::vector<int>& active) {
    const auto t0 = std::chrono::steady_clock::now();
    l.rows.clear();
    for (int b : active) {
        const Sequence& s = l.seqs[b];
        const int at = l.tstore.written(b);
        l.rows.add(b, at, s.tokens.back());
        for (int j = 0; j < s.k; ++j) l.rows.add(b, at + 1 + j, s.drafts[j]);
    }
    for (int i = 0; i < l.rows.size(); ++i)
        if (l.rows.pos[i] >= l.max_len)
            throw std::runtime_error("speculative decoding: sequence " + std::to_string(l.rows.seq[i]) + " reached position " +
                                     std::to_string(l.rows.pos[i]) + " of " + std::to_string(l.max_len) +
                                     " (a cache that is not rolled back grows past its slot)");
    const float* z = l.rows.step(l.target);
    ++l.c.target_passes;
    std::size_t row = 0;
    for (int b : active) {
        Sequence& s = l.seqs[b];
        s.p.assign(std::size_t(s.k + 1) * l.V, 0.0);
        for (int j = 0; j <= s.k; ++j, ++row) put_probs(l, z, row, s.p, j);
    }
    l.c.verify_s += seconds_since(t0);
}

// Decide sequence b's round (the acceptance rule), emit the accepted drafts
// and the next token, and roll both caches back to what was kept.
void decide(Loop& l, int b) {
    Sequence& s = l.seqs[b];
    const int k = s.k, len = l.tstore.written(b) - k - 1;
    for (int j = 0; j < k; ++j) l.u[j] = accept_uniform(l, b, j);
    int next = -1, keep = -1;
    const int n = l.round_fn(k, l.V, s.drafts.data(), s.q.data(), s.p.data(), l.u.data(), last_uniform(l, b), len,
                             &next, &keep);
    if (n < 0 || n > k || next < 0 || next >= l.V || keep < len + 1 || keep > len + k + 1)
        throw std::runtime_error("speculative round of sequence " + std::to_string(b) + ": accepted " + std::to_string(n) +
                                 " of " + std::to_string(k) + ", next token " + std::to_string(next) + ", keep " +
                                 std::to_string(keep) + " of positions " + std::to_string(len + 1) + ".." +
                                 std::to_string(len + k + 1) + ": out of range");
    for (int j = 0; j < n && s.emitted < l.n_new; ++j) s.tokens.push_back(s.drafts[j]), s.out[s.emitted++] = s.drafts[j];
    if (s.emitted < l.n_new) s.tokens.push_back(next), s.out[s.emitted++] = next;
    l.tstore.truncate(b, keep);
    if (l.dstore) l.dstore->truncate(b, std::min(l.dstore->written(b), int(s.tokens.size()) - 1));
    l.c.drafted += k, l.c.accepted += n, l.c.rejected += n < k ? 1 : 0, l.c.emitted += n + 1, ++l.c.rounds;
    ++s.round;
}

// One round of every unfinished sequence: draft, verify, decide. False
// when every sequence is done.
bool run_round(Loop& l, int K) {
    std::vector<int> active;
    for (int b = 0; b < int(l.seqs.size()); ++b)
        if (l.seqs[b].emitted < l.n_new) active.push_back(b);
    if (active.empty()) return false;
    int Kmax = 0;
    for (int b : active) {
        Sequence& s = l.seqs[b];
        // No draft past the last token wanted (the round's own target token ends it).
        s.k = std::min(K, l.n_new - s.emitted - 1);
        Kmax = std::max(Kmax, s.k);
        s.drafts.clear();
        s.q.assign(std::size_t(s.k) * l.V, 0.0);
    }
    for (int j = 0; j < Kmax; ++j) draft_step(l, active, j);
    verify_step(l, active);
    for (int b : active) decide(l, b);
    return true;
}

}  // namespace

void Speculator::generate(const int* prompts, int P, int n_new, int* out, const SpecOptions& o, Counts* counts) {
    const int K = draft_ ? o.K : 0;
    check_arguments(P, n_new, K, o.K, max_len_);
    Counts c;
    const auto t_start = std::chrono::steady_clock::now();
    Loop l{*target_, draft_.get(), *tstore_, dstore_.get(), round_, tc_.vocab, max_len_, n_new, o, c,
           std::vector<Sequence>(std::size_t(B_)), std::vector<double>(std::size_t(std::max(K, 1))), {}};
    for (int b = 0; b < B_; ++b) l.seqs[b].out = out + std::size_t(b) * n_new;
    open_sequences(l, prompts, P);
    if (P > 1) prefill(l, P);
    while (run_round(l, K)) {
    }
    c.total_s = seconds_since(t_start);
    if (counts) *counts = c;
}

}  // namespace mw::speculative
