// `memwall quant-error [--rows R] [--cols C] [--seed S] [--out FILE.json]`:
// the precision lever's error table. Quantizes a seeded normal weight matrix
// (std 0.02, like a trained layer) in every format, dequantizes it and
// reports, per format: effective bits per weight (payload + per-group
// metadata; activations and row padding not counted), max abs error, relative
// Frobenius error and SNR = 10 log10(sum w^2 / sum (w - w_hat)^2). Then the
// outlier experiment: ~0.1% of input channels (columns) scaled by 3, 10 and
// 20x, comparing per-tensor INT8, per-channel INT8 and block-wise INT4.
// Per-tensor INT8's single scale stretches to the outliers and its error on
// everything else grows with them; per-channel INT8 (scale per output row)
// suffers too, since each row contains the outlier columns; block-wise INT4
// confines the damage to the groups that hold an outlier.
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "harness/command.hpp"
#include "harness/inputs.hpp"
#include "harness/results.hpp"
#include "kernels/precision/quant.hpp"

namespace mw {
namespace {

struct QuantErrorOptions {
    std::int64_t rows = 1024, cols = 4096;
    std::uint64_t seed = 42;
    std::string out;
};

struct Errors {
    double max_abs = 0, rel_fro = 0, snr_db = 0;
};

Errors measure(const precision::QMatrix& m, const std::vector<float>& W) {
    double err2 = 0, ref2 = 0, max_abs = 0;
    std::vector<float> row(std::size_t(m.n_in));
    for (std::int64_t i = 0; i < m.n_out; ++i) {
        precision::dequantize_row(m, i, row.data());
        for (std::int64_t j = 0; j < m.n_in; ++j) {
            const double w = W[i * m.n_in + j], d = w - row[j];
            err2 += d * d, ref2 += w * w, max_abs = std::max(max_abs, std::fabs(d));
        }
    }
    return {max_abs, std::sqrt(err2 / ref2), 10 * std::log10(ref2 / std::max(err2, 1e-300))};
}

std::vector<precision::QuantSpec> formats() {
    using precision::Format;
    std::vector<precision::QuantSpec> f = {{Format::bf16}, {Format::f16}, {Format::int8_tensor}, {Format::int8_channel}};
    for (bool asym : {false, true})
        for (int g : {32, 64, 128}) f.push_back({Format::int4, g, asym});
    return f;
}

nlohmann::json row_json(const precision::QuantSpec& q, std::int64_t cols, const Errors& e) {
    return {{"format", precision::describe(q)}, {"group", q.group}, {"asym", q.asym},
            {"effective_bits", precision::effective_bits(q, cols)},
            {"max_abs", e.max_abs}, {"rel_fro", e.rel_fro}, {"snr_db", e.snr_db}};
}

int run_quant_error(const QuantErrorOptions& o) {
    Buffer b = Buffer::make("W", DType::f32, std::size_t(o.rows * o.cols));
    fill_normal(b, o.seed, 0.02);
    std::vector<float> W(b.as<float>(), b.as<float>() + b.count);
    nlohmann::json doc = {{"schema", "memwall.quant_error/1"}, {"rows", o.rows}, {"cols", o.cols}, {"seed", o.seed},
                          {"weights", "normal, std 0.02"},
                          {"effective_bits_counts", "payload bits + per-group scale/zero-point bits / group size; "
                                                    "excludes row padding and activations"}};
    std::printf("quantization error, W[%lld x %lld] ~ N(0, 0.02^2), seed %llu\n\n", (long long)o.rows,
                (long long)o.cols, (unsigned long long)o.seed);
    std::printf("| format | bits/weight | max abs | rel. Frobenius | SNR dB |\n|---|---:|---:|---:|---:|\n");
    for (auto& q : formats()) {
        const Errors e = measure(precision::quantize(q, W.data(), o.rows, o.cols), W);
        std::printf("| %s | %.4g | %.3g | %.3g | %.1f |\n", precision::describe(q).c_str(),
                    precision::effective_bits(q, o.cols), e.max_abs, e.rel_fro, e.snr_db);
        doc["formats"].push_back(row_json(q, o.cols, e));
    }

    // Outliers: every 1000th column (0.1% of input channels), scaled up.
    const std::vector<precision::QuantSpec> compare = {{precision::Format::int8_tensor},
                                                       {precision::Format::int8_channel},
                                                       {precision::Format::int4, 64, false},
                                                       {precision::Format::int4, 128, false}};
    std::printf("\noutlier channels: every 1000th column (%lld of %lld) x magnitude; error on the NON-outlier weights "
                "and overall\n\n| magnitude | format | rel. Frobenius (normal weights) | rel. Frobenius (all) | SNR dB (all) |\n"
                "|---:|---|---:|---:|---:|\n",
                (long long)((o.cols + 999) / 1000), (long long)o.cols);
    for (double mag : {1.0, 3.0, 10.0, 20.0}) {
        std::vector<float> Wo = W;
        for (std::int64_t i = 0; i < o.rows; ++i)
            for (std::int64_t j = 0; j < o.cols; j += 1000) Wo[i * o.cols + j] *= float(mag);
        for (auto& q : compare) {
            const auto m = precision::quantize(q, Wo.data(), o.rows, o.cols);
            const Errors all = measure(m, Wo);
            double e2 = 0, r2 = 0;
            for (std::int64_t i = 0; i < o.rows; ++i)
                for (std::int64_t j = 0; j < o.cols; ++j) {
                    if (j % 1000 == 0) continue;
                    const double w = Wo[i * o.cols + j], d = w - precision::dequant_at(m, i, j);
                    e2 += d * d, r2 += w * w;
                }
            const double normal = std::sqrt(e2 / r2);
            std::printf("| %gx | %s | %.3g | %.3g | %.1f |\n", mag, precision::describe(q).c_str(), normal, all.rel_fro,
                        all.snr_db);
            auto j = row_json(q, o.cols, all);
            j["outlier_magnitude"] = mag;
            j["rel_fro_normal_weights"] = normal;
            doc["outliers"].push_back(j);
        }
    }
    if (!o.out.empty()) {
        write_json_atomic(o.out, doc);
        std::printf("\nresults: %s\n", o.out.c_str());
    }
    return 0;
}

}  // namespace
}  // namespace mw

// The subcommand's name has a hyphen, hence the _NAMED form.
MW_REGISTER_COMMAND_NAMED(quant_error, "quant-error", [](CLI::App& app) -> mw::CommandAction {
    auto* sub = app.add_subcommand("quant-error", "quantization error per format and group size, and the outlier experiment");
    auto o = std::make_shared<mw::QuantErrorOptions>();
    sub->add_option("--rows", o->rows, "rows of the weight matrix")->check(CLI::PositiveNumber);
    sub->add_option("--cols", o->cols, "columns (input channels)")->check(CLI::PositiveNumber);
    sub->add_option("--seed", o->seed, "input seed");
    sub->add_option("--out", o->out, "write the table as JSON");
    return [o] { return mw::run_quant_error(*o); };
});
