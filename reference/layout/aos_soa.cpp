// aos_soa, layout lever, rung 0 (CPU): array of structs.
//
// The op: scaled[t] = logit[t] / temperature[t] for T tokens, fp32: the
// temperature scaling a sampler applies before softmax. Each token's state
// is a 16-field record (TokenRecord in layout.hpp: ids, position, sampling
// parameters, penalties, flags; 64 bytes, one cache line), and the pass
// needs 2 of the 16 fields. The division is correctly rounded, so the result
// is exact and checked for bit equality.
//
// This rung stores the records back to back (array of structs), the layout
// a `struct Token` and a std::vector<Token> give you. The pass reads
// rec[t].logit and rec[t].temperature, 8 bytes 4 apart, but memory moves
// whole lines: every record's 64 bytes cross from DRAM to the core so that
// 8 of them can be used. 56 of every 64 bytes fetched are dead weight.
//
// Bytes: one line per record in, 4 bytes per token out:
//     64*T + 4*T = 68*T      (the SoA rung: 12*T, 5.7x less).
// At the default T = 4 Mi tokens the records are 256 MiB, far outside the
// caches: the pass is a DRAM stream, so time follows bytes.
// Tokens are split over OpenMP threads in both rungs.
//
// This file also defines the op: shapes, seeded records, exact oracle.
#include <type_traits>
#include <vector>

#include "harness/inputs.hpp"
#include "reference/layout/layout.hpp"

namespace mw::layout {

namespace {

// One field of every record from its own seeded stream.
template <class T>
void fill_field(TokenRecord* r, long n, T TokenRecord::*field, const char* name, std::uint64_t seed, double lo,
                double hi) {
    Buffer b = Buffer::make(name, std::is_integral_v<T> ? DType::i32 : DType::f32, n);
    fill_uniform(b, seed, lo, hi);
    for (long t = 0; t < n; ++t) r[t].*field = static_cast<T>(load_as_double(b, t));
}

Problem make_records(const Shape& s, DType dtype, std::uint64_t seed) {
    const long T = s["tokens"];
    Problem p{.shape = s, .dtype = dtype, .seed = seed};
    p.inputs.push_back(Buffer::make("records", DType::u8, T * sizeof(TokenRecord), {T, long(sizeof(TokenRecord))}));
    p.outputs.push_back(Buffer::make("scaled", DType::f32, T, {T}));
    TokenRecord* r = p.in("records").as<TokenRecord>();
    fill_field(r, T, &TokenRecord::token_id, "token_id", seed, 0, 128000);
    fill_field(r, T, &TokenRecord::position, "position", seed, 0, 8192);
    fill_field(r, T, &TokenRecord::sequence_id, "sequence_id", seed, 0, 256);
    fill_field(r, T, &TokenRecord::parent_beam, "parent_beam", seed, 0, 4);
    fill_field(r, T, &TokenRecord::logit, "logit", seed, -20.0, 20.0);
    fill_field(r, T, &TokenRecord::temperature, "temperature", seed, 0.25, 2.0);
    fill_field(r, T, &TokenRecord::top_p, "top_p", seed, 0.5, 1.0);
    fill_field(r, T, &TokenRecord::min_p, "min_p", seed, 0.0, 0.1);
    fill_field(r, T, &TokenRecord::logprob, "logprob", seed, -20.0, 0.0);
    fill_field(r, T, &TokenRecord::cumulative_logprob, "cumulative_logprob", seed, -200.0, 0.0);
    fill_field(r, T, &TokenRecord::presence_penalty, "presence_penalty", seed, 0.0, 1.0);
    fill_field(r, T, &TokenRecord::frequency_penalty, "frequency_penalty", seed, 0.0, 1.0);
    fill_field(r, T, &TokenRecord::repetition_penalty, "repetition_penalty", seed, 1.0, 1.3);
    fill_field(r, T, &TokenRecord::top_k, "top_k", seed, 1, 100);
    fill_field(r, T, &TokenRecord::flags, "flags", seed, 0, 65536);
    fill_field(r, T, &TokenRecord::rng_state, "rng_state", seed, 0, 1e9);
    return p;
}

// The fp32 quotient, exactly: a double quotient of two floats rounded to
// float is the correctly rounded float quotient (53 >= 2*24 + 2 bits).
std::vector<std::vector<double>> records_oracle(const Problem& p) {
    const long T = p.shape["tokens"];
    const TokenRecord* r = p.in("records").as<TokenRecord>();
    std::vector<double> out(T);
    for (long t = 0; t < T; ++t) out[t] = float(double(r[t].logit) / double(r[t].temperature));
    return {std::move(out)};
}

Instance prepare_aos(Problem& p) {
    const long T = p.shape["tokens"];
    const TokenRecord* rec = p.in("records").as<TokenRecord>();
    float* out = p.out("scaled").as<float>();
    Instance inst;
    inst.run = [=] {
#pragma omp parallel for schedule(static)
        for (long t = 0; t < T; ++t) out[t] = rec[t].logit / rec[t].temperature;
    };
    return inst;
}

}  // namespace
}  // namespace mw::layout

MW_REGISTER_OP(aos_soa, {
    .name = "aos_soa",
    .lever = "layout",
    .summary = "scaled[t] = logit[t] / temperature[t] over 16-field (64-byte) per-token sampler records (exact)",
    .axes = {"tokens"},
    .default_shape = {{{"tokens", 4 << 20}}},  // 256 MiB of records
    .quick_shape = {{{"tokens", 1 << 18}}},
    .dtypes = {mw::DType::f32},
    .flops = [](const mw::Shape& s) { return double(s["tokens"]); },
    // What the pass needs: the two fields it reads and the output.
    .compulsory_bytes = [](const mw::Shape& s, mw::DType) { return 12.0 * double(s["tokens"]); },
    .make_problem = mw::layout::make_records,
    .oracle = mw::layout::records_oracle,
    .check = {.mode = mw::CheckMode::exact},
});

MW_REGISTER_VARIANT(aos_soa_aos_cpu, {
    .name = "aos", .op = "aos_soa", .lever = "layout",
    .role = mw::Role::reference, .backend = mw::Backend::cpu, .rung = 0,
    .rationale = "records stored back to back: the pass needs 8 bytes of each 64-byte record but moves the "
                 "whole line",
    .bytes = [](const mw::Shape& s, mw::DType) { return 68.0 * double(s["tokens"]); },
    .prepare = mw::layout::prepare_aos });
