// Seeded uniforms and draws (kernels/speculative/draw.hpp).
#include "kernels/speculative/draw.hpp"

#include <stdexcept>
#include <string>

namespace mw::speculative {

namespace {

std::uint64_t splitmix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

}  // namespace

double uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
    const std::uint64_t h = splitmix(splitmix(splitmix(seed) ^ stream) ^ index);
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
