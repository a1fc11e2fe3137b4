// Next-token sampling (kernels/model/sampling.hpp).
#include "kernels/model/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "harness/inputs.hpp"

namespace mw::model {

namespace {

// Indices of the k largest logits, largest first (ties: lower index first).
std::vector<int> top_indices(const float* z, int V, int top_k) {
    std::vector<int> idx(static_cast<std::size_t>(V));
    std::iota(idx.begin(), idx.end(), 0);
    const int k = top_k > 0 ? std::min(top_k, V) : V;
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int a, int b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
    idx.resize(std::size_t(k));
    return idx;
}

}  // namespace

std::vector<double> sampling_probs(const float* z, int V, double temperature, int top_k) {
    std::vector<double> p(static_cast<std::size_t>(V), 0.0);
    if (temperature <= 0) {
        p[std::size_t(std::max_element(z, z + V) - z)] = 1;
        return p;
    }
    const auto idx = top_indices(z, V, top_k);
    double sum = 0;
    for (int i : idx) sum += p[std::size_t(i)] = std::exp((double(z[i]) - z[idx[0]]) / temperature);
    for (double& x : p) x /= sum;
    return p;
}

int sample_token(const float* z, int V, double temperature, int top_k, std::uint64_t seed, std::int64_t draw) {
    if (temperature <= 0) return int(std::max_element(z, z + V) - z);
    const auto idx = top_indices(z, V, top_k);
    std::vector<double> w(idx.size());
    double sum = 0;
    for (std::size_t j = 0; j < idx.size(); ++j) sum += w[j] = std::exp((double(z[idx[j]]) - z[idx[0]]) / temperature);
    // Uniform in [0, sum) from the hash's top 53 bits.
    const double u = double(mix_seed(seed, "sample" + std::to_string(draw)) >> 11) * 0x1.0p-53 * sum;
    double acc = 0;
    for (std::size_t j = 0; j < idx.size(); ++j)
        if ((acc += w[j]) > u) return idx[j];
    return idx.back();
}

}  // namespace mw::model
