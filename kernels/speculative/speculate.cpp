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

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// --- models ---------------------------------------------------------------------

model::Config wide_config(int max_seq) {
    model::Config c;
    c.d_model = 2048, c.layers = 2, c.heads = 16, c.kv_heads = 4, c.d_ff = 5632, c.vocab = 256;
    c.max_seq = max_seq;
    return c;
}

std::vector<float> wide_params(const model::Config& c) {
    // init_params as for training (N(0, 0.02^2), residual outputs scaled).
    // A seeded model's greedy text is no text (it soon repeats a few
    // bytes), but its cost per token is a real model's of this shape, and
    // its INT4 copy agrees with it on most greedy choices (alpha ~0.9 at
    // K = 4 on this prompt), which is what the memory-bound regime needs. A
    // wider embedding (tried: 2x, 4x) makes every choice "repeat the last
    // byte" and alpha exactly 1: not kept.
    return model::init_params(c, 20261125);
}

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

void Speculator::generate(const int* prompts, int P, int n_new, int* out, const SpecOptions& o, Counts* counts) {
    using clock = std::chrono::steady_clock;
    const int V = tc_.vocab, B = B_;
    const int K = draft_ ? o.K : 0;
    if (P < 1 || n_new < 1) throw std::invalid_argument("speculative decoding needs a prompt and at least one new token");
    if (K < 0 || K > 64) throw std::invalid_argument("K = " + std::to_string(o.K) + "; valid: 1..64");
    if (P + n_new + K + 1 > max_len_)
        throw std::invalid_argument("prompt + tokens + K + 1 = " + std::to_string(P + n_new + K + 1) +
                                    " positions exceed the caches' " + std::to_string(max_len_));
    Counts c;
    const auto t_start = clock::now();
    // Sequences restart in fresh slots every call.
    std::vector<std::vector<int>> seq(static_cast<std::size_t>(B));
    for (int b = 0; b < B; ++b) {
        seq[std::size_t(b)].assign(prompts + std::size_t(b) * P, prompts + std::size_t(b + 1) * P);
        for (auto* st : {tstore_.get(), dstore_.get()}) {
            if (!st) continue;
            if (st->is_open(b)) st->close(b);
            if (!st->open(b, max_len_)) throw std::runtime_error("speculative decoding: no cache slot for sequence " + std::to_string(b));
        }
    }
    std::vector<int> rs, rp, rt;  // one step's rows: sequence, position, token
    // Prefill: every prompt token but the last, which each round feeds.
    if (P > 1) {
        const auto t0 = clock::now();
        for (auto* dec : {target_.get(), draft_.get()}) {
            if (!dec) continue;
            rs.clear(), rp.clear(), rt.clear();
            for (int b = 0; b < B; ++b)
                for (int i = 0; i < P - 1; ++i) rs.push_back(b), rp.push_back(i), rt.push_back(seq[std::size_t(b)][std::size_t(i)]);
            dec->step(int(rs.size()), rs.data(), rp.data(), rt.data());
        }
        c.prefill_s = seconds_since(t0);
    }
    std::vector<int> emitted(std::size_t(B), 0), Kb(std::size_t(B), 0), round_no(std::size_t(B), 0);
    std::vector<std::vector<int>> drafts(static_cast<std::size_t>(B));
    std::vector<std::vector<double>> q(static_cast<std::size_t>(B)), p(static_cast<std::size_t>(B));
    std::vector<int> last_row(static_cast<std::size_t>(B));
    std::vector<double> u(static_cast<std::size_t>(std::max(K, 1)));
    for (;;) {
        std::vector<int> active;
        for (int b = 0; b < B; ++b)
            if (emitted[std::size_t(b)] < n_new) active.push_back(b);
        if (active.empty()) break;
        int Kmax = 0;
        for (int b : active) {
            // No draft past the last token wanted (the round's own target token ends it).
            Kb[std::size_t(b)] = std::min(K, n_new - emitted[std::size_t(b)] - 1);
            Kmax = std::max(Kmax, Kb[std::size_t(b)]);
            drafts[std::size_t(b)].clear();
            q[std::size_t(b)].assign(std::size_t(Kb[std::size_t(b)]) * V, 0.0);
        }
        // Draft: step j proposes position L - 1 + j + 1 of each sequence.
        for (int j = 0; j < Kmax; ++j) {
            const auto t0 = clock::now();
            rs.clear(), rp.clear(), rt.clear();
            for (int b : active) {
                if (j >= Kb[std::size_t(b)]) continue;
                const auto& s = seq[std::size_t(b)];
                const int L = int(s.size());
                // Positions the draft has not seen, up to the last token + j drafts.
                for (int at = dstore_->written(b); at <= L - 1 + j; ++at)
                    rs.push_back(b), rp.push_back(at), rt.push_back(at < L ? s[std::size_t(at)] : drafts[std::size_t(b)][std::size_t(at - L)]);
                last_row[std::size_t(b)] = int(rs.size()) - 1;
            }
            const float* z = draft_->step(int(rs.size()), rs.data(), rp.data(), rt.data());
            ++c.draft_passes;
            for (int b : active) {
                if (j >= Kb[std::size_t(b)]) continue;
                const auto probs = model::sampling_probs(z + std::size_t(last_row[std::size_t(b)]) * V, V, o.temperature, o.top_k);
                std::copy(probs.begin(), probs.end(), q[std::size_t(b)].begin() + std::ptrdiff_t(j) * V);
                const double r = uniform(o.seed, std::uint64_t(b) * 4 + 0, std::uint64_t(round_no[std::size_t(b)]) * 80 + j);
                drafts[std::size_t(b)].push_back(draw(probs.data(), V, r));
            }
            c.draft_s += seconds_since(t0);
        }
        // Verify: the last kept token and the drafts, appended where the
        // target's cache ends, in one step for the whole batch.
        {
            const auto t0 = clock::now();
            rs.clear(), rp.clear(), rt.clear();
            for (int b : active) {
                const auto& s = seq[std::size_t(b)];
                const int at = tstore_->written(b);
                rs.push_back(b), rp.push_back(at), rt.push_back(s.back());
                for (int j = 0; j < Kb[std::size_t(b)]; ++j) rs.push_back(b), rp.push_back(at + 1 + j), rt.push_back(drafts[std::size_t(b)][std::size_t(j)]);
            }
            for (std::size_t i = 0; i < rp.size(); ++i)
                if (rp[i] >= max_len_)
                    throw std::runtime_error("speculative decoding: sequence " + std::to_string(rs[i]) + " reached position " +
                                             std::to_string(rp[i]) + " of " + std::to_string(max_len_) +
                                             " (a cache that is not rolled back grows past its slot)");
            const float* z = target_->step(int(rs.size()), rs.data(), rp.data(), rt.data());
            ++c.target_passes;
            std::size_t row = 0;
            for (int b : active) {
                auto& pb = p[std::size_t(b)];
                pb.assign(std::size_t(Kb[std::size_t(b)] + 1) * V, 0.0);
                for (int j = 0; j <= Kb[std::size_t(b)]; ++j, ++row) {
                    const auto probs = model::sampling_probs(z + row * V, V, o.temperature, o.top_k);
                    std::copy(probs.begin(), probs.end(), pb.begin() + std::ptrdiff_t(j) * V);
                }
            }
            c.verify_s += seconds_since(t0);
        }
        // Decide, emit, roll back.
        for (int b : active) {
            const int k = Kb[std::size_t(b)], len = tstore_->written(b) - k - 1;
            for (int j = 0; j < k; ++j) u[std::size_t(j)] = uniform(o.seed, std::uint64_t(b) * 4 + 1, std::uint64_t(round_no[std::size_t(b)]) * 80 + j);
            const double r = uniform(o.seed, std::uint64_t(b) * 4 + 2, std::uint64_t(round_no[std::size_t(b)]));
            int next = -1, keep = -1;
            const int n = round_(k, V, drafts[std::size_t(b)].data(), q[std::size_t(b)].data(), p[std::size_t(b)].data(), u.data(), r, len,
                                 &next, &keep);
            if (n < 0 || n > k || next < 0 || next >= V || keep < len + 1 || keep > len + k + 1)
                throw std::runtime_error("speculative round of sequence " + std::to_string(b) + ": accepted " + std::to_string(n) +
                                         " of " + std::to_string(k) + ", next token " + std::to_string(next) + ", keep " +
                                         std::to_string(keep) + " of positions " + std::to_string(len + 1) + ".." +
                                         std::to_string(len + k + 1) + ": out of range");
            auto& s = seq[std::size_t(b)];
            int& e = emitted[std::size_t(b)];
            for (int j = 0; j < n && e < n_new; ++j) s.push_back(drafts[std::size_t(b)][std::size_t(j)]), out[std::size_t(b) * n_new + e++] = s.back();
            if (e < n_new) s.push_back(next), out[std::size_t(b) * n_new + e++] = next;
            tstore_->truncate(b, keep);
            if (dstore_) dstore_->truncate(b, std::min(dstore_->written(b), int(s.size()) - 1));
            c.drafted += k, c.accepted += n, c.rejected += n < k ? 1 : 0, c.emitted += n + 1, ++c.rounds;
            ++round_no[std::size_t(b)];
        }
    }
    c.total_s = seconds_since(t_start);
    if (counts) *counts = c;
}

}  // namespace mw::speculative
