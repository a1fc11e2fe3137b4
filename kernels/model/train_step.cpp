// The fp32 training step of the model stack (kernels/model/model_cpu.hpp):
// the embedding, the blocks (kernels/model/block_cpu.cpp), the tied head and
// the loss; and AdamW and gradient clipping.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/model/model_cpu.hpp"
#include "kernels/vectorization/gemm_cpu.hpp"

namespace mw::model::cpu {

using gemm::View;

TrainStep::TrainStep(const Config& c, int batch, int seq)
    : c_(c), block_(c, batch, seq), N_(std::int64_t(batch) * seq) {
    const std::size_t N = std::size_t(N_), d = c.d_model;
    const BlockSizes sizes(c, batch, seq);
    x_.assign(std::size_t(c.layers) + 1, std::vector<float>(N * d));
    for (int l = 0; l < c.layers; ++l) layer_.emplace_back(sizes, true, true);
    xf_.resize(N * d), rf_.resize(N), z_.resize(N * std::size_t(c.vocab)), dz_.resize(z_.size());
    dx_.resize(N * d), dxf_.resize(N * d);
}

void TrainStep::set_seq(int seq) {
    block_.set_seq(seq);
    N_ = block_.rows();
}

double TrainStep::forward(const float* params, const int* tokens, const int* targets, float* logits) {
    const auto P = bind(c_, params);
    const int d = c_.d_model, V = c_.vocab;
    const std::int64_t N = N_;
    for (std::int64_t r = 0; r < N; ++r) {
        if (tokens[r] < 0 || tokens[r] >= V || targets[r] < 0 || targets[r] >= V)
            throw std::invalid_argument("token at row " + std::to_string(r) + " outside 0.." + std::to_string(V - 1));
        std::copy(P.embed + std::size_t(tokens[r]) * d, P.embed + std::size_t(tokens[r] + 1) * d,
                  x_[0].data() + r * d);
    }
    for (int l = 0; l < c_.layers; ++l)
        block_.forward(P.layer[std::size_t(l)], x_[std::size_t(l)].data(), layer_[std::size_t(l)].acts,
                       x_[std::size_t(l) + 1].data());
    rmsnorm_forward(x_.back().data(), P.final_norm, xf_.data(), rf_.data(), N, d, float(c_.norm_eps));
    gemm::gemm_ex(View::rows(xf_.data(), d), View::transposed(P.embed, d), z_.data(), V, int(N), V, d, false);
    if (logits) std::copy(z_.data(), z_.data() + N * V, logits);
    return cross_entropy(z_.data(), targets, N, V, dz_.data(), 1.0f / float(N)) / double(N);
}

double TrainStep::forward_backward(const float* params, float* grads, const int* tokens, const int* targets) {
    const double loss = forward(params, tokens, targets);
    const auto P = bind(c_, params);
    const auto G = bind(c_, grads);
    const int d = c_.d_model, V = c_.vocab;
    const std::int64_t N = N_;
    // Head: z = xf E^T, dz from cross_entropy; dxf = dz E; dE += dz^T xf.
    gemm::gemm_ex(View::rows(dz_.data(), V), View::rows(P.embed, d), dxf_.data(), d, int(N), d, V, false);
    gemm::gemm_ex(View::transposed(dz_.data(), V), View::rows(xf_.data(), d), G.embed, d, V, d, int(N), true);
    std::fill(dx_.begin(), dx_.end(), 0.0f);
    rmsnorm_backward(x_.back().data(), P.final_norm, rf_.data(), dxf_.data(), dx_.data(), G.final_norm, N, d);
    for (int l = c_.layers - 1; l >= 0; --l)
        block_.backward(P.layer[std::size_t(l)], G.layer[std::size_t(l)], x_[std::size_t(l)].data(),
                        layer_[std::size_t(l)].acts, dx_.data());
    // Embedding gather: rows of dE receive the gradient of every row that read them.
    for (std::int64_t r = 0; r < N; ++r) {
        float* ge = G.embed + std::size_t(tokens[r]) * d;
        const float* g = dx_.data() + r * d;
        for (int i = 0; i < d; ++i) ge[i] += g[i];
    }
    return loss;
}

AdamW::AdamW(const Config& c) {
    const std::size_t n = param_count(c);
    m.assign(n, 0.0f), v.assign(n, 0.0f), decay.assign(n, 0);
    for (const auto& t : layout(c))
        if (t.shape.size() == 2) std::fill(decay.begin() + std::ptrdiff_t(t.offset), decay.begin() + std::ptrdiff_t(t.offset + t.count), 1);
}

void AdamW::update(float* params, const float* grads, float lr_now) {
    ++step;
    const float bc1 = 1.0f - std::pow(beta1, float(step)), bc2 = 1.0f - std::pow(beta2, float(step));
    const std::int64_t n = std::int64_t(m.size());
    const float b1 = beta1, b2 = beta2, e = eps, wd = weight_decay;
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
        const float g = grads[i];
        m[std::size_t(i)] = b1 * m[std::size_t(i)] + (1 - b1) * g;
        v[std::size_t(i)] = b2 * v[std::size_t(i)] + (1 - b2) * g * g;
        const float mh = m[std::size_t(i)] / bc1, vh = v[std::size_t(i)] / bc2;
        params[i] -= lr_now * (mh / (std::sqrt(vh) + e) + (decay[std::size_t(i)] ? wd * params[i] : 0.0f));
    }
}

double clip_grad_norm(float* grads, std::size_t n, double max_norm) {
    // Fixed chunks summed in order: the same norm on every run and thread count.
    constexpr std::size_t kChunk = 1 << 16;
    std::vector<double> part((n + kChunk - 1) / kChunk, 0.0);
#pragma omp parallel for schedule(static)
    for (std::size_t c = 0; c < part.size(); ++c) {
        double s = 0;
        for (std::size_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) s += double(grads[i]) * grads[i];
        part[c] = s;
    }
    double ss = 0;
    for (double s : part) ss += s;
    const double norm = std::sqrt(ss);
    if (norm > max_norm) {
        const float s = float(max_norm / norm);
#pragma omp parallel for simd schedule(static)
        for (std::size_t i = 0; i < n; ++i) grads[i] *= s;
    }
    return norm;
}

}  // namespace mw::model::cpu
