// Seeded uniforms and draws (kernels/speculative/draw.hpp).
#include "kernels/speculative/draw.hpp"

#include <stdexcept>
#include <string>

#include "harness/splitmix.hpp"

namespace mw::speculative {

double uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
    const std::uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ index);
    return double(h >> 11) * 0x1.0p-53;
}

int draw(const double* w, int V, double r) {
    double sum = 0;
    for (int i = 0; i < V; ++i) sum += w[i];
    if (!(sum > 0)) throw std::invalid_argument("draw: the weights sum to " + std::to_string(sum) + ", not > 0");
    const double target = r * sum;
    double acc = 0;
    int last = -1;
    for (int i = 0; i < V; ++i) {
        if (w[i] <= 0) continue;
        last = i;
        if ((acc += w[i]) > target) return i;
    }
    return last;  // r * sum rounded up to the total: the last category with weight
}

}  // namespace mw::speculative
